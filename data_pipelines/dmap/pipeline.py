"""DMAP over texts with any backend: intervals, randomised samples, chi-square, density, plot.

``map_texts(backend, texts)`` scores every text once (full distributions on the HF engine; top-k
approximations on vLLM / HTTP, flagged ``exact=False``) and pools the positions of all texts. Tokens tied
in probability share one interval (``TokenScores.tied_mass``, see ``core``); a backend that does not
report ``tied_mass`` gets the paper's interval, and the result says so (``ties_split=False``).
``run_dmap`` is the CLI body (``posttrain data dmap``); with no ``--input`` it runs the embedded demo:
texts pure-sampled from the corpus LM (expected: uniform, chi-square passes), the same model with top-k
and with a low temperature (expected: head-biased, chi-square fails), and the built-in corpus (text the
model did not write).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from data_pipelines.common.backends import encode_text, engine_label
from data_pipelines.dmap.core import (
    Chi2Result,
    chi2_uniform,
    dmap_samples,
    intervals_from_scores,
    weighted_histogram,
)

logger = logging.getLogger(__name__)

MAX_TOKENS_PER_TEXT = 2000  # the official code truncates inputs to 2,000 tokens


@dataclass
class DmapResult:
    a: torch.Tensor
    b: torch.Tensor
    h: torch.Tensor | None
    x: torch.Tensor
    chi2: Chi2Result
    density: torch.Tensor
    exact: bool
    num_texts: int
    ties_split: bool  # every position's interval covers the mass of the tokens tied with it

    def summary(self) -> dict:
        return {"num_texts": self.num_texts, "num_tokens": int(self.x.numel()), "exact": self.exact,
                "ties_split": self.ties_split,
                "chi2": {k: v for k, v in self.chi2.to_dict().items() if k != "frequencies"},
                "density": [round(v, 4) for v in self.density.tolist()]}


def map_texts(backend, texts: list[str] | list[list[int]], *, seed: int = 42, bins: int | None = None,
              plot_bins: int = 40, lam: float = 2.0, max_tokens: int = MAX_TOKENS_PER_TEXT) -> DmapResult:
    """DMAP of ``texts`` under ``backend``'s model; ``seed`` drives the uniform draws inside intervals."""
    if not texts:
        raise ValueError("map_texts needs at least one text")
    seqs = [encode_text(backend.tokenizer, t)[: max_tokens + 1] if isinstance(t, str) else t for t in texts]
    scores = backend.score(seqs, entropy=True, mass_above=True)
    a_parts, b_parts, h_parts, exact = [], [], [], True
    ties_split = all(s.tied_mass is not None for s in scores)
    if not ties_split:
        logger.warning("%s does not report tied_mass: tokens tied in probability share the paper's interval, "
                       "so the map is not uniform where ties occur (bf16 logits)", engine_label(backend))
    for s in scores:
        tied = torch.tensor(s.tied_mass) if ties_split else None
        a, b = intervals_from_scores(torch.tensor(s.mass_above), torch.tensor(s.logprobs), tied)
        a_parts.append(a)
        b_parts.append(b)
        h_parts.append(torch.tensor(s.entropies, dtype=torch.float64))
        exact = exact and s.exact
    a, b, h = torch.cat(a_parts), torch.cat(b_parts), torch.cat(h_parts)
    x = dmap_samples(a, b, torch.Generator().manual_seed(seed))
    return DmapResult(a, b, h, x, chi2_uniform(x, bins), weighted_histogram(a, b, h, plot_bins, lam), exact,
                      len(texts), ties_split)


def _demo_texts(backend, n: int, max_new_tokens: int, seed: int) -> dict[str, list[list[int]]]:
    from posttrain.rollout.base import SamplingParams

    bos = backend.tokenizer.bos_token_id
    prompts = [[bos]] * n
    out = {}
    for label, params in {
        "pure": SamplingParams(max_new_tokens=max_new_tokens, temperature=1.0, seed=seed),
        "top_k5": SamplingParams(max_new_tokens=max_new_tokens, temperature=1.0, top_k=5, seed=seed),
        "temp0.5": SamplingParams(max_new_tokens=max_new_tokens, temperature=0.5, seed=seed),
    }.items():
        rollouts = backend.generate(prompts, params)
        # score [bos] + completion: exactly the tokens the model sampled, in the context it sampled them
        out[label] = [[bos] + ids for ids in rollouts.completion_ids if ids]
    return out


