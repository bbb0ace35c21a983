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

import argparse
import json
import logging
import re
import time
from collections import Counter
from functools import partial
from pathlib import Path

from data_pipelines.common.backends import embedder_identity, files_sha256, model_identity
from data_pipelines.common.io import read_text_records
from data_pipelines.common.resources import actor_gpus
from data_pipelines.common.runner import ActorStage, StageOutputs, StageRunner, StepOutput, run_step
from data_pipelines.designer import builtin, steps
from data_pipelines.designer.options import DEMO_CAPS, STAGE_MODELS, DesignerConfig
from data_pipelines.designer.prompts import PROMPT_VERSIONS
from data_pipelines.designer.stages import (
    CallSettings,
    make_annotate_stage,
    make_extract_stage,
    make_generate_stage,
    make_respond_stage,
)
from posttrain.common.files import atomic_write_jsonl, atomic_write_text

logger = logging.getLogger(__name__)


def stage_engines(config: DesignerConfig, engine) -> dict[str, object]:
    """The engine (object or spec) of each of ``STAGE_MODELS``: a mapping given as ``engine`` (it must name
    every stage), else the stage's ``--<stage>-model`` flag, else ``engine``."""
    if isinstance(engine, dict):
        missing = [s for s in STAGE_MODELS if s not in engine]
        if missing:
            raise ValueError(f"stage engines: no engine for {missing} (stages: {list(STAGE_MODELS)})")
        return {s: engine[s] for s in STAGE_MODELS}
    return {s: config.stage_model(s) or engine for s in STAGE_MODELS}


def _label(engine) -> str:
    """A stage's model in the report and the resume identity: its spec, or an engine object's class."""
    return engine if isinstance(engine, str) else type(engine).__name__


def _load_records(spec: str, id_field: str, text_field: str) -> list[dict]:
    return [{**record, "id": str(record.get(id_field, n)), "_text": record[text_field]}
            for n, record in enumerate(read_text_records(spec, text_field))]


def _inputs(config: DesignerConfig) -> tuple[list[dict], list[dict]]:
    if config.input is None:
        bank = builtin.question_bank(config.seed)
    else:
        bank = [{**{k: v for k, v in r.items() if k != "_text"}, "question": r["_text"]}
                for r in _load_records(config.input, config.id_field, config.question_field)]
    if config.max_questions:
        bank = bank[:config.max_questions]
    if config.sources is None:
        sources = builtin.source_texts(config.seed)
    else:
        sources = [{"id": r["id"], "text": r["_text"], "discipline": r.get(config.source_discipline_field)}
                   for r in _load_records(config.sources, config.id_field, config.source_text_field)]
    return bank, sources


def _clean(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in ("_index", "_id")}


def _stage(config: DesignerConfig, name: str, factory, records: list[dict], identity: dict,
           desc: str) -> StageOutputs:
    """An LLM stage: ``factory`` (a picklable ``functools.partial`` of a ``make_*_stage``) builds the
    process once per Ray actor when it names its engine by spec (loading is the expensive part; each
    actor reserves a GPU on a CUDA ``--device``: ``actor_gpus``); an engine object passed in (a test's
    scripted engine) is already built, so the process runs as plain Ray tasks."""
    engine = factory.args[0]
    process = (ActorStage(factory, num_gpus=actor_gpus([engine], config.device)) if isinstance(engine, str)
               else factory())
    runner = StageRunner(Path(config.output) / name, process, chunk_size=config.chunk_size, config=identity,
                         desc=desc, progress=config.progress, **config.backbone.runner_kwargs())
    runner.run([_clean(r) for r in records])
    return StageOutputs([_clean(r) for r in runner.iter_outputs()], list(runner.iter_rejects()))


def _count(stage_in: int, stage: StageOutputs) -> dict:
    outputs = stage.records
    first_try = sum(r.get("attempts") == 1 for r in outputs)
    reasons = Counter(_reason_kind(r["reason"]) for r in stage.rejects)
    return {"in": stage_in, "out": len(outputs), "yield": round(len(outputs) / stage_in, 4) if stage_in else None,
            "first_try": first_try, "after_retry": len(outputs) - first_try,
            "reject_reasons": dict(reasons.most_common(8))}


def _reason_kind(reason: str) -> str:
    """A reject reason without its quoted values and attempt count, to count reasons by kind."""
    reason = re.sub(r"^invalid output after \d+ attempts: ", "", reason)
    reason = re.sub(r"= '[^']*'|= \"[^\"]*\"|\[[^\]]*\]|\([^)]*\)", "...", reason)
    return re.sub(r"\d+", "N", reason)[:80]


