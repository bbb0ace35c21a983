"""``posttrain data designer``: the DESIGNER pipeline, resumable stage by stage.

DESIGNER (Liu, Zhao, ..., Zheng, "DESIGNER: Design-Logic-Guided Multidisciplinary Data Synthesis for LLM
Reasoning", 2025). Stages, each stored under ``--output`` (LLM stages as resumable ``StageRunner`` parts,
whole-dataset steps as one file each)::

    1-annotate/    discipline, difficulty, type per bank question (validated JSON, retried)
    2-seeds.jsonl  k-means per discipline (silhouette k), 3:2:1 Very Hard:Hard:Medium per cluster
    3-extract/     a Mermaid design logic per seed (validated flowchart)         [--mode logic]
    4-logics.jsonl threshold-graph dedup, one medoid per component               [--mode logic]
    5-segments.jsonl  source chunks, MinHash near-duplicates removed
    6-retrieved.jsonl top-k logics (or exemplar seed questions, --mode exemplar) per segment
    7-generate/    one call: pick a candidate, write question + reference answer (validated JSON)
    8-filtered.jsonl  MinHash near-duplicate questions, benchmark 13-grams and copies of the prompts'
                   worked examples removed
    9-respond/     a long-CoT response per question
    designer.jsonl the records; report.json the counts, yields and reject reasons

With no ``--input`` it runs on the built-in bank and source texts (``builtin.py``) with ``smollm2-135m``.
A 135M model meets the JSON and flowchart formats rarely: the report counts every reject and its reason.

Models: ``--model`` serves every LLM stage unless a stage names its own (``--annotate-model``,
``--extract-model``, ``--generate-model``, ``--answer-model``), as the paper splits them: a mid-size model
annotates, a reasoning model extracts logics and generates, a long-CoT model answers. Each stage's model is
part of its resume identity and of the record (``generator_model``, ``answer_model``).

Sizes: on the built-in demo the run is capped (``DEMO_CAPS``: 24 bank questions, 12 segments, k <= 3), and
the run says so; with ``--input`` / ``--sources`` nothing is capped unless the flag is given
(``INPUT_DEFAULTS``: every question and segment, k <= 8). A cluster that cannot honour 3:2:1 (a difficulty
level with too few questions) is logged and listed in ``report.json`` (``stages.seeds.ratio_shortfalls``).
The records train directly: ``posttrain train --algo sft --task dataset --dataset OUT/designer.jsonl
--prompt_column question --answer_column reference_answer`` (SFT targets the ``target`` column, the
long-CoT response).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections import Counter
from functools import partial
from pathlib import Path

from data_pipelines.common.backends import embedder_identity, files_sha256, model_identity
from data_pipelines.common.embed import add_embedder_arg
from data_pipelines.common.io import read_text_records
from data_pipelines.common.resources import actor_gpus
from data_pipelines.common.runner import ActorStage, StageRunner, add_backbone_args, run_once, runner_options
from data_pipelines.designer import builtin, steps
from data_pipelines.designer.prompts import PROMPT_VERSIONS
from data_pipelines.designer.stages import (
    CallSettings,
    make_annotate_stage,
    make_extract_stage,
    make_generate_stage,
    make_respond_stage,
)
from posttrain.common.files import atomic_write_jsonl, atomic_write_text
from posttrain.common.jsonl import read_jsonl

DEFAULT_MODEL = "smollm2-135m"
STAGE_MODELS = ("annotate", "extract", "generate", "answer")
"""The LLM stages that each take a model (``--<stage>-model``, default ``--model``)."""
DEMO_CAPS = {"max_questions": 24, "max_segments": 12, "k_max": 3}
"""Sizes of the built-in demo (a few minutes of a 135M model on 2 CPU cores)."""
INPUT_DEFAULTS = {"max_questions": 0, "max_segments": 0, "k_max": 8}
"""Sizes with a user's ``--input`` / ``--sources``: every question and segment (0 = all), k <= 8."""

logger = logging.getLogger(__name__)


