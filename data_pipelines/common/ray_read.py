"""A stage's input as a Ray dataset that the workers read themselves, each row numbered by its input position.

``indexed_lines(spec)`` returns a ``ray.data.Dataset`` with two columns: ``_index`` (the record's position in
the whole input, 0-based) and ``line`` (the record as JSON text; for JSONL the line exactly as written, so a
malformed line reaches the stage runner and becomes a reject instead of failing the read). Formats:

- JSONL (``.jsonl``, ``.json``, ``.ndjson``, optionally compressed: ``.gz``, ``.zst``, ...), Parquet
  (``.parquet``) and Arrow IPC streams (``.arrow``: the files of a ``datasets`` ``save_to_disk`` folder or of
  a Hub dataset in the ``datasets`` cache); a file, or a folder of such files read in name order;
- any filesystem pyarrow reaches: a local path or a URI (``s3://``, ``gs://``, ``hdfs://``, ...), or an
  explicit ``filesystem``;
- a list of dicts already in memory (``ray.data.from_items``).

Ray Data has no global row number (``monotonically_increasing_id`` is neither dense nor deterministic), so
the reading is a ``FileBasedDatasource`` (Ray Data's extension point for file formats) run twice: a first
pass where each file reports its row count (a file's Parquet/Arrow footer, or a count of the lines), from
which the driver computes each file's first index (one integer per file), and a second pass where each read
task numbers its file's rows from that offset. Blank JSONL lines are skipped and not numbered; lines are
split on ``\\n`` only (``str.splitlines`` would also split inside a JSON string holding U+2028).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow
import pyarrow.fs
from ray.data.datasource import FileBasedDatasource

INDEX = "_index"
LINE = "line"
ROWS_PER_BLOCK = 4096
"""Rows per block a read task yields (a big file is read as a stream of blocks, never whole)."""

JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
COMPRESSION_SUFFIXES = ("", ".gz", ".bz2", ".zst", ".lz4", ".br")


def _format_of(name: str) -> str | None:
    for suffix in COMPRESSION_SUFFIXES:
        for base in JSONL_SUFFIXES:
            if name.endswith(base + suffix):
                return "jsonl"
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith(".arrow"):
        return "arrow"
    return None


def _to_line(row: dict) -> str:
    return json.dumps(row, ensure_ascii=False, default=str)


def _iter_lines(stream: pyarrow.NativeFile) -> Iterator[str]:
    """Non-blank lines of a JSONL stream, split on ``\\n`` only, decoded leniently (a bad byte is replaced)."""
    rest = b""
    while True:
        data = stream.read(1 << 20)
        if not data:
            break
        *lines, rest = (rest + data).split(b"\n")
        for raw in lines:
            if raw.strip():
                yield raw.decode("utf-8", errors="replace").rstrip("\r")
    if rest.strip():
        yield rest.decode("utf-8", errors="replace").rstrip("\r")


def _iter_row_lines(stream: pyarrow.NativeFile, fmt: str) -> Iterator[str]:
    """A file's rows as JSON text, in file order."""
    if fmt == "jsonl":
        yield from _iter_lines(stream)
        return
    if fmt == "parquet":
        import pyarrow.parquet as pq

        batches = pq.ParquetFile(stream).iter_batches(batch_size=ROWS_PER_BLOCK)
    else:
        batches = iter(pyarrow.ipc.open_stream(stream))
    for batch in batches:
        for row in batch.to_pylist():
            yield _to_line(row)


def _count_rows(stream: pyarrow.NativeFile, fmt: str) -> int:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(stream).metadata.num_rows
    if fmt == "arrow":
        return sum(batch.num_rows for batch in pyarrow.ipc.open_stream(stream))
    return sum(1 for _ in _iter_lines(stream))


