"""The project's JSONL reader: records in order, blank lines skipped, errors naming the file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from posttrain.common.jsonl import JsonlError, iter_jsonl, read_jsonl


def test_records_in_order_and_blank_lines_skipped(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"a": 1}\n\n  \n{"a": 2}\n')
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]
    assert [n for n, _ in iter_jsonl(path)] == [1, 4]


@pytest.mark.parametrize(("text", "message"), [
    ('{"a": 1}\n{"a": \n', "b.jsonl, line 2: invalid JSON"),
    ('{"a": 1}\n\n[1, 2]\n', "b.jsonl, line 3: expected a JSON object, got list"),
])
def test_bad_lines_are_named(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "b.jsonl"
    path.write_text(text)
    with pytest.raises(JsonlError, match=message):
        read_jsonl(path)


def test_any_json_value_when_objects_are_not_required(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('[1, 2]\n"x"\n')
    assert list(iter_jsonl(path, objects_only=False)) == [(1, [1, 2]), (2, "x")]
