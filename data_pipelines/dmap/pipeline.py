"""DMAP over texts with any backend: intervals, randomised samples, chi-square, density, plot.

``map_texts(backend, texts)`` scores every text once (full distributions on the HF engine; top-k
approximations on vLLM / HTTP, flagged ``exact=False``) and pools the positions of all texts. Tokens tied
in probability share one interval (``TokenScores.tied_mass``, see ``core``); a backend that does not
report ``tied_mass`` gets the paper's interval, and the result says so (``ties_split=False``).
``map_texts`` is ``pool_scores(score_texts(...))``: scoring is per text (the intervals and entropies of
its positions), pooling is whole-dataset (one seeded uniform draw per position, in input order).

``run_dmap`` is the CLI body (``posttrain data dmap``). With ``--input`` the scoring is a resumable stage
on the Ray data backbone (``make_dmap_stage`` in an ``ActorStage``: the scorer is loaded once per actor;
``--num_workers``, ``--ray_address``): ``parts/`` holds each block's per-text intervals, ``scores.jsonl``
all of them merged, and the pooled map follows from those, so a run killed and restarted writes the same
files as an uninterrupted one. With no ``--input`` it runs the embedded demo in this process (its texts
are sampled by the same backend first): texts pure-sampled from the corpus LM (expected: uniform,
chi-square passes), the same model with top-k and with a low temperature (expected: head-biased,
chi-square fails), and the built-in corpus (text the model did not write).
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from data_pipelines.common.backends import encode_text, engine_label
from data_pipelines.common.resources import actor_gpus
from data_pipelines.common.runner import add_backbone_args
from data_pipelines.dmap.core import (
    Chi2Result,
    chi2_uniform,
    dmap_samples,
    intervals_from_scores,
    weighted_histogram,
)
from posttrain.common.files import atomic_write_text
from posttrain.engines.base import SamplingParams

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


def score_texts(backend, texts: list[str] | list[list[int]],
                max_tokens: int = MAX_TOKENS_PER_TEXT) -> list[dict]:
    """Per text: DMAP intervals ``a``/``b`` and entropies ``h`` of its positions (float64 lists), whether
    they are exact, whether tied tokens were split (``ties_split``), and the scorer's label."""
    seqs = [encode_text(backend.tokenizer, t)[: max_tokens + 1] if isinstance(t, str) else t for t in texts]
    out = []
    for s in backend.score(seqs, entropy=True, mass_above=True):
        tied = torch.tensor(s.tied_mass) if s.tied_mass is not None else None
        a, b = intervals_from_scores(torch.tensor(s.mass_above), torch.tensor(s.logprobs), tied)
        out.append({"a": a.tolist(), "b": b.tolist(), "h": torch.tensor(s.entropies, dtype=torch.float64).tolist(),
                    "exact": s.exact, "ties_split": tied is not None, "scorer": engine_label(backend)})
    return out


def pool_scores(scored: list[dict], *, seed: int = 42, bins: int | None = None, plot_bins: int = 40,
                lam: float = 2.0) -> DmapResult:
    """DMAP of the texts behind ``scored`` (``score_texts`` records, in order); ``seed`` drives the uniform
    draws inside the pooled intervals."""
    if not scored:
        raise ValueError("DMAP needs at least one scored text")
    ties_split = all(s["ties_split"] for s in scored)
    if not ties_split:
        logger.warning("%s does not report tied_mass: tokens tied in probability share the paper's interval, "
                       "so the map is not uniform where ties occur (bf16 logits)", scored[0]["scorer"])
    a = torch.cat([torch.tensor(s["a"], dtype=torch.float64) for s in scored])
    b = torch.cat([torch.tensor(s["b"], dtype=torch.float64) for s in scored])
    h = torch.cat([torch.tensor(s["h"], dtype=torch.float64) for s in scored])
    x = dmap_samples(a, b, torch.Generator().manual_seed(seed))
    return DmapResult(a, b, h, x, chi2_uniform(x, bins), weighted_histogram(a, b, h, plot_bins, lam),
                      all(s["exact"] for s in scored), len(scored), ties_split)


def map_texts(backend, texts: list[str] | list[list[int]], *, seed: int = 42, bins: int | None = None,
              plot_bins: int = 40, lam: float = 2.0, max_tokens: int = MAX_TOKENS_PER_TEXT) -> DmapResult:
    """DMAP of ``texts`` under ``backend``'s model; ``seed`` drives the uniform draws inside intervals."""
    if not texts:
        raise ValueError("map_texts needs at least one text")
    return pool_scores(score_texts(backend, texts, max_tokens), seed=seed, bins=bins, plot_bins=plot_bins, lam=lam)