def run_pipeline(config: DesignerConfig, engine, embedder) -> dict:
    """Every stage with ``engine`` (an object or spec, or one per stage: ``stage_engines``) and
    ``embedder``; returns the report."""
    started = time.perf_counter()
    out = Path(config.output)
    out.mkdir(parents=True, exist_ok=True)
    if config.demo_caps:
        print(f"built-in demo: capped at {', '.join(config.demo_caps)} (pass the flags to change; 0 = all)")
    bank, sources = _inputs(config)
    engines = stage_engines(config, engine)
    models = {s: _label(e) for s, e in engines.items()}
    structured = config.structured
    embedding = {"embedder": {"name": getattr(embedder, "name", type(embedder).__name__),
                              **embedder_identity(config.embedder)}}

    def base(stage: str) -> dict:
        stage_engine = engines[stage]
        model = model_identity(stage_engine) if isinstance(stage_engine, str) else models[stage]
        return {"model": model, "seed": config.seed, "retries": config.retries}

    def once(name: str, compute, inputs: list[dict], companions: tuple[str, ...] = (), **flags) -> StepOutput:
        """A whole-dataset step stored as ``name`` (and its ``companions``), redone only when its inputs or
        flags change."""
        return run_step(out / name, compute, config=flags, inputs=inputs, companions=companions,
                        overwrite=config.backbone.overwrite)

    def call(tokens: int) -> CallSettings:
        return CallSettings(tokens, retries=config.retries, seed=config.seed, structured=structured)

    report: dict = {"mode": config.mode, "models": models, "structured_output": structured,
                    "embedder": getattr(embedder, "name", "?"),
                    "sizes": {k: getattr(config, k) for k in DEMO_CAPS}, "stages": {}}

    annotate = _stage(config, "1-annotate", partial(make_annotate_stage, engines["annotate"],
                      call(config.annotate_tokens), config.disciplines, device=config.device), bank,
                      {**base("annotate"), "prompt_version": PROMPT_VERSIONS["annotate"],
                       "disciplines": config.disciplines, "tokens": config.annotate_tokens, "structured": structured},
                      "annotate")
    annotated = annotate.records
    report["stages"]["annotate"] = _count(len(bank), annotate)
    gold = [r for r in annotated if "gold_discipline" in r]
    if gold:
        report["annotation_accuracy"] = {key: round(sum(r[key] == r[f"gold_{g}"] for r in gold) / len(gold), 4)
                                         for key, g in (("discipline", "discipline"), ("difficulty", "difficulty"),
                                                        ("question_type", "type"))}
    seeds_step = once("2-seeds.jsonl", lambda: _seeds(config, annotated, embedder), annotated,
                      (SHORTFALLS,), **embedding, per_cluster=config.per_cluster, k_max=config.k_max, seed=config.seed)
    seeds, shortfalls = seeds_step.records, seeds_step.companions[SHORTFALLS]
    for entry in shortfalls:
        logger.warning("seeds: cluster %s (%d questions) cannot honour 3:2:1 (quota %s): short of %s",
                       entry["cluster"], entry["size"], entry["quota"], entry["short"])
    report["stages"]["seeds"] = {"in": len(annotated), "out": len(seeds),
                                 "difficulty": dict(Counter(r["difficulty"] for r in seeds)),
                                 "ratio_shortfalls": shortfalls}
    if config.mode == "logic":
        extract = _stage(config, "3-extract", partial(make_extract_stage, engines["extract"],
                         call(config.extract_tokens), device=config.device), seeds,
                         {**base("extract"), "prompt_version": PROMPT_VERSIONS["extract"],
                          "tokens": config.extract_tokens}, "extract")
        extracted = extract.records
        report["stages"]["extract"] = _count(len(seeds), extract)
        logics = once("4-logics.jsonl", lambda: _dedup(extracted, embedder, config.dedup_threshold), extracted,
                      (DROPPED_LOGICS,), **embedding, dedup_threshold=config.dedup_threshold).records
        report["stages"]["logic_dedup"] = {"in": len(extracted), "out": len(logics)}
        pool = [{"id": r["logic_id"], "text": r["logic_mermaid"], "discipline": r["discipline"],
                 "question_type": r["question_type"], "difficulty": r["difficulty"]} for r in logics]
    else:
        pool = [{"id": f"E-{r['id']}", "text": r["question"], "discipline": r["discipline"],
                 "question_type": r["question_type"], "difficulty": r["difficulty"]} for r in seeds]
    segments_step = once("5-segments.jsonl", lambda: _segments(config, sources), sources, (SEGMENTS_INFO,),
                         segment_chars=config.segment_chars, minhash_threshold=config.minhash_threshold,
                         max_segments=config.max_segments)
    segments = segments_step.records
    report["stages"]["segments"] = {"sources": len(sources), "out": len(segments),
                                    **segments_step.companions[SEGMENTS_INFO]}
    retrieved = once("6-retrieved.jsonl",
                     lambda: StepOutput(steps.retrieve_step(segments, pool, embedder, config.top_k)),
                     segments + pool, **embedding, top_k=config.top_k).records
    generate = _stage(config, "7-generate", partial(make_generate_stage, engines["generate"],
                      call(config.generate_tokens), config.mode, device=config.device), retrieved,
                      {**base("generate"), "prompt_version": PROMPT_VERSIONS["generate"],
                       "tokens": config.generate_tokens, "mode": config.mode, "structured": structured},
                      "generate")
    generated = generate.records
    report["stages"]["generate"] = _count(len(retrieved), generate)
    decontaminate = config.decontaminate and {"path": config.decontaminate, **(
        {"sha256": files_sha256(config.decontaminate)} if Path(config.decontaminate).exists() else {})}
    filter_step = once("8-filtered.jsonl", lambda: _filter(config, generated), generated, (FILTER_REJECTS,),
                       decontaminate=decontaminate, ngram=config.ngram, minhash_threshold=config.minhash_threshold)
    filtered = filter_step.records
    report["stages"]["filter"] = {"in": len(generated), "out": len(filtered),
                                  "reject_reasons": dict(Counter(_reason_kind(r["reason"]) for r in
                                                                 filter_step.companions[FILTER_REJECTS]))}
    respond = _stage(config, "9-respond", partial(make_respond_stage, engines["answer"],
                     call(config.respond_tokens), device=config.device), filtered,
                     {**base("answer"), "prompt_version": PROMPT_VERSIONS["respond"],
                      "tokens": config.respond_tokens}, "respond")
    report["stages"]["respond"] = _count(len(filtered), respond)
    records = [_final(r, config.mode, models, "builtin" if config.sources is None else "file")
               for r in respond.records]
    atomic_write_jsonl(out / "designer.jsonl", records)
    report["records"] = len(records)
    report["diversity"] = _diversity(embedder, bank, records)
    report["seconds"] = round(time.perf_counter() - started, 1)
    atomic_write_text(out / "report.json", json.dumps(report, indent=2) + "\n")
    return report


