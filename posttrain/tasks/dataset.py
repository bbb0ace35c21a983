"""A task from any JSONL file or Hugging Face dataset with a prompt column and an answer column.

JSONL files (``.jsonl``/``.json`` with one object per line) are read here (``posttrain.common.jsonl``), so a
malformed row is reported with the file, its 1-based line number and the field at fault. Anything else (a dataset
directory, a ``.csv``/``.parquet`` file, a hub id already in the local cache) goes through
``datasets.load_dataset``. The dataset's ``test`` split is used when it has one; otherwise a seeded
``test_fraction`` of the rows is held out. Other columns ride along for user reward functions.
Reward: 1.0 when ``posttrain.tasks.verifiers.math_equal`` accepts the completion, else 0.0. With
``raw_prompts`` (config ``--raw_prompts true``) each prompt is already the full text the model continues
(e.g. mR3 SFT data from ``python -m rewards.mr3.data``, whose prompts hold the rendered chat): examples
are ``RawPromptExample``s, fed to the model without the chat template. With ``text_column`` (config
``--text_column text``) the rows are plain-text documents (e.g. EntropyLong's ``sequences.jsonl``): each
is a ``TextExample`` holding that column's text, with no prompt and no answer, for language modelling
(``--algo sft`` trains on every token); the rows need no prompt or answer column.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from posttrain.common.jsonl import JsonlError, iter_jsonl
from posttrain.tasks.base import TASKS, Example
from posttrain.tasks.prompts import RawPromptExample, TextExample
from posttrain.tasks.verifiers import math_equal

_FILE_BUILDERS = {".csv": "csv", ".parquet": "parquet"}
RowReader = Callable[[Any, str], Example]
"""Turns one row (and where it is, for errors) into an example."""


class DatasetError(ValueError):
    """A malformed dataset row; the message names the source, the 1-based row and the field."""


def _example(row: Any, where: str, prompt_column: str, answer_column: str) -> Example:
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(row).__name__}")
    if prompt_column not in row:
        raise DatasetError(f"{where}: missing prompt field {prompt_column!r}")
    if answer_column not in row or row[answer_column] is None:
        raise DatasetError(f"{where}: missing answer field {answer_column!r}")
    prompt, answer = row[prompt_column], row[answer_column]
    if not isinstance(prompt, str) or not prompt.strip():
        raise DatasetError(f"{where}: prompt field {prompt_column!r} must be a non-empty string, got {prompt!r}")
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        raise DatasetError(f"{where}: answer field {answer_column!r} must be a string or number, got {answer!r}")
    columns = {k: v for k, v in row.items() if k not in (prompt_column, answer_column)}
    return Example(prompt=prompt, answer=str(answer), columns=columns)


def _text_example(row: Any, where: str, text_column: str) -> TextExample:
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(row).__name__}")
    text = row.get(text_column)
    if not isinstance(text, str) or not text.strip():
        raise DatasetError(f"{where}: text field {text_column!r} must be a non-empty string, got {text!r}")
    return TextExample(prompt="", answer="", columns={k: v for k, v in row.items() if k != text_column}, text=text)


def row_reader(prompt_column: str, answer_column: str, text_column: str | None = None) -> RowReader:
    """The row -> example function: a ``TextExample`` of ``text_column`` when it is given, else a
    prompt / answer ``Example``."""
    if text_column:
        return lambda row, where: _text_example(row, where, text_column)
    return lambda row, where: _example(row, where, prompt_column, answer_column)


def read_examples(path: Path, prompt_column: str, answer_column: str,
                  text_column: str | None = None) -> list[Example]:
    """Examples from a JSONL file (``posttrain.common.jsonl``: blank lines skipped); a bad line raises
    ``DatasetError`` naming it."""
    read = row_reader(prompt_column, answer_column, text_column)
    try:
        examples = [read(row, f"{path}, line {line_number}") for line_number, row in iter_jsonl(path, objects_only=False)]
    except JsonlError as err:
        raise DatasetError(str(err)) from None
    if not examples:
        raise DatasetError(f"{path}: no rows")
    return examples


def _from_rows(rows: Iterable[Any], source: str, read: RowReader) -> list[Example]:
    examples = [read(row, f"{source}, row {i}") for i, row in enumerate(rows, start=1)]
    if not examples:
        raise DatasetError(f"{source}: no rows")
    return examples


def load_hf_splits(path_or_id: str, prompt_column: str, answer_column: str,
                   text_column: str | None = None) -> dict[str, list[Example]]:
    """Every split of a dataset loaded with ``datasets.load_dataset``, as examples."""
    import datasets

    suffix = Path(path_or_id).suffix.lower()
    if suffix in _FILE_BUILDERS and Path(path_or_id).is_file():
        loaded = datasets.load_dataset(_FILE_BUILDERS[suffix], data_files=path_or_id)
    else:
        loaded = datasets.load_dataset(path_or_id)
    read = row_reader(prompt_column, answer_column, text_column)
    return {name: _from_rows(split, f"{path_or_id} [{name}]", read) for name, split in loaded.items()}


class DatasetTask:
    """Examples from a user's JSONL file or Hugging Face dataset, rewarded with ``math_equal``."""

    name = "dataset"

    def __init__(self, path_or_id: str, prompt_column: str = "prompt", answer_column: str = "answer",
                 test_fraction: float = 0.1, seed: int = 0, raw_prompts: bool = False,
                 text_column: str | None = None) -> None:
        if not 0 < test_fraction < 1:
            raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
        if raw_prompts and text_column:
            raise ValueError("raw_prompts and text_column exclude each other: a plain-text row has no prompt")
        self.raw_prompts = raw_prompts
        self.source = path_or_id
        path = Path(path_or_id)
        if path.suffix.lower() in (".jsonl", ".json") and path.is_file():
            splits = {"train": read_examples(path, prompt_column, answer_column, text_column)}
        else:
            splits = load_hf_splits(path_or_id, prompt_column, answer_column, text_column)
        if "test" in splits:
            train_name = "train" if "train" in splits else next(n for n in splits if n != "test")
            self._splits = {"train": splits[train_name], "test": splits["test"]}
        else:
            self._splits = self._hold_out(splits["train" if "train" in splits else next(iter(splits))],
                                          test_fraction, seed)
        if raw_prompts:
            self._splits = {name: [RawPromptExample(e.prompt, e.answer, e.columns) for e in examples]
                            for name, examples in self._splits.items()}

    def _hold_out(self, examples: list[Example], test_fraction: float, seed: int) -> dict[str, list[Example]]:
        if len(examples) < 2:
            raise DatasetError(f"{self.source}: needs at least 2 rows to hold out a test split, has {len(examples)}")
        order = list(range(len(examples)))
        random.Random(seed).shuffle(order)
        n_test = min(len(examples) - 1, max(1, round(test_fraction * len(examples))))
        test = sorted(order[:n_test])
        train = sorted(order[n_test:])
        return {"train": [examples[i] for i in train], "test": [examples[i] for i in test]}

    def split(self, name: str) -> list[Example]:
        if name not in self._splits:
            raise ValueError(f"dataset task {self.source!r} has splits 'train' and 'test', not {name!r}")
        return list(self._splits[name])

    def reward(self, prompts: list[str], completions: list[str], **columns: list[Any]) -> list[float | None]:
        """1.0 when ``math_equal(completion, answer)``, else 0.0."""
        return [1.0 if math_equal(c, a) else 0.0 for c, a in zip(completions, columns["answer"], strict=True)]

    def is_correct(self, completion: str, example: Example) -> bool:
        return math_equal(completion, example.answer)


TASKS.register("dataset")(DatasetTask)
