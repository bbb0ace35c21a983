"""``posttrain data sci2pol bench|corpus``'s flags (``add_sci2pol_args``) and the typed options they parse into
once, at the CLI edge: ``BenchConfig`` (the token budgets resolved) and ``CorpusConfig``, each holding the
``StageSettings`` both commands share."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from data_pipelines.common.options import BackboneOptions, add_backbone_args, namespace_values

DEFAULT_MODEL = "smollm2-135m"
DEMO_BUDGETS = {"max_new_tokens": 16, "open_tokens": 96, "judge_tokens": 96}
"""Token budgets on the built-in miniature items (one-letter labels, two-sentence answers, a 4-5 key JSON)."""
RELEASE_BUDGETS = {"max_new_tokens": 256, "open_tokens": 2048, "judge_tokens": 256}
"""Token budgets with ``--bench_dir`` (the release, or a user's data): room for a label with its explanation
or a task-18 JSON verdict, for a full policy brief (the expert briefs run to about a thousand words; the
paper's models decode with their providers' defaults) and for a judge's JSON in a code fence."""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cpu", help="torch device of the HF engines")
    p.add_argument("--batch_size", type=int, default=8, help="generation batch size of the HF engines")
    p.add_argument("--tokenizer", default=None, help="tokenizer of an HTTP engine (http://host:port/v1#model)")
    p.add_argument("--chunk_size", type=int, default=16, help="records per resumable chunk")
    p.add_argument("--no_progress", action="store_true", help="hide the progress bars")
    p.add_argument("--no_structured_output", action="store_true", help="ask the judges for free text (their first "
                   "key prefilled) instead of JSON decoded under the answer's schema: the ablation")
    add_backbone_args(p)


def add_sci2pol_args(parser: argparse.ArgumentParser) -> None:
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



@dataclass(frozen=True)
class StageSettings:
    """How both commands' LLM stages run (the flags they share)."""

    device: str
    """Torch device of the HF engines."""
    batch_size: int
    """Generation batch size of the HF engines."""
    tokenizer: str | None
    """Tokenizer of an HTTP engine."""
    chunk_size: int
    """Records per resumable block."""
    progress: bool
    """Show the progress bars (False: ``--no_progress``)."""
    structured: bool
    """Decode the judges' JSON under its schema (False: the free-text ablation, ``--no_structured_output``)."""
    backbone: BackboneOptions
    """How the stages run on Ray (the backbone flags)."""

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> StageSettings:
        return cls(**namespace_values(cls, args, skip=("progress", "structured", "backbone")),
                   progress=not args.no_progress, structured=not args.no_structured_output,
                   backbone=BackboneOptions.from_args(args))


@dataclass(frozen=True)
class BenchConfig:
    """One ``sci2pol bench`` run, as its flags set it (``from_args``)."""

    model: str
    """Engine spec of the model under test."""
    judge: str
    """Engine spec of the judge of tasks 7-15."""
    bench_dir: str | None
    """Folder of taskN.jsonl rows (None: the built-in miniature items)."""
    tasks: tuple[str, ...] | None
    """The tasks to run (None: all)."""
    per_task: int
    """Built-in items per task."""
    limit: int
    """At most this many items per task (0: all)."""
    max_new_tokens: int
    """Answer tokens of the classification tasks (the budget of the items resolved)."""
    open_tokens: int
    """Answer tokens of the open-ended tasks 7-15 (resolved likewise)."""
    judge_tokens: int
    """Judge output tokens (resolved likewise)."""
    judge_retries: int
    """Retries of an invalid judge output."""
    bootstrap: int
    """Bootstrap resamples of the standard errors."""
    output: str
    """Output folder: parts, cache, responses.jsonl, results.json."""
    cache_dir: str | None
    """Result cache folder (None: OUTPUT/cache)."""
    stages: StageSettings
    """How the LLM stages run."""

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BenchConfig:
        """The options of ``args`` with the token budgets left unset filled: ``DEMO_BUDGETS`` on the built-in
        items, ``RELEASE_BUDGETS`` with ``--bench_dir``; a budget below 1 is an error naming its flag."""
        budgets = {}
        for name, default in (RELEASE_BUDGETS if args.bench_dir else DEMO_BUDGETS).items():
            value = getattr(args, name)
            if value is not None and value < 1:
                raise SystemExit(f"error: --{name} must be >= 1, got {value}")
            budgets[name] = default if value is None else value
        return cls(**namespace_values(cls, args, skip=("tasks", "stages", *budgets)), **budgets,
                   tasks=tuple(args.tasks.split(",")) if args.tasks else None,
                   stages=StageSettings.from_args(args))


@dataclass(frozen=True)
class CorpusConfig:
    """One ``sci2pol corpus`` run, as its flags set it (``from_args``)."""

    documents: str | None
    """Policy documents JSONL (None, with ``papers`` None: the built-in inputs)."""
    papers: str | None
    """Papers JSONL (None, with ``documents`` None: the built-in inputs)."""
    judge: str
    """Engine spec of the two relevance passes."""
    polisher: str
    """Engine spec of the style polishing (``--polisher``, else ``--judge``)."""
    max_citations: int
    """Keep documents citing at most this many papers."""
    long_chars: int
    """Documents longer than this are split into executive summary (brief) and remainder."""
    max_split_similarity: float
    """Reject split pairs whose halves have a higher word 5-gram Jaccard similarity."""
    shots: int
    """Style examples in the polishing prompt."""
    polish_tokens: int
    """Tokens of the polished brief."""
    judge_retries: int
    """Retries of an unparsable verdict."""
    output: str
    """Output folder: parts, pairs.jsonl, rejects.jsonl."""
    stages: StageSettings
    """How the LLM stages run."""

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CorpusConfig:
        if (args.documents is None) != (args.papers is None):
            raise SystemExit("error: pass both --documents and --papers, or neither (built-in inputs)")
        return cls(**namespace_values(cls, args, skip=("polisher", "stages")), polisher=args.polisher or args.judge,
                   stages=StageSettings.from_args(args))
