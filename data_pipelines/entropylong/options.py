"""``posttrain data entropylong``'s flags (``add_entropylong_args``: the run's own, the backbone's, and one per
field of the method's ``EntropyLongConfig``) and the typed options they parse into once, at the CLI edge
(``EntropyLongRun.from_args``)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields

from data_pipelines.common.options import BackboneOptions, add_backbone_args, namespace_values
from data_pipelines.entropylong.pipeline import EntropyLongConfig

DEFAULT_SCORER = "smollm2-135m"


def add_entropylong_args(parser: argparse.ArgumentParser) -> None:
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



@dataclass(frozen=True)
class EntropyLongRun:
    """One EntropyLong run, as its flags set it (``from_args``): where its data and models are, and the method's
    ``EntropyLongConfig``."""

    model: str
    """Scorer's engine spec (an alias, HF path / hub id, vllm:PATH, an HTTP URL, 'cachelm' or 'corpus-lm')."""
    tokenizer: str | None
    """Tokenizer of an HTTP scorer (to align tokens)."""
    input: str | None
    """Root documents (None: the built-in synthetic corpus)."""
    corpus: str | None
    """Retrieval corpus (None: the root documents)."""
    text_field: str
    """Record field with the text."""
    id_field: str
    """Record field with the document id."""
    output: str
    """Output folder: the index, the steps' resumable parts, sequences.jsonl, eval.json."""
    chunk_size: int
    """Root documents per resumable block."""
    device: str
    """Torch device of the HF scorer."""
    batch_size: int
    """Scoring batch size."""
    retriever: str
    """'faiss' (dense) or 'bm25'."""
    embedder: str | None
    """Sentence embedder of the dense retriever (None: MiniLM)."""
    chunk_chars: int
    """Retrieval chunk size in characters."""
    num_entities: int
    """Built-in corpus: planted (definition, usage) pairs."""
    num_misc: int
    """Built-in corpus: decoy documents."""
    corpus_seed: int
    """Built-in corpus seed."""
    corpus_style: str
    """Built-in corpus: 'prose' (for a pretrained LM) or 'chars' (the character models' training style)."""
    progress: bool
    """Show the progress bars (False: ``--no_progress``)."""
    backbone: BackboneOptions
    """How the steps run on Ray (the backbone flags)."""
    method: EntropyLongConfig
    """The method's parameters (anchors, retrieval, verification, assembly)."""

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> EntropyLongRun:
        method = EntropyLongConfig(**namespace_values(EntropyLongConfig, args))
        return cls(**namespace_values(cls, args, skip=("progress", "backbone", "method")),
                   progress=not args.no_progress, backbone=BackboneOptions.from_args(args), method=method)
