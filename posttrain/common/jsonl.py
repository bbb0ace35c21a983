"""JSON-lines files read strictly: a bad line raises an error naming the file and its 1-based line.

The project's one JSONL reader: task datasets (``posttrain.tasks.dataset``), reward-model data
(``rewards.mr3.data``), the Sci2Pol release loader and the data pipelines' stored stages all read through
it (callers add what they check about each record, naming the same line). Blank lines are skipped. The
data pipelines' inputs have a lenient reader besides, ``data_pipelines.common.io.JsonlSource``, which turns
a bad line into a counted reject instead of stopping the run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class JsonlError(ValueError):
    """A line that is not valid JSON (or not an object, where objects are required)."""


def iter_jsonl(path: str | Path, objects_only: bool = True) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of every non-blank line of ``path``; ``JsonlError`` naming the file and
    line for invalid JSON, and with ``objects_only`` for a value that is not a JSON object."""
    with open(path, encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as err:
                raise JsonlError(f"{path}, line {line_number}: invalid JSON ({err.msg})") from None
            if objects_only and not isinstance(value, dict):
                raise JsonlError(f"{path}, line {line_number}: expected a JSON object, got {type(value).__name__}")
            yield line_number, value


def read_jsonl(path: str | Path) -> list[dict]:
    """Every record (JSON object) of ``path``, in order (``iter_jsonl``'s errors)."""
    return [record for _, record in iter_jsonl(path)]
