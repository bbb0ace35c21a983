"""A resumable, shardable stage runner: records in, records out, in chunks with atomic part files.

Layout of ``out_dir``::

    run.json                      what the stage runs on (input, length, chunk size, config hash)
    part-00003.jsonl              outputs of chunk 3 (input records [3*C, 4*C)), written atomically
    part-00003.rejects.jsonl      malformed / failed records of chunk 3 with the reason
    manifest-shard0of2.json       chunks this shard finished, with counts (rewritten atomically)

A chunk is *done* exactly when its part file exists: the rejects file is written first, then the part
file is renamed into place, then the manifest is updated. A run killed at any point restarts, skips the
done chunks and recomputes the rest, so the merged output has every record once, in input order.
``shard=(i, N)`` takes the chunks ``c`` with ``c % N == i``, so N machines sharing one folder split one
job; ``merge`` checks that every chunk is done before it writes the final file.

Determinism: the runner calls ``process`` on whole chunks in index order; a stage whose randomness is
seeded per record or per chunk (``chunk_seed``) gives the same output whether or not it was resumed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data_pipelines.common.io import (
    Malformed,
    RecordSource,
    atomic_write_jsonl,
    atomic_write_text,
    open_source,
)

logger = logging.getLogger(__name__)


@dataclass
class Reject:
    """Returned by a stage for a record it refuses; the runner writes it to the rejects file."""

    reason: str


Process = Callable[[list[dict]], list["dict | Reject | None"]]
"""A stage: a list of input records -> one item per input (output dict, ``Reject``, or None to drop)."""


def parse_shard(spec: str | None) -> tuple[int, int]:
    """``"i/N"`` -> ``(i, N)`` with ``0 <= i < N``; None -> ``(0, 1)``."""
    if not spec:
        return 0, 1
    try:
        i, n = (int(x) for x in spec.split("/"))
    except ValueError:
        raise ValueError(f"--shard must look like i/N (e.g. 0/4), got {spec!r}") from None
    if n < 1 or not 0 <= i < n:
        raise ValueError(f"--shard {spec!r}: need N >= 1 and 0 <= i < N")
    return i, n


def chunk_seed(base_seed: int, chunk_index: int) -> int:
    """A seed for one chunk that does not depend on which chunks ran before (resume-safe)."""
    digest = hashlib.sha256(f"{base_seed}:{chunk_index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


@dataclass
class RunSummary:
    chunks_total: int
    chunks_done_before: int
    chunks_run: int
    records_out: int
    records_rejected: int
    seconds: float


class StageRunner:
    """Runs ``process`` over a ``RecordSource`` chunk by chunk, resumably (see the module docstring)."""

    def __init__(
        self,
        out_dir: str | Path,
        process: Process,
        *,
        chunk_size: int = 256,
        batch_size: int | None = None,
        shard: tuple[int, int] = (0, 1),
        validate: Callable[[dict], str | None] | None = None,
        config: dict[str, Any] | None = None,
        desc: str = "stage",
        progress: bool = True,
    ) -> None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        self.out_dir = Path(out_dir)
        self.process = process
        self.chunk_size = chunk_size
        self.batch_size = batch_size or chunk_size
        self.shard = shard
        self.validate = validate
        self.config = config or {}
        self.desc = desc
        self.progress = progress

    # ---------------------------------------------------------------- paths
    def part_path(self, chunk: int) -> Path:
        return self.out_dir / f"part-{chunk:05d}.jsonl"

    def rejects_path(self, chunk: int) -> Path:
        return self.out_dir / f"part-{chunk:05d}.rejects.jsonl"

    def manifest_path(self) -> Path:
        i, n = self.shard
        return self.out_dir / f"manifest-shard{i}of{n}.json"

    def _run_info(self, source: RecordSource) -> dict:
        config_hash = hashlib.sha256(json.dumps(self.config, sort_keys=True, default=str).encode()).hexdigest()[:16]
        return {"input": source.name, "num_records": len(source), "chunk_size": self.chunk_size,
                "config_hash": config_hash, "config": self.config}

    def _check_run_info(self, info: dict) -> None:
        path = self.out_dir / "run.json"
        if path.exists():
            old = json.loads(path.read_text())
            for key in ("input", "num_records", "chunk_size", "config_hash"):
                if old.get(key) != info[key]:
                    raise ValueError(
                        f"{self.out_dir} holds a run with {key}={old.get(key)!r}, this one has {info[key]!r}; "
                        "use a fresh --output folder (or delete it) instead of mixing two runs")
        else:
            atomic_write_text(path, json.dumps(info, indent=2, default=str) + "\n")

    # ---------------------------------------------------------------- running
    def my_chunks(self, num_records: int) -> list[int]:
        num_chunks = -(-num_records // self.chunk_size)
        i, n = self.shard
        return [c for c in range(num_chunks) if c % n == i]

    def _remove_stale_temps(self, chunks: list[int]) -> None:
        """Delete temporary files a killed run of *this shard* left behind (atomic writes that never
        reached their rename); other shards' files are never touched, so shards may share a folder."""
        own = [self.manifest_path()] + [p for c in chunks for p in (self.part_path(c), self.rejects_path(c))]
        for path in own:
            for stale in path.parent.glob(f".{path.name}.*.tmp"):
                stale.unlink(missing_ok=True)

    def run(self, source: RecordSource | str | Path | list[dict]) -> RunSummary:
        if not hasattr(source, "chunk"):
            source = open_source(source)  # type: ignore[arg-type]
        start_time = time.perf_counter()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._check_run_info(self._run_info(source))
        chunks = self.my_chunks(len(source))
        self._remove_stale_temps(chunks)
        todo = [c for c in chunks if not self.part_path(c).exists()]
        manifest = self._load_manifest()
        bar = None
        if self.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(chunks), initial=len(chunks) - len(todo), desc=self.desc, unit="chunk")
        out_count = rej_count = 0
        for chunk in todo:
            outputs, rejects = self._run_chunk(source, chunk)
            atomic_write_jsonl(self.rejects_path(chunk), rejects)
            atomic_write_jsonl(self.part_path(chunk), outputs)
            manifest["chunks"][str(chunk)] = {"records": len(outputs), "rejects": len(rejects),
                                             "finished": time.time()}
            atomic_write_text(self.manifest_path(), json.dumps(manifest, indent=1) + "\n")
            out_count += len(outputs)
            rej_count += len(rejects)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(out=out_count, rejects=rej_count)
        if bar is not None:
            bar.close()
        return RunSummary(len(chunks), len(chunks) - len(todo), len(todo), out_count, rej_count,
                          time.perf_counter() - start_time)

    def _load_manifest(self) -> dict:
        path = self.manifest_path()
        if path.exists():
            return json.loads(path.read_text())
        return {"shard": list(self.shard), "chunks": {}}

    def _run_chunk(self, source: RecordSource, chunk: int) -> tuple[list[dict], list[dict]]:
        start = chunk * self.chunk_size
        items = source.chunk(start, start + self.chunk_size)
        outputs: list[dict] = []
        rejects: list[dict] = []
        good: list[tuple[int, dict]] = []
        for offset, item in enumerate(items):
            index = start + offset
            if isinstance(item, Malformed):
                rejects.append({"_index": index, "reason": item.reason, "raw": item.raw})
                continue
            reason = self.validate(item) if self.validate else None
            if reason:
                rejects.append({"_index": index, "reason": reason, "record": item})
                continue
            good.append((index, item))
        results: dict[int, dict | Reject | None] = {}
        for b in range(0, len(good), self.batch_size):
            batch = good[b:b + self.batch_size]
            results.update(self._process_batch(batch))
        for index, item in good:
            result = results[index]
            if isinstance(result, Reject):
                rejects.append({"_index": index, "reason": result.reason, "record": item})
            elif result is not None:
                outputs.append({"_index": index, **result})
        rejects.sort(key=lambda r: r["_index"])
        return outputs, rejects

    def _process_batch(self, batch: list[tuple[int, dict]]) -> Iterator[tuple[int, dict | Reject | None]]:
        """Whole batch at once; if it raises, one record at a time so only the bad ones are rejected."""
        try:
            results = self.process([r for _, r in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"stage returned {len(results)} results for {len(batch)} records")
            return zip([i for i, _ in batch], results)
        except Exception as err:  # noqa: BLE001 - isolate the failing records
            if len(batch) == 1:
                return iter([(batch[0][0], Reject(f"{type(err).__name__}: {err}"))])
            logger.warning("%s: batch failed (%s); retrying record by record", self.desc, err)
            out: list[tuple[int, dict | Reject | None]] = []
            for pair in batch:
                out.extend(self._process_batch([pair]))
            return iter(out)

    # ---------------------------------------------------------------- results
    def is_complete(self, num_records: int) -> bool:
        num_chunks = -(-num_records // self.chunk_size)
        return all(self.part_path(c).exists() for c in range(num_chunks))

    def iter_outputs(self) -> Iterator[dict]:
        """Outputs of every finished chunk (all shards), in input order."""
        for path in sorted(self.out_dir.glob("part-*.jsonl")):
            if path.name.endswith(".rejects.jsonl"):
                continue
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    if line.strip():
                        yield json.loads(line)

    def iter_rejects(self) -> Iterator[dict]:
        for path in sorted(self.out_dir.glob("part-*.rejects.jsonl")):
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    if line.strip():
                        yield json.loads(line)

    def merge(self, path: str | Path, num_records: int) -> int:
        """Write all outputs to one JSONL file (atomically); fails if any chunk is not done yet."""
        if not self.is_complete(num_records):
            num_chunks = -(-num_records // self.chunk_size)
            missing = [c for c in range(num_chunks) if not self.part_path(c).exists()]
            raise RuntimeError(f"cannot merge {self.out_dir}: chunks {missing[:10]} not done (other shards?)")
        records = list(self.iter_outputs())
        atomic_write_jsonl(path, records)
        return len(records)