SHORTFALLS = "2-seeds.shortfalls.jsonl"
"""The clusters that cannot honour 3:2:1, beside the seeds."""
DROPPED_LOGICS = "4-logics.dropped.jsonl"
"""The design logics the threshold-graph dedup dropped, beside the kept ones."""
SEGMENTS_INFO = "5-segments.info.json"
"""How many near-duplicate segments were removed, beside the segments."""
FILTER_REJECTS = "8-filter.rejects.jsonl"
"""The generated questions the filter removed, each with the reason."""


def _seeds(config: DesignerConfig, annotated: list[dict], embedder) -> StepOutput:
    seeds, shortfalls = steps.seeds_step(annotated, embedder, config.per_cluster, config.k_max, config.seed)
    return StepOutput(seeds, {SHORTFALLS: shortfalls})


def _segments(config: DesignerConfig, sources: list[dict]) -> StepOutput:
    segments, removed = steps.segments_step(sources, config.segment_chars, config.minhash_threshold,
                                            config.max_segments)
    return StepOutput(segments, {SEGMENTS_INFO: {"near_duplicates_removed": removed}})


def _dedup(extracted: list[dict], embedder, tau: float) -> StepOutput:
    kept, gone = steps.dedup_step(extracted, embedder, tau)
    return StepOutput(kept, {DROPPED_LOGICS: gone})


def _filter(config: DesignerConfig, generated: list[dict]) -> StepOutput:
    from data_pipelines.designer.filtering import Decontaminator, benchmark_texts
    from data_pipelines.designer.prompts import demonstration_questions

    decon = Decontaminator(benchmark_texts(config.decontaminate), config.ngram) if config.decontaminate else None
    demonstrations = Decontaminator(demonstration_questions(), config.ngram)
    kept, rejects = steps.filter_step(generated, config.minhash_threshold, decon, demonstrations)
    return StepOutput(kept, {FILTER_REJECTS: rejects})


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


def run_designer(args: argparse.Namespace) -> int:
    """The CLI edge: the flags parsed into a ``DesignerConfig``, the pipeline run, its counts printed."""
    from data_pipelines.common.embed import load_embedder

    try:
        config = DesignerConfig.from_args(args)
        report = run_pipeline(config, config.model, load_embedder(config.embedder))
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    for name, entry in report["stages"].items():
        extra = f", rejects {entry['reject_reasons']}" if entry.get("reject_reasons") else ""
        print(f"[{name}] {entry.get('in', entry.get('sources'))} in -> {entry['out']} out{extra}")
    if "annotation_accuracy" in report:
        print(f"annotation accuracy vs the built-in labels: {report['annotation_accuracy']}")
    print(f"wrote {report['records']} records to {Path(config.output) / 'designer.jsonl'}; report "
          f"{Path(config.output) / 'report.json'} ({report['seconds']}s)")
    return 0