def add_designer_args(parser) -> None:
    a = parser.add_argument
    a("--model", default=DEFAULT_MODEL, help="engine for every LLM stage without its own: 'smollm2-135m' (default, "
      "offline), an HF folder / hub id, vllm:PATH, or http://host:port/v1#model")
    for stage, what in zip(STAGE_MODELS, ("annotation (discipline, difficulty, type)", "design-logic extraction",
                                          "question generation", "the long-CoT answers")):
        a(f"--{stage}-model", default=None, help=f"engine of {what} (same forms as --model; default: --model)")
    a("--device", default="cpu", help="torch device of the HF engine")
    a("--mode", choices=("logic", "exemplar"), default="logic", help="'logic': retrieve design logics (the "
      "paper); 'exemplar': retrieve seed questions instead (the paper's 'w/o design logic' ablation)")
    a("--input", default=None, help="question bank (JSONL / Parquet / save_to_disk / hub); default: built-in")
    a("--question-field", default="question", help="bank field holding the question")
    a("--id_field", default="id", help="bank / sources field holding the record id (default: the row number)")
    a("--sources", default=None, help="source texts to ground questions in; default: built-in")
    a("--source-text-field", default="text", help="sources field holding the text")
    a("--source-discipline-field", default="discipline", help="sources field naming the discipline (records "
      "without it retrieve from every discipline)")
    a("--disciplines", default=",".join(builtin.DISCIPLINES), help="comma-separated discipline taxonomy")
    a("--output", default="designer_out", help="output folder (resumable stages + designer.jsonl + report.json)")
    a("--max-questions", type=int, default=None, help="annotate at most this many bank questions (0 = all; default: "
      f"{DEMO_CAPS['max_questions']} on the built-in bank, all with --input)")
    a("--per-cluster", type=int, default=3, help="seed questions drawn per cluster at 3:2:1")
    a("--k-max", type=int, default=None, help="largest k tried by the silhouette search per discipline (default: "
      f"{DEMO_CAPS['k_max']} on the built-in bank, {INPUT_DEFAULTS['k_max']} with --input)")
    a("--dedup-threshold", type=float, default=0.85, help="cosine similarity joining two logics (paper: 0.85)")
    a("--segment-chars", type=int, default=400, help="source chunk size in characters")
    a("--max-segments", type=int, default=None, help="generate from at most this many segments (0 = all; default: "
      f"{DEMO_CAPS['max_segments']} on the built-in sources, all with --sources)")
    a("--top_k", type=int, default=5, help="candidates retrieved per segment (paper: 5)")
    a("--minhash-threshold", type=float, default=0.8, help="Jaccard estimate marking near-duplicates")
    a("--decontaminate", default=None, metavar="FILE", help="benchmark file: drop questions sharing a 13-gram "
      "with any of its strings")
    a("--ngram", type=int, default=13, help="n of the decontamination n-grams (paper: 13)")
    a("--retries", type=int, default=2, help="extra attempts after an invalid structured output")
    a("--no_structured_output", action="store_true", help="ask for the JSON replies (annotation, generation) as "
      "free text after a prefilled first key instead of decoding them under their schema: the ablation")
    a("--annotate-tokens", type=int, default=40, help="max new tokens of an annotation")
    a("--extract-tokens", type=int, default=120, help="max new tokens of a design logic")
    a("--generate-tokens", type=int, default=200, help="max new tokens of a question + answer")
    a("--respond-tokens", type=int, default=200, help="max new tokens of a long-CoT response")
    a("--chunk_size", type=int, default=8, help="records per resumable chunk of an LLM stage")
    a("--seed", type=int, default=0, help="seed of the built-in data, sampling and retries")
    a("--no_progress", action="store_true", help="hide the progress bars")
    add_embedder_arg(parser)
    add_backbone_args(parser)


def resolve_sizes(args) -> list[str]:
    """Fill ``--max-questions``, ``--max-segments`` and ``--k-max`` left unset: the demo caps on built-in
    inputs (``--max-questions``, ``--k-max``: the bank; ``--max-segments``: the sources), ``INPUT_DEFAULTS``
    on a user's files. A negative value is an error naming its flag. Returns the demo caps applied, as
    flags (to say so)."""
    applied = []
    for name, builtin_input in (("max_questions", args.input is None), ("k_max", args.input is None),
                                ("max_segments", args.sources is None)):
        flag = "--" + name.replace("_", "-")
        if getattr(args, name) is None:
            setattr(args, name, DEMO_CAPS[name] if builtin_input else INPUT_DEFAULTS[name])
            if builtin_input:
                applied.append(f"{flag} {DEMO_CAPS[name]}")
        elif getattr(args, name) < 0:
            raise ValueError(f"{flag} must be >= 0, got {getattr(args, name)}")
    return applied


def stage_engines(args, engine) -> dict[str, object]:
    """The engine (object or spec) of each of ``STAGE_MODELS``: a mapping given as ``engine`` (it must name
    every stage), else the stage's ``--<stage>-model`` flag, else ``engine``."""
    if isinstance(engine, dict):
        missing = [s for s in STAGE_MODELS if s not in engine]
        if missing:
            raise ValueError(f"stage engines: no engine for {missing} (stages: {list(STAGE_MODELS)})")
        return {s: engine[s] for s in STAGE_MODELS}
    return {s: getattr(args, f"{s}_model", None) or engine for s in STAGE_MODELS}


