"""``posttrain data designer``'s flags (``add_designer_args``) and the typed options they parse into once, at the
CLI edge (``DesignerConfig.from_args``): the demo caps and input defaults resolved, the flags' negations
turned into what they mean (``structured``, ``progress``), the discipline list split."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from data_pipelines.common.embed import add_embedder_arg
from data_pipelines.common.options import BackboneOptions, add_backbone_args, namespace_values
from data_pipelines.designer import builtin

DEFAULT_MODEL = "smollm2-135m"
STAGE_MODELS = ("annotate", "extract", "generate", "answer")
"""The LLM stages that each take a model (``--<stage>-model``, default ``--model``)."""
DEMO_CAPS = {"max_questions": 24, "max_segments": 12, "k_max": 3}
"""Sizes of the built-in demo (a few minutes of a 135M model on 2 CPU cores)."""
INPUT_DEFAULTS = {"max_questions": 0, "max_segments": 0, "k_max": 8}
"""Sizes with a user's ``--input`` / ``--sources``: every question and segment (0 = all), k <= 8."""


def add_designer_args(parser: argparse.ArgumentParser) -> None:
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


@dataclass(frozen=True)
class DesignerConfig:
    """One DESIGNER run, as its flags set it (``from_args``)."""

    model: str
    """Engine spec of every LLM stage without its own."""
    annotate_model: str | None
    """Engine spec of the annotation stage (None: ``model``)."""
    extract_model: str | None
    """Engine spec of the design-logic extraction (None: ``model``)."""
    generate_model: str | None
    """Engine spec of the question generation (None: ``model``)."""
    answer_model: str | None
    """Engine spec of the long-CoT answers (None: ``model``)."""
    device: str
    """Torch device of the HF engines."""
    mode: str
    """'logic' retrieves design logics (the paper); 'exemplar' retrieves seed questions (the ablation)."""
    input: str | None
    """The question bank (None: the built-in bank)."""
    question_field: str
    """Bank field holding the question."""
    id_field: str
    """Bank / sources field holding the record id (missing: the row number)."""
    sources: str | None
    """Source texts the questions are grounded in (None: the built-in texts)."""
    source_text_field: str
    """Sources field holding the text."""
    source_discipline_field: str
    """Sources field naming the discipline (a record without it retrieves from every discipline)."""
    disciplines: tuple[str, ...]
    """The discipline taxonomy of the annotation."""
    output: str
    """Output folder: the resumable stages, designer.jsonl, report.json."""
    max_questions: int
    """Annotate at most this many bank questions (0: all), the demo cap or input default resolved."""
    per_cluster: int
    """Seed questions drawn per cluster at 3:2:1."""
    k_max: int
    """Largest k of the silhouette search per discipline, resolved like ``max_questions``."""
    dedup_threshold: float
    """Cosine similarity that joins two design logics."""
    segment_chars: int
    """Source chunk size in characters."""
    max_segments: int
    """Generate from at most this many segments (0: all), resolved like ``max_questions``."""
    top_k: int
    """Candidates retrieved per segment."""
    minhash_threshold: float
    """Jaccard estimate marking near-duplicates (segments and questions)."""
    decontaminate: str | None
    """Benchmark file whose 13-grams a question must not share (None: no decontamination)."""
    ngram: int
    """n of the decontamination n-grams."""
    retries: int
    """Extra attempts after an invalid structured output."""
    structured: bool
    """Decode the JSON replies under their schema (False: the free-text ablation, ``--no_structured_output``)."""
    annotate_tokens: int
    """Max new tokens of an annotation."""
    extract_tokens: int
    """Max new tokens of a design logic."""
    generate_tokens: int
    """Max new tokens of a question + answer."""
    respond_tokens: int
    """Max new tokens of a long-CoT response."""
    chunk_size: int
    """Records per resumable block of an LLM stage."""
    seed: int
    """Seed of the built-in data, the sampling and the retries."""
    progress: bool
    """Show the progress bars (False: ``--no_progress``)."""
    embedder: str | None
    """Sentence embedder spec (``common.embed``)."""
    backbone: BackboneOptions
    """How the stages run on Ray (the backbone flags)."""
    demo_caps: tuple[str, ...] = ()
    """The demo caps applied because an input is the built-in one, as flags (``--k-max 3``), to say so."""

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DesignerConfig:
        """The options of ``args`` with ``--max-questions``, ``--max-segments`` and ``--k-max`` left unset
        filled: the demo caps on built-in inputs (``--max-questions``, ``--k-max``: the bank; ``--max-segments``:
        the sources), ``INPUT_DEFAULTS`` on a user's files. A negative value is a ``ValueError`` naming its flag."""
        sizes, applied = {}, []
        for name, builtin_input in (("max_questions", args.input is None), ("k_max", args.input is None),
                                    ("max_segments", args.sources is None)):
            flag = "--" + name.replace("_", "-")
            value = getattr(args, name)
            if value is None:
                value = DEMO_CAPS[name] if builtin_input else INPUT_DEFAULTS[name]
                if builtin_input:
                    applied.append(f"{flag} {DEMO_CAPS[name]}")
            elif value < 0:
                raise ValueError(f"{flag} must be >= 0, got {value}")
            sizes[name] = value
        derived = ("disciplines", "structured", "progress", "backbone", "demo_caps", *sizes)
        return cls(**namespace_values(cls, args, skip=derived), **sizes,
                   disciplines=tuple(d.strip() for d in args.disciplines.split(",") if d.strip()),
                   structured=not args.no_structured_output, progress=not args.no_progress,
                   backbone=BackboneOptions.from_args(args), demo_caps=tuple(applied))

    def stage_model(self, stage: str) -> str | None:
        """The ``--<stage>-model`` flag of one of ``STAGE_MODELS`` (None: unset)."""
        return {"annotate": self.annotate_model, "extract": self.extract_model, "generate": self.generate_model,
                "answer": self.answer_model}[stage]
