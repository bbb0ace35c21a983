"""Atomic file writes: a reader never sees a half-written file, and a crash leaves the old one whole."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


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
    """Write ``records`` as JSON lines (UTF-8, one object a line), atomically and one record at a time (an
    iterator is never held whole)."""
    _atomic_write_chunks(path, (json.dumps(r, ensure_ascii=False) + "\n" for r in records))