def _label(engine) -> str:
    """A stage's model in the report and the resume identity: its spec, or an engine object's class."""
    return engine if isinstance(engine, str) else type(engine).__name__


def _load_records(spec: str, id_field: str, text_field: str) -> list[dict]:
    return [{**record, "id": str(record.get(id_field, n)), "_text": record[text_field]}
            for n, record in enumerate(read_text_records(spec, text_field))]


def _inputs(args) -> tuple[list[dict], list[dict]]:
    if args.input is None:
        bank = builtin.question_bank(args.seed)
    else:
        bank = [{**{k: v for k, v in r.items() if k != "_text"}, "question": r["_text"]}
                for r in _load_records(args.input, args.id_field, args.question_field)]
    if args.max_questions:
        bank = bank[:args.max_questions]
    if args.sources is None:
        sources = builtin.source_texts(args.seed)
    else:
        sources = [{"id": r["id"], "text": r["_text"], "discipline": r.get(args.source_discipline_field)}
                   for r in _load_records(args.sources, args.id_field, args.source_text_field)]
    return bank, sources


def _clean(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in ("_index", "_id")}


def _stage(args, out: Path, name: str, factory, records: list[dict], config: dict, desc: str) -> list[dict]:
    """An LLM stage: ``factory`` (a picklable ``functools.partial`` of a ``make_*_stage``) builds the
    process once per Ray actor when it names its engine by spec (loading is the expensive part; each
    actor reserves a GPU on a CUDA ``--device``: ``actor_gpus``); an engine object passed in (a test's
    scripted engine) is already built, so the process runs as plain Ray tasks."""
    engine = factory.args[0]
    process = (ActorStage(factory, num_gpus=actor_gpus([engine], args.device)) if isinstance(engine, str)
               else factory())
    runner = StageRunner(out / name, process, chunk_size=args.chunk_size, config=config, desc=desc,
                         progress=not args.no_progress, **runner_options(args))
    runner.run([_clean(r) for r in records])
    return [_clean(r) for r in runner.iter_outputs()]


def _count(stage_in: int, outputs: list[dict], out_dir: Path) -> dict:
    first_try = sum(r.get("attempts") == 1 for r in outputs)
    reasons = Counter(_reason_kind(r["reason"]) for r in StageRunner(out_dir, None).iter_rejects())
    return {"in": stage_in, "out": len(outputs), "yield": round(len(outputs) / stage_in, 4) if stage_in else None,
            "first_try": first_try, "after_retry": len(outputs) - first_try,
            "reject_reasons": dict(reasons.most_common(8))}


def _reason_kind(reason: str) -> str:
    """A reject reason without its quoted values and attempt count, to count reasons by kind."""
    reason = re.sub(r"^invalid output after \d+ attempts: ", "", reason)
    reason = re.sub(r"= '[^']*'|= \"[^\"]*\"|\[[^\]]*\]|\([^)]*\)", "...", reason)
    return re.sub(r"\d+", "N", reason)[:80]