def make_dmap_stage(model: str | None, device: str, batch_size: int, top_logprobs: int, tokenizer: str | None,
                    max_tokens: int, text_field: str):
    """The scoring stage, built once per Ray actor: records -> ``score_texts`` rows of their ``text_field``; a
    text the scorer's tokenizer cannot represent exactly (non-ASCII under the embedded character model) is a
    reject naming where, never scored as the other text its ``<unk>`` tokens spell."""
    from data_pipelines.common.backends import load_backend
    from data_pipelines.common.representable import representation_problem
    from data_pipelines.common.runner import Reject

    backend = load_backend(model, device=device, batch_size=batch_size, top_k=top_logprobs, tokenizer=tokenizer)

    def process(batch: list[dict]) -> list[dict | Reject]:
        problems = [representation_problem(backend.tokenizer, r[text_field]) for r in batch]
        texts = [r[text_field] for r, problem in zip(batch, problems) if problem is None]
        scored = iter(score_texts(backend, texts, max_tokens) if texts else [])
        return [Reject(f"field {text_field!r}: {problem}") if problem else next(scored) for problem in problems]

    return process


def _validate_text(text_field: str, record: dict) -> str | None:
    text = record.get(text_field)
    return None if isinstance(text, str) and text else f"field {text_field!r} missing, empty or not a string"


def _score_input(args, out_dir: Path) -> list[dict]:
    """``--input``'s texts scored on the data backbone (resumable parts, merged ``scores.jsonl``)."""
    from data_pipelines.common.backends import model_identity
    from data_pipelines.common.runner import ActorStage, StageRunner, runner_options

    stage = ActorStage(functools.partial(make_dmap_stage, args.model, args.device, args.batch_size,
                                         args.top_logprobs, args.tokenizer, args.max_tokens, args.text_field),
                       num_actors=args.num_workers, num_gpus=actor_gpus([args.model], args.device))
    runner = StageRunner(out_dir / "parts", stage, chunk_size=args.chunk_size, batch_size=args.batch_size,
                         validate=functools.partial(_validate_text, args.text_field),
                         config={"model": model_identity(args.model, tokenizer=args.tokenizer),
                                 "tokenizer": args.tokenizer, "top_logprobs": args.top_logprobs,
                                 "max_tokens": args.max_tokens, "text_field": args.text_field},
                         desc="dmap", progress=not args.no_progress, **runner_options(args))
    summary = runner.run(args.input, limit=args.limit)
    print(f"blocks: {summary.chunks_run} run, {summary.chunks_done_before} already done; "
          f"{summary.records_out} texts scored, {summary.records_rejected} rejected")
    runner.merge(out_dir / "scores.jsonl", summary.num_records)
    return list(runner.iter_outputs())


def _demo_texts(backend, n: int, max_new_tokens: int, seed: int) -> dict[str, list[list[int]]]:
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
    from data_pipelines.dmap.core import plot_histogram

    out_dir = Path(args.output)
    out_dir.mkdir(parents=True, exist_ok=True)
    groups: dict[str, list[dict]] = {}
    if args.input:
        groups[Path(str(args.input)).stem] = _score_input(args, out_dir)
    else:
        from data_pipelines.common.backends import load_backend
        from data_pipelines.common.corpus import make_corpus

        backend = load_backend(args.model, device=args.device, batch_size=args.batch_size, top_k=args.top_logprobs,
                               tokenizer=args.tokenizer)
        texts = _demo_texts(backend, args.demo_samples, args.demo_tokens, args.seed)
        texts["corpus"] = [d["text"] for d in make_corpus(seed=args.seed).documents]
        groups = {label: score_texts(backend, t, args.max_tokens) for label, t in texts.items()}
    model = next((rows[0]["scorer"] for rows in groups.values() if rows), args.model)
    report = {"model": model, "seed": args.seed, "alpha": args.alpha, "groups": {}}
    for label, scored in groups.items():
        try:
            result = pool_scores(scored, seed=args.seed, bins=args.bins, plot_bins=args.plot_bins, lam=args.lam)
        except ValueError as err:
            raise SystemExit(f"error: group {label!r}: {err} (see the rejects in {out_dir / 'parts'})") from None
        summary = result.summary()
        summary["uniform_at_alpha"] = result.chi2.p_value >= args.alpha
        report["groups"][label] = summary
        png = out_dir / f"dmap_{label}.png"
        plot_histogram(result.density, str(png), title=f"DMAP {label} ({report['model']})", chi2=result.chi2,
                       samples=result.x)
        print(f"{label:10s} tokens={summary['num_tokens']:6d} chi2={result.chi2.statistic:9.2f} "
              f"k={result.chi2.bins:3d} p={result.chi2.p_value:.3g} "
              f"{'uniform' if summary['uniform_at_alpha'] else 'NOT uniform'}  exact={result.exact}  -> {png}")
    atomic_write_text(out_dir / "dmap_report.json", json.dumps(report, indent=2) + "\n")
    print(f"report: {out_dir / 'dmap_report.json'}")
    return 0


def add_dmap_args(parser) -> None:
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
