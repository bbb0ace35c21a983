"""SFT data for a Text2Grad span reward model (arXiv 2505.22338): ``posttrain data text2grad-sft``.

Each output line is ``{"id", "prompt", "answer", "form", "style"}``: ``prompt`` is the reward model's user
turn (``templates.render_request``), ``answer`` the feedback JSON it should write (``templates.feedback_json``).
Train on it with ``posttrain train --algo sft --task dataset --dataset OUT.jsonl`` (the dataset task renders
``prompt`` through the model's chat template, as ``scorer.SpanRewardModel`` does at reward time, and puts
the loss on ``answer`` plus EOS).

Sources:

- no ``--input``: the embedded default, ``--n`` responses with injected step errors on ``step-arithmetic``
  training problems labelled by the program (``posttrain.tasks.step_arithmetic.program_feedback``), compact
  style: the data the ``reward-text2grad`` recipe warm-starts on;
- ``--input FILE`` (JSONL / JSON / a Hugging Face dataset, read by ``rewards.mr3.data.load_records``):
  annotated records ``{"prompt", "response", "feedback": {...}}``, the feedback an object (or a JSON string)
  in any key variant of ``--form`` that ``feedback.parse_feedback`` reads (e.g. the paper's GPT-4o
  annotations), written back with the paper's key names. A bad record stops the run naming the record and
  field, unless ``--skip_bad`` (then it is counted).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from posttrain.common.cli_help import emit_summary
from posttrain.common.files import atomic_write_jsonl
from posttrain.tasks import TASKS
from posttrain.tasks.span_feedback import FORMS, FeedbackParseError, feedback_from_object, parse_feedback
from posttrain.tasks.span_templates import STYLES, feedback_json, render_request


def program_rows(n: int, split: str = "train") -> list[dict[str, Any]]:
    """``n`` rows of the embedded default (the ``step-arithmetic-feedback`` task's ``split``)."""
    examples = TASKS.get("step-arithmetic-feedback")(train_size=max(n, 1)).split(split)[:n]
    return [{"id": f"step-{split}-{i}", "prompt": e.prompt, "answer": e.answer, "form": "spans", "style": "compact"}
            for i, e in enumerate(examples)]


def record_row(record: dict[str, Any], index: int, form: str, style: str) -> dict[str, Any]:
    """One annotated record as a row (``FeedbackParseError`` naming the record and field when it is bad)."""
    where = f"record {index} ({record.get('id', 'no id')})"
    for field in ("prompt", "response", "feedback"):
        if field not in record:
            raise FeedbackParseError(f"{where}: missing field '{field}'")
    for field in ("prompt", "response"):
        if not isinstance(record[field], str):
            raise FeedbackParseError(f"{where}: field '{field}' must be a string")
    raw = record["feedback"]
    try:
        if isinstance(raw, str):
            feedback = parse_feedback(raw, form)
        elif isinstance(raw, dict):
            feedback = feedback_from_object(raw, form)
        else:
            raise FeedbackParseError(f"feedback: expected an object or a JSON string, got {type(raw).__name__}")
    except FeedbackParseError as err:
        raise FeedbackParseError(f"{where}: {err}") from None
    return {"id": str(record.get("id", index)), "prompt": render_request(form, record["prompt"], record["response"],
                                                                          style),
            "answer": feedback_json(feedback, compact=style == "compact"), "form": form, "style": style}


def record_rows(records: Iterable[dict[str, Any]], form: str, style: str, skip_bad: bool = False,
                errors: list[str] | None = None) -> list[dict[str, Any]]:
    """Rows of annotated ``records``; with ``skip_bad`` bad records are left out and their errors collected."""
    rows = []
    for index, record in enumerate(records):
        try:
            rows.append(record_row(record, index, form, style))
        except FeedbackParseError as err:
            if not skip_bad:
                raise
            if errors is not None:
                errors.append(str(err))
    return rows


def add_text2grad_sft_args(parser: argparse.ArgumentParser) -> None:
    """The options of ``posttrain data text2grad-sft``."""
    parser.add_argument("--output", type=Path, default=Path("outputs/text2grad_sft.jsonl"), help="Output JSONL.")
    parser.add_argument("--input", default=None, help="Annotated records {prompt, response, feedback} (JSONL/JSON/HF "
                        "dataset); unset = the embedded step-arithmetic program feedback.")
    parser.add_argument("--split", default="train", help="Split of --input, or of the embedded problems.")
    parser.add_argument("--form", default="spans", choices=list(FORMS), help="Feedback form of --input.")
    parser.add_argument("--style", default="full", choices=list(STYLES),
                        help="Template style for --input (the embedded default is always compact).")
    parser.add_argument("--n", type=int, default=2000, help="Embedded default: number of examples.")
    parser.add_argument("--skip_bad", action="store_true", help="Skip (and count) bad records instead of failing.")


def run_text2grad_sft(args: argparse.Namespace) -> int:
    """Build the rows and write them atomically; prints a JSON summary (``cli_help.emit_summary``)."""
    errors: list[str] = []
    if args.input is None:
        if args.n < 1:
            print(f"error: --n must be >= 1, got {args.n}")
            return 2
        rows = program_rows(args.n, args.split)
    else:
        from rewards.mr3.data import load_records

        try:
            rows = record_rows(load_records(args.input, args.split), args.form, args.style, args.skip_bad, errors)
        except FeedbackParseError as err:
            print(f"error: {err}")
            return 2
    atomic_write_jsonl(args.output, rows)
    emit_summary({"output": str(args.output), "examples": len(rows), "skipped": len(errors),
                  "first_errors": errors[:5], "source": args.input or "step-arithmetic program feedback",
                  "train": f"posttrain train --algo sft --task dataset --dataset {args.output}"}, None)
    return 0

