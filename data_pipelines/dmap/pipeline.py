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

import argparse
import functools
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from data_pipelines.common.backends import encode_text, engine_label
from data_pipelines.common.resources import actor_gpus
from data_pipelines.common.runner import ActorStage, Reject, StageRunner
from data_pipelines.dmap.core import (
    Chi2Result,
    chi2_uniform,
    dmap_samples,
    intervals_from_scores,
    weighted_histogram,
)
from data_pipelines.dmap.options import MAX_TOKENS_PER_TEXT, DmapConfig
from posttrain.common.files import atomic_write_text
from posttrain.engines.base import SamplingParams

logger = logging.getLogger(__name__)



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


def _score_input(config: DmapConfig, out_dir: Path) -> list[dict]:
    """``--input``'s texts scored on the data backbone (resumable parts, merged ``scores.jsonl``)."""
    from data_pipelines.common.backends import model_identity

    stage = ActorStage(functools.partial(make_dmap_stage, config.model, config.device, config.batch_size,
                                         config.top_logprobs, config.tokenizer, config.max_tokens, config.text_field),
                       num_actors=config.backbone.num_workers, num_gpus=actor_gpus([config.model], config.device))
    runner = StageRunner(out_dir / "parts", stage, chunk_size=config.chunk_size, batch_size=config.batch_size,
                         validate=functools.partial(_validate_text, config.text_field),
                         config={"model": model_identity(config.model, tokenizer=config.tokenizer),
                                 "tokenizer": config.tokenizer, "top_logprobs": config.top_logprobs,
                                 "max_tokens": config.max_tokens, "text_field": config.text_field},
                         desc="dmap", progress=config.progress, **config.backbone.runner_kwargs())
    summary = runner.run(config.input, limit=config.limit)
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


def run_dmap(args: argparse.Namespace) -> int:
    """The CLI edge: the flags parsed into a ``DmapConfig``; the map of each group plotted and reported."""
    from data_pipelines.dmap.core import plot_histogram

    config = DmapConfig.from_args(args)
    out_dir = Path(config.output)
    out_dir.mkdir(parents=True, exist_ok=True)
    groups: dict[str, list[dict]] = {}
    if config.input:
        groups[Path(str(config.input)).stem] = _score_input(config, out_dir)
    else:
        from data_pipelines.common.backends import load_backend
        from data_pipelines.common.corpus import make_corpus

        backend = load_backend(config.model, device=config.device, batch_size=config.batch_size,
                               top_k=config.top_logprobs, tokenizer=config.tokenizer)
        texts = _demo_texts(backend, config.demo_samples, config.demo_tokens, config.seed)
        texts["corpus"] = [d["text"] for d in make_corpus(seed=config.seed).documents]
        groups = {label: score_texts(backend, t, config.max_tokens) for label, t in texts.items()}
    model = next((rows[0]["scorer"] for rows in groups.values() if rows), config.model)
    report = {"model": model, "seed": config.seed, "alpha": config.alpha, "groups": {}}
    for label, scored in groups.items():
        try:
            result = pool_scores(scored, seed=config.seed, bins=config.bins, plot_bins=config.plot_bins,
                                 lam=config.lam)
        except ValueError as err:
            raise SystemExit(f"error: group {label!r}: {err} (see the rejects in {out_dir / 'parts'})") from None
        summary = result.summary()
        summary["uniform_at_alpha"] = result.chi2.p_value >= config.alpha
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