def run_pipeline(args, engine, embedder) -> dict:
    """Every stage with ``engine`` (an object or spec, or one per stage: ``stage_engines``) and
    ``embedder``; returns the report."""
    started = time.perf_counter()
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    capped = resolve_sizes(args)
    if capped:
        print(f"built-in demo: capped at {', '.join(capped)} (pass the flags to change; 0 = all)")
    disciplines = tuple(d.strip() for d in args.disciplines.split(",") if d.strip())
    bank, sources = _inputs(args)
    engines = stage_engines(args, engine)
    models = {s: _label(e) for s, e in engines.items()}
    structured = not args.no_structured_output
    embedding = {"embedder": {"name": getattr(embedder, "name", type(embedder).__name__),
                              **embedder_identity(args.embedder)}}

    def base(stage: str) -> dict:
        stage_engine = engines[stage]
        model = model_identity(stage_engine) if isinstance(stage_engine, str) else models[stage]
        return {"model": model, "seed": args.seed, "retries": args.retries}

    def once(name: str, compute, inputs: list[dict], **flags) -> list[dict]:
        """A whole-dataset step stored as ``name``, redone only when its inputs or flags change."""
        return run_once(out / name, compute, config=flags, inputs=inputs, overwrite=args.overwrite)

    def call(tokens: int) -> CallSettings:
        return CallSettings(tokens, retries=args.retries, seed=args.seed, structured=structured)

    report: dict = {"mode": args.mode, "models": models, "structured_output": structured,
                    "embedder": getattr(embedder, "name", "?"),
                    "sizes": {k: getattr(args, k) for k in DEMO_CAPS}, "stages": {}}

    annotated = _stage(args, out, "1-annotate", partial(make_annotate_stage, engines["annotate"],
                       call(args.annotate_tokens), disciplines, device=args.device), bank,
                       {**base("annotate"), "prompt_version": PROMPT_VERSIONS["annotate"], "disciplines": disciplines,
                        "tokens": args.annotate_tokens, "structured": structured}, "annotate")
    report["stages"]["annotate"] = _count(len(bank), annotated, out / "1-annotate")
    gold = [r for r in annotated if "gold_discipline" in r]
    if gold:
        report["annotation_accuracy"] = {key: round(sum(r[key] == r[f"gold_{g}"] for r in gold) / len(gold), 4)
                                         for key, g in (("discipline", "discipline"), ("difficulty", "difficulty"),
                                                        ("question_type", "type"))}
    seeds = once("2-seeds.jsonl", lambda: _seeds(out, args, annotated, embedder), annotated, **embedding,
                 per_cluster=args.per_cluster, k_max=args.k_max, seed=args.seed)
    shortfalls = read_jsonl(out / "2-seeds.shortfalls.jsonl")
    for entry in shortfalls:
        logger.warning("seeds: cluster %s (%d questions) cannot honour 3:2:1 (quota %s): short of %s",
                       entry["cluster"], entry["size"], entry["quota"], entry["short"])
    report["stages"]["seeds"] = {"in": len(annotated), "out": len(seeds),
                                 "difficulty": dict(Counter(r["difficulty"] for r in seeds)),
                                 "ratio_shortfalls": shortfalls}
    if args.mode == "logic":
        extracted = _stage(args, out, "3-extract", partial(make_extract_stage, engines["extract"],
                           call(args.extract_tokens), device=args.device), seeds,
                           {**base("extract"), "prompt_version": PROMPT_VERSIONS["extract"],
                           "tokens": args.extract_tokens}, "extract")
        report["stages"]["extract"] = _count(len(seeds), extracted, out / "3-extract")
        logics = once("4-logics.jsonl", lambda: _dedup(out, extracted, embedder, args.dedup_threshold), extracted,
                      **embedding, dedup_threshold=args.dedup_threshold)
        report["stages"]["logic_dedup"] = {"in": len(extracted), "out": len(logics)}
        pool = [{"id": r["logic_id"], "text": r["logic_mermaid"], "discipline": r["discipline"],
                 "question_type": r["question_type"], "difficulty": r["difficulty"]} for r in logics]
    else:
        pool = [{"id": f"E-{r['id']}", "text": r["question"], "discipline": r["discipline"],
                 "question_type": r["question_type"], "difficulty": r["difficulty"]} for r in seeds]
    segments = once("5-segments.jsonl", lambda: _segments(out, args, sources), sources,
                    segment_chars=args.segment_chars, minhash_threshold=args.minhash_threshold,
                    max_segments=args.max_segments)
    report["stages"]["segments"] = {"sources": len(sources), "out": len(segments),
                                    **json.loads((out / "5-segments.info.json").read_text())}
    retrieved = once("6-retrieved.jsonl", lambda: steps.retrieve_step(segments, pool, embedder, args.top_k),
                     segments + pool, **embedding, top_k=args.top_k)
    generated = _stage(args, out, "7-generate", partial(make_generate_stage, engines["generate"],
                       call(args.generate_tokens), args.mode, device=args.device), retrieved,
                       {**base("generate"), "prompt_version": PROMPT_VERSIONS["generate"],
                        "tokens": args.generate_tokens,
                        "mode": args.mode, "structured": structured},
                       "generate")
    report["stages"]["generate"] = _count(len(retrieved), generated, out / "7-generate")
    decontaminate = args.decontaminate and {"path": args.decontaminate, **(
        {"sha256": files_sha256(args.decontaminate)} if Path(args.decontaminate).exists() else {})}
    filtered = once("8-filtered.jsonl", lambda: _filter(out, args, generated), generated,
                    decontaminate=decontaminate, ngram=args.ngram, minhash_threshold=args.minhash_threshold)
    report["stages"]["filter"] = {"in": len(generated), "out": len(filtered),
                                  "reject_reasons": dict(Counter(_reason_kind(r["reason"]) for r in
                                                                 read_jsonl(out / "8-filter.rejects.jsonl")))}
    responded = _stage(args, out, "9-respond", partial(make_respond_stage, engines["answer"],
                       call(args.respond_tokens), device=args.device), filtered,
                       {**base("answer"), "prompt_version": PROMPT_VERSIONS["respond"], "tokens": args.respond_tokens},
                       "respond")
    report["stages"]["respond"] = _count(len(filtered), responded, out / "9-respond")
    records = [_final(r, args.mode, models, "builtin" if args.sources is None else "file") for r in responded]
    atomic_write_jsonl(out / "designer.jsonl", records)
    report["records"] = len(records)
    report["diversity"] = _diversity(embedder, bank, records)
    report["seconds"] = round(time.perf_counter() - started, 1)
    atomic_write_text(out / "report.json", json.dumps(report, indent=2) + "\n")
    return report