class IndexedRecordsDatasource(FileBasedDatasource):
    """Rows of JSONL / Parquet / Arrow files as ``{_index, line}``, numbered from ``offsets[path]``; with
    ``offsets=None`` each file yields one row ``{path, rows}`` instead (the counting pass)."""

    def __init__(self, paths: list[str], fmt: str, offsets: dict[str, int] | None = None,
                 filesystem: pyarrow.fs.FileSystem | None = None) -> None:
        super().__init__(paths, filesystem=filesystem)  # JSONL: a compressed stream by suffix, as Ray opens it
        self.fmt = fmt
        self.offsets = offsets

    def _open_input_source(self, filesystem: pyarrow.fs.FileSystem, path: str, **open_args: Any):
        if self.fmt == "jsonl":
            return super()._open_input_source(filesystem, path, **open_args)
        return filesystem.open_input_file(path)  # Parquet and Arrow files are read by their own readers

    def _read_stream(self, stream: pyarrow.NativeFile, path: str) -> Iterator[pyarrow.Table]:
        if self.offsets is None:
            yield pyarrow.table({"path": [path], "rows": [_count_rows(stream, self.fmt)]})
            return
        if path not in self.offsets:
            raise RuntimeError(f"{path}: not seen by the counting pass (did the input change while reading?)")
        index, lines = self.offsets[path], []
        for line in _iter_row_lines(stream, self.fmt):
            lines.append(line)
            if len(lines) == ROWS_PER_BLOCK:
                yield pyarrow.table({INDEX: range(index, index + len(lines)), LINE: lines})
                index, lines = index + len(lines), []
        if lines:
            yield pyarrow.table({INDEX: range(index, index + len(lines)), LINE: lines})


def _resolve(spec: str, filesystem: pyarrow.fs.FileSystem | None) -> tuple[list[str], str, Any]:
    """The files of ``spec`` in name order, their format and the filesystem to read them with."""
    if filesystem is None:
        if "://" in spec:
            filesystem, root = pyarrow.fs.FileSystem.from_uri(spec)
        else:
            filesystem, root = pyarrow.fs.LocalFileSystem(), str(Path(spec).resolve())
    else:
        root = spec
    info = filesystem.get_file_info(root)
    if info.type == pyarrow.fs.FileType.NotFound:
        raise FileNotFoundError(f"input {spec}: no such file or folder")
    if info.type == pyarrow.fs.FileType.File:
        files = [root]
    else:
        listing = filesystem.get_file_info(pyarrow.fs.FileSelector(root, recursive=False))
        files = sorted(i.path for i in listing if i.type == pyarrow.fs.FileType.File and _format_of(i.base_name))
    formats = {_format_of(Path(f).name) for f in files}
    if not files or None in formats or len(formats) != 1:
        raise ValueError(f"input {spec}: expected a .jsonl/.parquet/.arrow file or a folder of one of these "
                         f"kinds, found {[Path(f).name for f in files][:5] or 'no such files'}")
    return files, formats.pop(), filesystem


def _hub_files(spec: str, split: str) -> list[str]:
    """The Arrow files behind a ``save_to_disk`` folder or a Hub dataset in the ``datasets`` cache."""
    import datasets

    path = Path(spec)
    if path.is_dir():
        ds = datasets.load_from_disk(str(path))
    else:
        ds = datasets.load_dataset(spec, split=split)
    if isinstance(ds, datasets.DatasetDict):
        ds = ds[split]
    if ds._indices is not None or not ds.cache_files:
        raise ValueError(f"input {spec}: an in-memory or index-mapped dataset; save it with save_to_disk first")
    return [f["filename"] for f in ds.cache_files]


def _rank(files: list[str], path: str) -> int:
    for rank, name in enumerate(files):
        if name == path or name.endswith(path) or path.endswith(name):
            return rank
    raise RuntimeError(f"the reader saw a file {path!r} that is not among the input's files")


def indexed_lines(spec: str | Path | list[dict], *, filesystem: pyarrow.fs.FileSystem | None = None,
                  split: str = "train") -> tuple[Any, int]:
    """The input (the module docstring) as a Ray dataset of ``{_index, line}`` rows, and its number of rows."""
    import ray.data

    if isinstance(spec, list):
        return ray.data.from_items([{INDEX: i, LINE: _to_line(r)} for i, r in enumerate(spec)]), len(spec)
    spec = str(spec)
    path = Path(spec)
    is_hub = filesystem is None and "://" not in spec and (
        (path.is_dir() and ((path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists()))
        or (not path.exists() and _format_of(path.name) is None))  # a missing data file is an error, not a name
    if is_hub:
        files, fmt, filesystem = _hub_files(spec, split), "arrow", pyarrow.fs.LocalFileSystem()
    else:
        files, fmt, filesystem = _resolve(spec, filesystem)
    counts = {row["path"]: int(row["rows"]) for row in
              ray.data.read_datasource(IndexedRecordsDatasource(files, fmt, None, filesystem)).take_all()}
    offsets, total = {}, 0
    for name in sorted(counts, key=lambda p: _rank(files, p)):  # file order, whatever order the counts came in
        offsets[name] = total
        total += counts[name]
    return ray.data.read_datasource(IndexedRecordsDatasource(files, fmt, offsets, filesystem)), total