def run_dmap(args) -> int:
    from data_pipelines.common.backends import load_backend
    from data_pipelines.common.io import open_source
    from data_pipelines.dmap.core import plot_histogram

    backend = load_backend(args.model, device=args.device, batch_size=args.batch_size, top_k=args.top_logprobs,
                           tokenizer=args.tokenizer)
    out_dir = Path(args.output)
    out_dir.mkdir(parents=True, exist_ok=True)
    groups: dict[str, list] = {}
    if args.input:
        source = open_source(args.input)
        texts = []
        for record in source.chunk(0, len(source)):
            if isinstance(record, dict) and isinstance(record.get(args.text_field), str) and record[args.text_field]:
                texts.append(record[args.text_field])
        if args.limit:
            texts = texts[: args.limit]
        groups[Path(str(args.input)).stem] = texts
    else:
        from data_pipelines.common.corpus import make_corpus

        groups.update(_demo_texts(backend, args.demo_samples, args.demo_tokens, args.seed))
        groups["corpus"] = [d["text"] for d in make_corpus(seed=args.seed).documents]
    report = {"model": engine_label(backend), "seed": args.seed, "alpha": args.alpha, "groups": {}}
    for label, texts in groups.items():
        result = map_texts(backend, texts, seed=args.seed, bins=args.bins, plot_bins=args.plot_bins, lam=args.lam,
                           max_tokens=args.max_tokens)
        summary = result.summary()
        summary["uniform_at_alpha"] = result.chi2.p_value >= args.alpha
        report["groups"][label] = summary
        png = out_dir / f"dmap_{label}.png"
        plot_histogram(result.density, str(png), title=f"DMAP {label} ({report['model']})", chi2=result.chi2,
                       samples=result.x)
        print(f"{label:10s} tokens={summary['num_tokens']:6d} chi2={result.chi2.statistic:9.2f} "
              f"k={result.chi2.bins:3d} p={result.chi2.p_value:.3g} "
              f"{'uniform' if summary['uniform_at_alpha'] else 'NOT uniform'}  exact={result.exact}  -> {png}")
    (out_dir / "dmap_report.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"report: {out_dir / 'dmap_report.json'}")
    return 0


def add_dmap_args(parser) -> None:
    parser.add_argument("--model", default=None, help="HF path/hub id, vllm:PATH, or http://host:port/v1#model "
                        "(default: the embedded tiny corpus LM)")
    parser.add_argument("--tokenizer", default=None, help="HF tokenizer for an HTTP backend (to send token ids)")
    parser.add_argument("--input", default=None, help="JSONL / Parquet / save_to_disk folder / hub dataset of "
                        "texts (default: embedded demo: pure vs top-k vs low-temperature samples + built-in corpus)")
    parser.add_argument("--text-field", default="text", help="record field holding the text (default: text)")
    parser.add_argument("--output", default="dmap_out", help="folder for PNG plots and dmap_report.json")
    parser.add_argument("--device", default="cpu", help="torch device for the HF backend")
    parser.add_argument("--batch-size", type=int, default=16, help="scoring batch size")
    parser.add_argument("--top-logprobs", type=int, default=20, help="top-k log-probs for vLLM/HTTP (approximate)")
    parser.add_argument("--bins", type=int, default=None, help="chi-square bins (default: ceil((2T)^(1/3)); "
                        "the official code uses 4)")
    parser.add_argument("--plot-bins", type=int, default=40, help="bins of the entropy-weighted density (paper: 40)")
    parser.add_argument("--lam", type=float, default=2.0, help="entropy cap lambda in nats (paper: 2)")
    parser.add_argument("--alpha", type=float, default=0.01, help="significance level of the uniformity verdict")
    parser.add_argument("--max-tokens", type=int, default=MAX_TOKENS_PER_TEXT, help="tokens scored per text")
    parser.add_argument("--limit", type=int, default=None, help="use at most this many texts")
    parser.add_argument("--seed", type=int, default=42, help="seed of the uniform draws and of the demo sampling")
    parser.add_argument("--demo-samples", type=int, default=32, help="demo: texts per decoding setting")
    parser.add_argument("--demo-tokens", type=int, default=128, help="demo: tokens per sampled text")
