"""``posttrain data dmap``'s flags (``add_dmap_args``) and the typed options they parse into once, at the CLI edge
(``DmapConfig.from_args``)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from data_pipelines.common.options import BackboneOptions, add_backbone_args, namespace_values

MAX_TOKENS_PER_TEXT = 2000  # the official code truncates inputs to 2,000 tokens


def add_dmap_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None, help="HF path/hub id, vllm:PATH, or http://host:port/v1#model "
                        "(default: the embedded tiny corpus LM)")
    parser.add_argument("--tokenizer", default=None, help="HF tokenizer for an HTTP backend (to send token ids)")
    parser.add_argument("--input", default=None, help="JSONL / Parquet / save_to_disk folder / hub dataset of "
                        "texts (default: embedded demo: pure vs top-k vs low-temperature samples + built-in corpus)")
    parser.add_argument("--text_field", default="text", help="record field holding the text (default: text)")
    parser.add_argument("--output", default="dmap_out", help="folder for PNG plots and dmap_report.json")
    parser.add_argument("--device", default="cpu", help="torch device for the HF backend")
    parser.add_argument("--batch_size", type=int, default=16, help="scoring batch size")
    parser.add_argument("--top_logprobs", type=int, default=20, help="top-k log-probs for vLLM/HTTP (approximate)")
    parser.add_argument("--bins", type=int, default=None, help="chi-square bins (default: ceil((2T)^(1/3)); "
                        "the official code uses 4)")
    parser.add_argument("--plot_bins", type=int, default=40, help="bins of the entropy-weighted density (paper: 40)")
    parser.add_argument("--lam", type=float, default=2.0, help="entropy cap lambda in nats (paper: 2)")
    parser.add_argument("--alpha", type=float, default=0.01, help="significance level of the uniformity verdict")
    parser.add_argument("--max_tokens", type=int, default=MAX_TOKENS_PER_TEXT, help="tokens scored per text")
    parser.add_argument("--limit", type=int, default=None, help="use at most this many texts")
    parser.add_argument("--seed", type=int, default=42, help="seed of the uniform draws and of the demo sampling")
    parser.add_argument("--demo_samples", type=int, default=32, help="demo: texts per decoding setting")
    parser.add_argument("--demo_tokens", type=int, default=128, help="demo: tokens per sampled text")
    parser.add_argument("--chunk_size", type=int, default=64, help="--input: texts per resumable block")
    parser.add_argument("--no_progress", action="store_true", help="hide the progress bar")
    add_backbone_args(parser)


@dataclass(frozen=True)
class DmapConfig:
    """One DMAP run, as its flags set it (``from_args``)."""

    model: str | None
    """Scorer's engine spec (None: the embedded tiny corpus LM)."""
    tokenizer: str | None
    """Tokenizer of an HTTP scorer (to send token ids)."""
    input: str | None
    """Texts to map (None: the embedded demo)."""
    text_field: str
    """Record field holding the text."""
    output: str
    """Folder of the PNG plots, dmap_report.json and, with ``input``, the resumable parts."""
    device: str
    """Torch device of the HF scorer."""
    batch_size: int
    """Scoring batch size."""
    top_logprobs: int
    """Top-k log-probs of a vLLM / HTTP scorer (approximate maps)."""
    bins: int | None
    """Chi-square bins (None: ceil((2T)^(1/3)))."""
    plot_bins: int
    """Bins of the entropy-weighted density."""
    lam: float
    """Entropy cap lambda in nats."""
    alpha: float
    """Significance level of the uniformity verdict."""
    max_tokens: int
    """Tokens scored per text."""
    limit: int | None
    """Use at most this many input texts (None: all)."""
    seed: int
    """Seed of the uniform draws and of the demo sampling."""
    demo_samples: int
    """Demo: texts per decoding setting."""
    demo_tokens: int
    """Demo: tokens per sampled text."""
    chunk_size: int
    """Input texts per resumable block."""
    progress: bool
    """Show the progress bar (False: ``--no_progress``)."""
    backbone: BackboneOptions
    """How the scoring stage runs on Ray (the backbone flags)."""

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DmapConfig:
        return cls(**namespace_values(cls, args, skip=("progress", "backbone")), progress=not args.no_progress,
                   backbone=BackboneOptions.from_args(args))