def _seeds(out: Path, args, annotated: list[dict], embedder) -> list[dict]:
    seeds, shortfalls = steps.seeds_step(annotated, embedder, args.per_cluster, args.k_max, args.seed)
    atomic_write_jsonl(out / "2-seeds.shortfalls.jsonl", shortfalls)
    return seeds


def _segments(out: Path, args, sources: list[dict]) -> list[dict]:
    """The segments; how many near-duplicates were removed goes to ``5-segments.info.json`` (written first,
    so a resumed run reports it too)."""
    segments, removed = steps.segments_step(sources, args.segment_chars, args.minhash_threshold, args.max_segments)
    atomic_write_text(out / "5-segments.info.json", json.dumps({"near_duplicates_removed": removed}) + "\n")
    return segments


def _dedup(out: Path, extracted: list[dict], embedder, tau: float) -> list[dict]:
    kept, gone = steps.dedup_step(extracted, embedder, tau)
    atomic_write_jsonl(out / "4-logics.dropped.jsonl", gone)
    return kept


def _filter(out: Path, args, generated: list[dict]) -> list[dict]:
    from data_pipelines.designer.filtering import Decontaminator, benchmark_texts
    from data_pipelines.designer.prompts import demonstration_questions

    decon = Decontaminator(benchmark_texts(args.decontaminate), args.ngram) if args.decontaminate else None
    demonstrations = Decontaminator(demonstration_questions(), args.ngram)
    kept, rejects = steps.filter_step(generated, args.minhash_threshold, decon, demonstrations)
    atomic_write_jsonl(out / "8-filter.rejects.jsonl", rejects)
    return kept


def _final(r: dict, mode: str, models: dict[str, str], source_type: str) -> dict:
    """A record in the schema of the notes (plus ``target``: what SFT trains on)."""
    return {"id": steps.record_id(r["segment_id"], r["logic_id"], PROMPT_VERSIONS["generate"]), "source_id": r["source_id"],
            "segment_id": r["segment_id"], "source_type": source_type, "mode": mode,
            "discipline": r["discipline"], "logic_id": r["logic_id"], "logic_mermaid": r["logic_mermaid"],
            "candidate_ids": r["candidate_ids"], "question_type": r["question_type"],
            "difficulty": r["difficulty"], "question": r["question"], "reference_answer": r["reference_answer"],
            "response_cot": r["response_cot"], "final_answer": r["final_answer"], "target": r["response_cot"],
            "generator_model": models["generate"], "answer_model": models["answer"],
            "prompt_versions": PROMPT_VERSIONS}


def _diversity(embedder, bank: list[dict], records: list[dict]) -> dict:
    from data_pipelines.common.diversity import texts_diversity

    report = {"bank": texts_diversity([q["question"] for q in bank], embedder, k=min(4, len(bank)))
              if len(bank) >= 2 else None}
    report["output"] = (texts_diversity([r["question"] for r in records], embedder, k=min(4, len(records)))
                        if len(records) >= 2 else None)
    return report


def run_designer(args) -> int:
    from data_pipelines.common.embed import load_embedder

    try:
        report = run_pipeline(args, args.model, load_embedder(args.embedder))
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    for name, entry in report["stages"].items():
        extra = f", rejects {entry['reject_reasons']}" if entry.get("reject_reasons") else ""
        print(f"[{name}] {entry.get('in', entry.get('sources'))} in -> {entry['out']} out{extra}")
    if "annotation_accuracy" in report:
        print(f"annotation accuracy vs the built-in labels: {report['annotation_accuracy']}")
    print(f"wrote {report['records']} records to {Path(args.output) / 'designer.jsonl'}; report "
          f"{Path(args.output) / 'report.json'} ({report['seconds']}s)")
    return 0
