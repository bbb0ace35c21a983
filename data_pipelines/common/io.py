"""Reading records (JSONL, Parquet, Hugging Face datasets) and writing files atomically.

Inputs are read lazily as a ``RecordSource``: a length and ``chunk(start, stop)``. JSONL is indexed by
byte offset and parsed line by line, so a malformed line becomes a ``Malformed`` item (the runner writes
it to the rejects file) instead of failing the whole load; Parquet files and datasets saved with
``save_to_disk`` go through ``datasets``; any other string is tried as a Hub dataset name (offline-safe:
``datasets`` only reads its cache when ``HF_DATASETS_OFFLINE=1``). Files that must be whole (stored stage
outputs) are read strictly with ``posttrain.jsonl.read_jsonl``.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


@dataclass
class Malformed:
    """An input item that could not be parsed into a record."""

    index: int
    reason: str
    raw: str


class RecordSource(Protocol):
    """Random-access, lazily read records; ``chunk`` returns dicts (or ``Malformed``)."""

    name: str

    def __len__(self) -> int: ...

    def chunk(self, start: int, stop: int) -> list[dict | Malformed]: ...


class ListSource:
    """Records already in memory."""

    def __init__(self, records: list[dict], name: str = "memory") -> None:
        self.records, self.name = records, name

    def __len__(self) -> int:
        return len(self.records)

    def chunk(self, start: int, stop: int) -> list[dict | Malformed]:
        return [r if isinstance(r, dict) else Malformed(start + i, f"not a JSON object: {type(r).__name__}", repr(r))
                for i, r in enumerate(self.records[start:stop])]


class JsonlSource:
    """A JSONL file, indexed by line start offsets; blank lines are skipped."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.name = str(self.path)
        self.offsets: list[int] = []
        with open(self.path, "rb") as handle:
            position = 0
            for line in handle:
                if line.strip():
                    self.offsets.append(position)
                position += len(line)

    def __len__(self) -> int:
        return len(self.offsets)

    def chunk(self, start: int, stop: int) -> list[dict | Malformed]:
        out: list[dict | Malformed] = []
        with open(self.path, "rb") as handle:
            for index in range(start, min(stop, len(self.offsets))):
                handle.seek(self.offsets[index])
                raw = handle.readline().decode("utf-8", errors="replace").rstrip("\n")
                try:
                    record = json.loads(raw)
                except json.JSONDecodeError as err:
                    out.append(Malformed(index, f"invalid JSON: {err}", raw[:500]))
                    continue
                if not isinstance(record, dict):
                    out.append(Malformed(index, f"not a JSON object: {type(record).__name__}", raw[:500]))
                    continue
                out.append(record)
        return out


class DatasetSource:
    """A ``datasets.Dataset`` (from Parquet, ``save_to_disk`` or the Hub cache)."""

    def __init__(self, dataset: Any, name: str) -> None:
        self.dataset, self.name = dataset, name

    def __len__(self) -> int:
        return len(self.dataset)

    def chunk(self, start: int, stop: int) -> list[dict | Malformed]:
        stop = min(stop, len(self.dataset))
        return [dict(r) for r in self.dataset.select(range(start, stop))] if stop > start else []


def open_source(spec: str | Path | list[dict], split: str = "train") -> RecordSource:
    """Open records from a JSONL file, a Parquet file/folder, a ``save_to_disk`` folder or a Hub name."""
    if isinstance(spec, list):
        return ListSource(spec)
    path = Path(spec)
    if path.is_file() and path.suffix in (".jsonl", ".json", ".ndjson"):
        return JsonlSource(path)
    import datasets

    if path.is_file() and path.suffix == ".parquet" or (path.is_dir() and any(path.glob("*.parquet"))):
        files = [str(path)] if path.is_file() else sorted(str(p) for p in path.glob("*.parquet"))
        return DatasetSource(datasets.load_dataset("parquet", data_files=files, split="train"), str(path))
    if path.is_dir() and ((path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists()):
        ds = datasets.load_from_disk(str(path))
        if isinstance(ds, datasets.DatasetDict):
            ds = ds[split]
        return DatasetSource(ds, str(path))
    if path.exists():
        raise ValueError(f"input {spec}: not a .jsonl/.parquet file, a parquet folder or a save_to_disk folder")
    return DatasetSource(datasets.load_dataset(str(spec), split=split), str(spec))


def read_text_records(spec: str | Path, field: str, limit: int = 0) -> list[dict]:
    """The records of ``spec`` (``open_source``), each with a non-empty string in ``field``; at most
    ``limit`` (0 = all). A malformed record, or one without that string, raises ``ValueError`` naming the
    source, the record number and the field."""
    source = open_source(spec)
    records: list[dict] = []
    for index, record in enumerate(source.chunk(0, len(source))):
        if isinstance(record, Malformed):
            raise ValueError(f"{spec}: record {index} is malformed ({record.reason})")
        value = record.get(field)
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{spec}: record {index} has no non-empty string field {field!r}")
        records.append(record)
        if limit and len(records) >= limit:
            break
    return records


def _atomic_write_chunks(path: str | Path, chunks: Iterable[str]) -> None:
    """Write ``chunks`` one after another to a temporary file in ``path``'s folder, fsync and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for chunk in chunks:
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder, fsync and ``os.replace``."""
    _atomic_write_chunks(path, (text,))


def atomic_write_jsonl(path: str | Path, records: Iterable[dict]) -> None:
    """Write ``records`` as JSONL, atomically, one record at a time (an iterator is never held whole)."""
    _atomic_write_chunks(path, (json.dumps(r, ensure_ascii=False) + "\n" for r in records))
