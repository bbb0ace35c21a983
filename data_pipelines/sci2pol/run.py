"""``posttrain data sci2pol bench|corpus``: the Sci2Pol-Bench runner and the citation-linked pair miner.

With no arguments, ``bench`` runs the built-in miniature items (all 18 tasks) and ``corpus`` the built-in
policy documents and papers, both on ``smollm2-135m`` (HF engine on CPU) as model and judge.
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path

from data_pipelines.common.backends import model_identity
from data_pipelines.common.resources import actor_gpus
from data_pipelines.common.runner import ActorStage, StageRunner, add_backbone_args, runner_options
from posttrain.common.files import atomic_write_jsonl, atomic_write_text

DEFAULT_MODEL = "smollm2-135m"
DEMO_BUDGETS = {"max_new_tokens": 16, "open_tokens": 96, "judge_tokens": 96}
"""Token budgets on the built-in miniature items (one-letter labels, two-sentence answers, a 4-5 key JSON)."""
RELEASE_BUDGETS = {"max_new_tokens": 256, "open_tokens": 2048, "judge_tokens": 256}
"""Token budgets with ``--bench_dir`` (the release, or a user's data): room for a label with its explanation
or a task-18 JSON verdict, for a full policy brief (the expert briefs run to about a thousand words; the
paper's models decode with their providers' defaults) and for a judge's JSON in a code fence."""


def _engine(spec: str, device: str, batch_size: int, tokenizer: str | None):
    from data_pipelines.common.backends import load_backend

    return load_backend(spec, device=device, batch_size=batch_size, tokenizer=tokenizer, cached=True)


def engine_factory(spec: str, device: str = "cpu", batch_size: int = 8, tokenizer: str | None = None):
    """A zero-argument, picklable factory of the engine named by ``spec`` (one engine per process)."""
    return functools.partial(_engine, spec, device, batch_size, tokenizer)


def _common(p) -> None:
    p.add_argument("--device", default="cpu", help="torch device of the HF engines")
    p.add_argument("--batch_size", type=int, default=8, help="generation batch size of the HF engines")
    p.add_argument("--tokenizer", default=None, help="tokenizer of an HTTP engine (http://host:port/v1#model)")
    p.add_argument("--chunk_size", type=int, default=16, help="records per resumable chunk")
    p.add_argument("--no_progress", action="store_true", help="hide the progress bars")
    p.add_argument("--no_structured_output", action="store_true", help="ask the judges for free text (their first "
                   "key prefilled) instead of JSON decoded under the answer's schema: the ablation")
    add_backbone_args(p)


def add_sci2pol_args(parser) -> None:
    sub = parser.add_subparsers(dest="sci2pol_command", required=True)
    bench = sub.add_parser("bench", help="score a model on Sci2Pol-Bench (18 tasks)")
    bench.add_argument("--model", default=DEFAULT_MODEL, help="model under test: 'smollm2-135m' (default), "
                       "'tiny' (the embedded corpus LM), an HF folder/hub id, vllm:PATH or http://host:port/v1#model")
    bench.add_argument("--judge", default=DEFAULT_MODEL, help="judge model of tasks 7-15 (same forms as --model); "
                       "scores are comparable only under the same judge")
    bench.add_argument("--bench_dir", default=None, help="folder of taskN.jsonl rows {id, query, answer} (the "
                       "release loads unchanged); default: the built-in miniature items")
    bench.add_argument("--tasks", default=None, help="comma-separated task names (e.g. task1,task7); default: all")
    bench.add_argument("--per_task", type=int, default=2, help="built-in items per task")
    bench.add_argument("--limit", type=int, default=0, help="at most this many items per task (0 = all)")
    for flag, what in (("max-new-tokens", "answer tokens of classification tasks"),
                       ("open-tokens", "answer tokens of open-ended tasks 7-15"), ("judge-tokens", "judge output tokens")):
        key = flag.replace("-", "_")
        bench.add_argument(f"--{flag}", type=int, default=None, help=f"{what} (default: {DEMO_BUDGETS[key]} on the "
                           f"built-in items, {RELEASE_BUDGETS[key]} with --bench_dir)")
    bench.add_argument("--judge_retries", type=int, default=2, help="retries of an invalid judge output")
    bench.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples of the SEs (paper: 1000)")
    bench.add_argument("--output", default="sci2pol_bench_out", help="output folder (parts, cache, results.json)")
    bench.add_argument("--cache_dir", default=None, help="result cache folder (default: OUTPUT/cache)")
    _common(bench)
    corpus = sub.add_parser("corpus", help="mine citation-linked paper/brief SFT pairs")
    corpus.add_argument("--documents", default=None, help="policy documents JSONL {policy_id, text, cited_papers}"
                        " (default: built-in)")
    corpus.add_argument("--papers", default=None, help="papers JSONL {paper_id, abstract, text} (default: built-in)")
    corpus.add_argument("--judge", default=DEFAULT_MODEL, help="model of the two relevance passes")
    corpus.add_argument("--polisher", default=None, help="model of the style polishing (default: --judge)")
    corpus.add_argument("--max_citations", type=int, default=3, help="keep documents citing at most k papers (paper: 3)")
    corpus.add_argument("--long_chars", type=int, default=3000, help="documents longer than this are split "
                        "into executive summary (brief) and remainder (paper)")
    corpus.add_argument("--max_split_similarity", type=float, default=0.5, help="reject split pairs whose "
                        "halves have a higher word 5-gram Jaccard similarity")
    corpus.add_argument("--shots", type=int, default=3, help="style examples in the polishing prompt (paper: 3)")
    corpus.add_argument("--polish_tokens", type=int, default=128, help="tokens of the polished brief")
    corpus.add_argument("--judge_retries", type=int, default=2, help="retries of an unparsable verdict")
    corpus.add_argument("--output", default="sci2pol_corpus_out", help="output folder (parts, pairs.jsonl, rejects)")
    _common(corpus)


def _cache_name(identity: dict) -> str:
    """How a model names its entries in the result cache: its spec, plus the hash of its files if local."""
    return identity["spec"] + (f"@{identity['sha256'][:16]}" if "sha256" in identity else "")


def _stage(out: Path, name: str, factory, records: list[dict], args, config: dict, engine: str) -> list[dict]:
    """Run the stage ``factory()`` builds (once per actor, each actor reserving a GPU when ``engine`` is
    loaded on a CUDA ``--device``: ``actor_gpus``) over ``records``; its outputs, in input order."""
    stage = ActorStage(factory, num_gpus=actor_gpus([engine], args.device))
    runner = StageRunner(out / name, stage, chunk_size=args.chunk_size, config=config, desc=name,
                         progress=not args.no_progress, **runner_options(args))
    summary = runner.run(records)
    print(f"{name}: {summary.records_out} out, {summary.records_rejected} rejected "
          f"({summary.chunks_done_before} chunks already done)")
    return [{k: v for k, v in r.items() if k not in ("_index", "_id")} for r in runner.iter_outputs()]


def resolve_budgets(args) -> None:
    """Fill the token budgets left unset: ``DEMO_BUDGETS`` on the built-in items, ``RELEASE_BUDGETS`` with
    ``--bench_dir``; a budget below 1 is an error naming its flag."""
    for name, default in (RELEASE_BUDGETS if args.bench_dir else DEMO_BUDGETS).items():
        if getattr(args, name) is None:
            setattr(args, name, default)
        elif getattr(args, name) < 1:
            raise SystemExit(f"error: --{name} must be >= 1, got {getattr(args, name)}")


def run_bench(args) -> int:
    from data_pipelines.sci2pol.bench import (
        load_bench,
        make_generate_stage,
        make_judge_stage,
        release_papers,
        score_tasks,
    )
    from data_pipelines.sci2pol.embedded import bench_items

    started = time.perf_counter()
    resolve_budgets(args)
    names = args.tasks.split(",") if args.tasks else None
    if args.bench_dir:
        try:
            bench, papers = load_bench(args.bench_dir, names), release_papers(args.bench_dir)
        except (OSError, ValueError) as err:
            raise SystemExit(f"error: {err}") from None
    else:
        papers = None
        bench = {t: [{**r, "task": t} for r in rows] for t, rows in bench_items(args.per_task).items()
                 if names is None or t in names}
    rows = [r for items in bench.values() for r in (items[:args.limit] if args.limit else items)]
    out = Path(args.output)
    cache = Path(args.cache_dir) if args.cache_dir else out / "cache"
    model, judge_model = (model_identity(spec, tokenizer=args.tokenizer) for spec in (args.model, args.judge))
    # the result caches are keyed by the model's spec and the hash of its files: a checkpoint retrained at the
    # same path is another model
    gen = functools.partial(make_generate_stage, engine_factory(args.model, args.device, args.batch_size,
                                                                args.tokenizer), _cache_name(model),
                            str(cache / "generations.jsonl"), args.max_new_tokens, args.open_tokens)
    config = {"model": model, "bench": args.bench_dir, "tasks": sorted(bench), "per_task": args.per_task,
              "limit": args.limit, "max_new_tokens": args.max_new_tokens, "open_tokens": args.open_tokens}
    generated = _stage(out, "generate", gen, rows, args, config, args.model)
    structured = not args.no_structured_output
    judge = functools.partial(make_judge_stage, engine_factory(args.judge, args.device, args.batch_size,
                                                               args.tokenizer), _cache_name(judge_model),
                              str(cache / "judgements.jsonl"), args.judge_tokens, args.judge_retries, structured,
                              papers)
    judged = _stage(out, "judge", judge, generated, args,
                    {**config, "judge": judge_model, "judge_tokens": args.judge_tokens,
                     "retries": args.judge_retries, "structured": structured}, args.judge)
    rejected = [r["record"] for name in ("generate", "judge") for r in StageRunner(out / name, None).iter_rejects()
                if isinstance(r.get("record"), dict) and "task" in r["record"]]
    report = {"model": args.model, "judge": args.judge, "structured_output": structured,
              "bench_dir": args.bench_dir or "built-in",
              **score_tasks(judged, args.bootstrap, rejected=rejected),
              "seconds": round(time.perf_counter() - started, 1)}
    atomic_write_jsonl(out / "responses.jsonl", judged)
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


def run_corpus(args) -> int:
    from data_pipelines.sci2pol.corpus import candidate_pairs, make_judge_stage, make_polish_stage
    from data_pipelines.sci2pol.embedded import STYLE_EXAMPLES, corpus_inputs
    from posttrain.common.jsonl import read_jsonl

    started = time.perf_counter()
    if (args.documents is None) != (args.papers is None):
        raise SystemExit("error: pass both --documents and --papers, or neither (built-in inputs)")
    try:
        docs, papers = corpus_inputs() if args.documents is None else (read_jsonl(args.documents),
                                                                       read_jsonl(args.papers))
    except (OSError, ValueError) as err:
        raise SystemExit(f"error: {err}") from None
    table = {}
    for n, p in enumerate(papers):
        if not isinstance(p.get("paper_id"), str) or not isinstance(p.get("text"), str):
            raise SystemExit(f"error: paper record {n} needs string fields 'paper_id' and 'text'")
        table[p["paper_id"]] = p
    out = Path(args.output)
    pairs, rejects = candidate_pairs(docs, table, args.max_citations)
    print(f"candidates: {len(pairs)} pairs from {len(docs)} documents, {len(rejects)} documents rejected")
    judge = engine_factory(args.judge, args.device, args.batch_size, args.tokenizer)
    structured = not args.no_structured_output
    base = {"judge": model_identity(args.judge, tokenizer=args.tokenizer), "retries": args.judge_retries,
            "structured": structured}
    coarse = _stage(out, "coarse", functools.partial(make_judge_stage, judge, args.judge, "coarse",
                                                        args.judge_retries, structured=structured),
                    pairs, args, base, args.judge)
    fine = _stage(out, "fine", functools.partial(make_judge_stage, judge, args.judge, "fine", args.judge_retries,
                                                 args.long_chars, args.max_split_similarity, structured), coarse,
                  args, {**base, "long_chars": args.long_chars, "max_split_similarity": args.max_split_similarity},
                  args.judge)
    polisher = args.polisher or args.judge
    polish = functools.partial(make_polish_stage, engine_factory(polisher, args.device, args.batch_size,
                                                                 args.tokenizer), polisher,
                               STYLE_EXAMPLES[:args.shots], args.polish_tokens)
    final = _stage(out, "polish", polish, fine, args, {"polisher": model_identity(polisher, tokenizer=args.tokenizer),
                                                         "shots": args.shots, "tokens": args.polish_tokens}, polisher)
    for name in ("coarse", "fine", "polish"):
        rejects += [{"stage": name, **r} for r in StageRunner(out / name, None).iter_rejects()]
    atomic_write_jsonl(out / "pairs.jsonl", final)
    atomic_write_jsonl(out / "rejects.jsonl", rejects)
    print(f"wrote {len(final)} pairs to {out / 'pairs.jsonl'} (columns prompt/answer for --task dataset), "
          f"{len(rejects)} rejects to {out / 'rejects.jsonl'} ({time.perf_counter() - started:.1f}s)")
    return 0


def run_sci2pol(args) -> int:
    if args.sci2pol_command == "bench":
        return run_bench(args)
    return run_corpus(args)
