"""One block of a stage, run on a Ray worker: check whether it is already done for this exact input, parse and
validate its records, call the stage (retrying infrastructure failures), and write its own files.

Files of block ``k`` in the stage's folder, written in this order, each atomically::

    part-0000k.rejects.jsonl   the records the block refused, each with ``_index`` and the reason
    part-0000k.meta.json       the block's identity: sha256 of its input lines, the stage's config hash, counts
    part-0000k.jsonl           the outputs; its existence is what makes the block done

**Data rejects vs infrastructure failures.** A record is rejected when it is malformed (not a JSON object),
when ``validate`` names a reason, or when the stage returns ``Reject(reason)`` for it: it is written with its
reason and the block is done. An exception raised by the stage (or by building it: a missing package, an
engine that cannot load) is an infrastructure failure, never a reject: the call is retried ``retries`` times
with exponential backoff (``retry_backoff_s``, doubling), and if it still fails the block writes nothing and
reports ``failed`` with the cause, which fails the run; a rerun retries that block.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data_pipelines.common.stage import Process, Reject
from posttrain.common.files import atomic_write_jsonl, atomic_write_text

logger = logging.getLogger(__name__)


class StageFailed(RuntimeError):
    """An infrastructure failure that outlived its retries (the message names the block and the cause)."""


class StaleOutput(ValueError):
    """A folder's finished work was made from another input, config or model than this run's."""


def record_id(record: dict, stage_config_hash: str) -> str:
    """Content key of an input record under one stage config: the first 16 hex digits of sha256(config hash +
    canonical JSON of the record)."""
    canonical = json.dumps(record, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(f"{stage_config_hash}\n{canonical}".encode()).hexdigest()[:16]


def lines_digest(lines: list[str]) -> str:
    """sha256 of a block's input lines (their exact text, in order)."""
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode("utf-8", errors="surrogatepass"))
        digest.update(b"\n")
    return digest.hexdigest()


def part_name(block: int, suffix: str = ".jsonl") -> str:
    return f"part-{block:05d}{suffix}"


def _parse(index: int, line: str) -> tuple[dict | None, dict | None]:
    """``(record, None)`` for a JSON object, else ``(None, reject)``."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        return None, {"_index": index, "reason": f"invalid JSON: {err}", "raw": line[:500]}
    if not isinstance(record, dict):
        return None, {"_index": index, "reason": f"not a JSON object: {type(record).__name__}", "raw": line[:500]}
    return record, None


@dataclass
class BlockTask:
    """What a worker needs to run any block of one stage (picklable; sent to every worker)."""

    out_dir: str
    num_records: int
    chunk_size: int
    batch_size: int
    validate: Callable[[dict], str | None] | None
    config_hash: str
    desc: str
    retries: int
    retry_backoff_s: float
    overwrite: bool

    def path(self, block: int, suffix: str = ".jsonl") -> Path:
        return Path(self.out_dir) / part_name(block, suffix)

    def run(self, block: int, indices: list[int], lines: list[str], get_process: Callable[[], Process]) -> dict:
        """Run (or reuse) block ``block`` given all its input rows; a summary row for the driver:
        ``status`` is ``reused``, ``done``, ``input_changed`` or ``failed`` (``detail`` says why)."""
        start = block * self.chunk_size
        expected = list(range(start, min(start + self.chunk_size, self.num_records)))
        if indices != expected:
            raise RuntimeError(f"{self.desc}: block {block} got input rows {indices[:3]}..{indices[-3:]}, "
                               f"not rows {start}..{expected[-1]}: the input was not split on block boundaries")
        digest = lines_digest(lines)
        summary = {"block": block, "status": "done", "outputs": 0, "rejects": 0, "detail": ""}
        if self.path(block).exists():
            mismatch = self._mismatch(block, digest)
            if mismatch is None:
                meta = json.loads(self.path(block, ".meta.json").read_text())
                return {**summary, "status": "reused", "outputs": meta["outputs"], "rejects": meta["rejects"]}
            if not self.overwrite:
                return {**summary, "status": "input_changed", "detail": mismatch}
        try:
            outputs, rejects = self._compute(indices, lines, get_process)
        except Exception as err:  # noqa: BLE001 - an infrastructure failure, reported to the driver
            cause = f"{type(err).__name__}: {err}"
            logger.error("%s: block %d failed after %d attempts: %s", self.desc, block, self.retries + 1, cause)
            return {**summary, "status": "failed", "detail": cause}
        atomic_write_jsonl(self.path(block, ".rejects.jsonl"), rejects)
        meta = {"input_sha256": digest, "config_hash": self.config_hash, "first_index": start,
                "records": len(lines), "outputs": len(outputs), "rejects": len(rejects)}
        atomic_write_text(self.path(block, ".meta.json"), json.dumps(meta) + "\n")
        atomic_write_jsonl(self.path(block), outputs)
        return {**summary, "outputs": len(outputs), "rejects": len(rejects)}

    def _mismatch(self, block: int, digest: str) -> str | None:
        """Why block ``block``'s finished part cannot be reused for this input (None: it can)."""
        meta_path = self.path(block, ".meta.json")
        where = f"block {block} (input records {block * self.chunk_size}..)"
        if not meta_path.exists():
            return f"{where}: {part_name(block)} records no input identity (written by an older version)"
        meta = json.loads(meta_path.read_text())
        if meta.get("config_hash") != self.config_hash:
            return f"{where}: made with stage config {meta.get('config_hash')}, this run's is {self.config_hash}"
        if meta.get("input_sha256") != digest:
            return f"{where}: the input records differ from those {part_name(block)} was made from"
        return None

    def _compute(self, indices: list[int], lines: list[str],
                 get_process: Callable[[], Process]) -> tuple[list[dict], list[dict]]:
        outputs: list[dict] = []
        rejects: list[dict] = []
        good: list[tuple[int, dict]] = []
        for index, line in zip(indices, lines):
            record, reject = _parse(index, line)
            if reject is None:
                reason = self.validate(record) if self.validate else None
                if reason:
                    reject = {"_index": index, "reason": reason, "record": record}
            if reject is not None:
                rejects.append(reject)
            else:
                good.append((index, record))
        for b in range(0, len(good), self.batch_size):
            batch = good[b:b + self.batch_size]
            results = self._call(get_process, [r for _, r in batch])
            for (index, record), result in zip(batch, results):
                if isinstance(result, Reject):
                    rejects.append({"_index": index, "reason": result.reason, "record": record})
                elif result is not None:
                    outputs.append({"_index": index, "_id": record_id(record, self.config_hash), **result})
        rejects.sort(key=lambda r: r["_index"])
        return outputs, rejects

    def _call(self, get_process: Callable[[], Process], records: list[dict]) -> list[Any]:
        """The stage's results for ``records``; an exception is retried with backoff, then raised."""
        for attempt in range(self.retries + 1):
            try:
                results = get_process()(records)
                break
            except Exception as err:  # any failure of the call is retried, then raised
                if attempt == self.retries:
                    raise
                delay = self.retry_backoff_s * 2 ** attempt
                logger.warning("%s: attempt %d failed (%s: %s); retrying in %.1fs", self.desc, attempt + 1,
                               type(err).__name__, err, delay)
                time.sleep(delay)
        if len(results) != len(records):
            raise RuntimeError(f"{self.desc}: the stage returned {len(results)} results for {len(records)} records")
        return results
