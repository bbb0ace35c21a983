"""``posttrain data sci2pol bench|corpus``: the Sci2Pol-Bench runner and the citation-linked pair miner.

With no arguments, ``bench`` runs the built-in miniature items (all 18 tasks) and ``corpus`` the built-in
policy documents and papers, both on ``smollm2-135m`` (HF engine on CPU) as model and judge.
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from pathlib import Path

from data_pipelines.common.backends import model_identity
from data_pipelines.common.resources import actor_gpus
from data_pipelines.common.runner import ActorStage, StageOutputs, StageRunner
from data_pipelines.sci2pol.options import BenchConfig, CorpusConfig, StageSettings
from posttrain.common.files import atomic_write_jsonl, atomic_write_text


def _engine(spec: str, device: str, batch_size: int, tokenizer: str | None):
    from data_pipelines.common.backends import load_backend

    return load_backend(spec, device=device, batch_size=batch_size, tokenizer=tokenizer, cached=True)


def engine_factory(spec: str, device: str = "cpu", batch_size: int = 8, tokenizer: str | None = None):
    """A zero-argument, picklable factory of the engine named by ``spec`` (one engine per process)."""
    return functools.partial(_engine, spec, device, batch_size, tokenizer)


def _cache_name(identity: dict) -> str:
    """How a model names its entries in the result cache: its spec, plus the hash of its files if local."""
    return identity["spec"] + (f"@{identity['sha256'][:16]}" if "sha256" in identity else "")


def _stage(settings: StageSettings, out: Path, name: str, factory, records: list[dict], identity: dict,
           engine: str) -> StageOutputs:
    """Run the stage ``factory()`` builds (once per actor, each actor reserving a GPU when ``engine`` is
    loaded on a CUDA ``--device``: ``actor_gpus``) over ``records``; its outputs, in input order, and rejects."""
    stage = ActorStage(factory, num_gpus=actor_gpus([engine], settings.device))
    runner = StageRunner(out / name, stage, chunk_size=settings.chunk_size, config=identity, desc=name,
                         progress=settings.progress, **settings.backbone.runner_kwargs())
    summary = runner.run(records)
    print(f"{name}: {summary.records_out} out, {summary.records_rejected} rejected "
          f"({summary.chunks_done_before} chunks already done)")
    return StageOutputs([{k: v for k, v in r.items() if k not in ("_index", "_id")} for r in runner.iter_outputs()],
                        list(runner.iter_rejects()))


def run_bench(args: argparse.Namespace) -> int:
    """The CLI edge of ``sci2pol bench``: the flags parsed into a ``BenchConfig``, then ``bench``."""
    return bench(BenchConfig.from_args(args))


def bench(config: BenchConfig) -> int:
    """Score ``config.model`` on the bench; results.json, responses.jsonl and the scores printed."""
    from data_pipelines.sci2pol.bench import (
        load_bench,
        make_generate_stage,
        make_judge_stage,
        release_papers,
        score_tasks,
    )
    from data_pipelines.sci2pol.embedded import bench_items

    started = time.perf_counter()
    settings = config.stages
    names = list(config.tasks) if config.tasks else None
    if config.bench_dir:
        try:
            items, papers = load_bench(config.bench_dir, names), release_papers(config.bench_dir)
        except (OSError, ValueError) as err:
            raise SystemExit(f"error: {err}") from None
    else:
        papers = None
        items = {t: [{**r, "task": t} for r in rows] for t, rows in bench_items(config.per_task).items()
                 if names is None or t in names}
    rows = [r for task_items in items.values() for r in (task_items[:config.limit] if config.limit else task_items)]
    out = Path(config.output)
    cache = Path(config.cache_dir) if config.cache_dir else out / "cache"
    model, judge_model = (model_identity(spec, tokenizer=settings.tokenizer) for spec in (config.model, config.judge))
    # the result caches are keyed by the model's spec and the hash of its files: a checkpoint retrained at the
    # same path is another model
    gen = functools.partial(make_generate_stage, engine_factory(config.model, settings.device, settings.batch_size,
                                                                settings.tokenizer), _cache_name(model),
                            str(cache / "generations.jsonl"), config.max_new_tokens, config.open_tokens)
    identity = {"model": model, "bench": config.bench_dir, "tasks": sorted(items), "per_task": config.per_task,
                "limit": config.limit, "max_new_tokens": config.max_new_tokens, "open_tokens": config.open_tokens}
    generated = _stage(settings, out, "generate", gen, rows, identity, config.model)
    structured = settings.structured
    judge = functools.partial(make_judge_stage, engine_factory(config.judge, settings.device, settings.batch_size,
                                                               settings.tokenizer), _cache_name(judge_model),
                              str(cache / "judgements.jsonl"), config.judge_tokens, config.judge_retries, structured,
                              papers)
    judged = _stage(settings, out, "judge", judge, generated.records,
                    {**identity, "judge": judge_model, "judge_tokens": config.judge_tokens,
                     "retries": config.judge_retries, "structured": structured}, config.judge)
    rejected = [r["record"] for stage in (generated, judged) for r in stage.rejects
                if isinstance(r.get("record"), dict) and "task" in r["record"]]
    report = {"model": config.model, "judge": config.judge, "structured_output": structured,
              "bench_dir": config.bench_dir or "built-in",
              **score_tasks(judged.records, config.bootstrap, rejected=rejected),
              "seconds": round(time.perf_counter() - started, 1)}
    atomic_write_jsonl(out / "responses.jsonl", judged.records)
    atomic_write_text(out / "results.json", json.dumps(report, indent=2) + "\n")
    for task, t in report["tasks"].items():
        extra = (f"strict {t['strict']:.1f}" if t["metric"] == "micro_f1"
                 else f"judge failures {t['judge_failures']}/{t['n']}")
        extra += f", rejected {t['rejected']}/{t['n']}" if t["rejected"] else ""
        score = "n/a" if t["score"] is None else f"{t['score']:.1f} +- {t['se']:.1f}"
        print(f"{task}: {score} ({extra})")
    print("stages: " + ", ".join(f"{k} {'n/a' if v is None else f'{v:.1f}'}" for k, v in report["stages"].items()))
    overall = "n/a" if report["overall"] is None else f"{report['overall']:.2f}"
    print(f"overall: {overall}; results: {out / 'results.json'}")
    return 0


def run_corpus(args: argparse.Namespace) -> int:
    """The CLI edge of ``sci2pol corpus``: the flags parsed into a ``CorpusConfig``, then ``corpus``."""
    return corpus(CorpusConfig.from_args(args))


def corpus(config: CorpusConfig) -> int:
    """Mine the citation-linked pairs; pairs.jsonl and rejects.jsonl."""
    from data_pipelines.sci2pol.corpus import candidate_pairs, make_judge_stage, make_polish_stage
    from data_pipelines.sci2pol.embedded import STYLE_EXAMPLES, corpus_inputs
    from posttrain.common.jsonl import read_jsonl

    started = time.perf_counter()
    settings = config.stages
    try:
        docs, papers = corpus_inputs() if config.documents is None else (read_jsonl(config.documents),
                                                                         read_jsonl(config.papers))
    except (OSError, ValueError) as err:
        raise SystemExit(f"error: {err}") from None
    table = {}
    for n, p in enumerate(papers):
        if not isinstance(p.get("paper_id"), str) or not isinstance(p.get("text"), str):
            raise SystemExit(f"error: paper record {n} needs string fields 'paper_id' and 'text'")
        table[p["paper_id"]] = p
    out = Path(config.output)
    pairs, rejects = candidate_pairs(docs, table, config.max_citations)
    print(f"candidates: {len(pairs)} pairs from {len(docs)} documents, {len(rejects)} documents rejected")
    judge = engine_factory(config.judge, settings.device, settings.batch_size, settings.tokenizer)
    structured = settings.structured
    base = {"judge": model_identity(config.judge, tokenizer=settings.tokenizer), "retries": config.judge_retries,
            "structured": structured}
    coarse = _stage(settings, out, "coarse", functools.partial(make_judge_stage, judge, config.judge, "coarse",
                                                               config.judge_retries, structured=structured),
                    pairs, base, config.judge)
    fine = _stage(settings, out, "fine", functools.partial(make_judge_stage, judge, config.judge, "fine",
                                                           config.judge_retries, config.long_chars,
                                                           config.max_split_similarity, structured),
                  coarse.records, {**base, "long_chars": config.long_chars,
                                   "max_split_similarity": config.max_split_similarity}, config.judge)
    polisher = config.polisher
    polish = functools.partial(make_polish_stage, engine_factory(polisher, settings.device, settings.batch_size,
                                                                 settings.tokenizer), polisher,
                               STYLE_EXAMPLES[:config.shots], config.polish_tokens)
    final = _stage(settings, out, "polish", polish, fine.records,
                   {"polisher": model_identity(polisher, tokenizer=settings.tokenizer), "shots": config.shots,
                    "tokens": config.polish_tokens}, polisher)
    for name, stage in (("coarse", coarse), ("fine", fine), ("polish", final)):
        rejects += [{"stage": name, **r} for r in stage.rejects]
    atomic_write_jsonl(out / "pairs.jsonl", final.records)
    atomic_write_jsonl(out / "rejects.jsonl", rejects)
    print(f"wrote {len(final.records)} pairs to {out / 'pairs.jsonl'} (columns prompt/answer for --task dataset), "
          f"{len(rejects)} rejects to {out / 'rejects.jsonl'} ({time.perf_counter() - started:.1f}s)")
    return 0


def run_sci2pol(args: argparse.Namespace) -> int:
    if args.sci2pol_command == "bench":
        return run_bench(args)
    return run_corpus(args)
