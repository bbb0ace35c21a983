"""The data backbone: a resumable stage runner on Ray Data (records in, records out, in blocks).

Layout of ``out_dir``::

    run.json                      what the stage runs on (input, length, block size, config hash)
    part-00003.jsonl              outputs of block 3 (input records [3*C, 4*C)), written atomically
    part-00003.rejects.jsonl      malformed / invalid / failed records of block 3 with the reason

Every stage is one Ray Data step over the blocks still to do (``data_pipelines.common.ray_exec``): a plain
``Process`` runs as Ray tasks (``map_batches`` with a function), an ``ActorStage`` as a pool of actors
(``map_batches`` with a callable class, ``concurrency=num_actors``, ``num_gpus`` per actor), so an LLM or
embedding engine is built once per actor, not once per block. ``ray_address=None`` starts (or joins) a
local in-process Ray; ``"auto"`` or ``"ray://host:port"`` runs the same pipeline on a cluster, where the
workers read the input and the output folder must be on storage every node and the driver see.

Results flow back to the driver, which writes the part files. A block is *done* exactly when its part
file exists: the driver writes the rejects file first, then renames the part file into place. One
writer keeps kill-and-resume exact: a worker killed mid-block writes nothing (the block is simply
recomputed), no two workers can race on one block's files, and a SIGKILL of the driver at any point
leaves only finished blocks plus temporary files the next run deletes. The next run of the same command
skips the done blocks, recomputes the rest, and ``merge`` writes a file byte-identical to an
uninterrupted run's. Blocks reach the driver in input order (Ray Data ``preserve_order``), but the
workers get them in no guaranteed order, even a single actor (seen: block 1 before block 0), so a stage
must not carry state from block to block: state that runs in input order over the whole dataset is a
driver-side step between two stages (EntropyLong's ``--max-reuse`` counts, ``select_contexts``).

Records are keyed by content: every output carries ``_id`` = the first 16 hex digits of
sha256(canonical JSON of the *input* record + the stage's config hash) (``record_id``): stable across runs
and machines, different for different content or config. ``_index`` (the input position) keeps order.
A stage fed by an earlier stage's outputs may return its own ``_index`` and ``_id`` (those of the root
record); they are kept.

Determinism: ``process`` sees whole blocks (in ``batch_size`` batches); a stage whose randomness is seeded
per record or per block (``chunk_seed``) gives the same output whether or not it was resumed.
``run_once(path, compute)`` is the same promise for a whole-dataset step (clustering, dedup, sampling).
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

from data_pipelines.common.io import Malformed, RecordSource, open_source
from posttrain.common.files import atomic_write_jsonl, atomic_write_text
from posttrain.common.jsonl import read_jsonl

logger = logging.getLogger(__name__)


@dataclass
class Reject:
    """Returned by a stage for a record it refuses; the runner writes it to the rejects file."""

    reason: str


Process = Callable[[list[dict]], list["dict | Reject | None"]]
"""A stage: a list of input records -> one item per input (output dict, ``Reject``, or None to drop)."""


@dataclass
class ActorStage:
    """A stage built on a worker: ``factory()`` (zero arguments, picklable, e.g. a ``functools.partial``)
    returns the ``Process``; it is called once per actor, so an engine is loaded ``num_actors`` times in
    all. ``num_gpus`` is reserved per actor (1 for a stage on a GPU device, 0 on CPU)."""

    factory: Callable[[], Process]
    num_actors: int = 1
    num_gpus: float = 0

    def __post_init__(self) -> None:
        if self.num_actors < 1:
            raise ValueError(f"ActorStage: num_actors must be >= 1, got {self.num_actors}")


def chunk_seed(base_seed: int, chunk_index: int) -> int:
    """A seed for one block that does not depend on which blocks ran before (resume-safe)."""
    digest = hashlib.sha256(f"{base_seed}:{chunk_index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def config_hash(config: dict[str, Any]) -> str:
    """The stage's config as 16 hex digits (``run.json`` and ``_id``)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def record_id(record: dict, stage_config_hash: str) -> str:
    """Content key of an input record under one stage config (see the module docstring)."""
    canonical = json.dumps(record, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(f"{stage_config_hash}\n{canonical}".encode()).hexdigest()[:16]


@dataclass
class RunSummary:
    chunks_total: int
    chunks_done_before: int
    chunks_run: int
    records_out: int
    records_rejected: int
    seconds: float


@dataclass
class BlockTask:
    """What a worker needs to run one block: the source, block size, validation and the config hash."""

    source: RecordSource
    chunk_size: int
    batch_size: int
    validate: Callable[[dict], str | None] | None
    config_hash: str
    desc: str

    def run(self, process: Process, block: int) -> tuple[list[dict], list[dict]]:
        """Outputs and rejects (each with ``_index``) of block ``block``."""
        start = block * self.chunk_size
        outputs: list[dict] = []
        rejects: list[dict] = []
        good: list[tuple[int, dict]] = []
        for offset, item in enumerate(self.source.chunk(start, start + self.chunk_size)):
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
            results.update(self._process_batch(process, good[b:b + self.batch_size]))
        for index, item in good:
            result = results[index]
            if isinstance(result, Reject):
                rejects.append({"_index": index, "reason": result.reason, "record": item})
            elif result is not None:
                outputs.append({"_index": index, "_id": record_id(item, self.config_hash), **result})
        rejects.sort(key=lambda r: r["_index"])
        return outputs, rejects

    def _process_batch(self, process: Process,
                       batch: list[tuple[int, dict]]) -> list[tuple[int, dict | Reject | None]]:
        """Whole batch at once; if it raises, one record at a time so only the bad ones are rejected."""
        try:
            results = process([r for _, r in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"stage returned {len(results)} results for {len(batch)} records")
            return list(zip([i for i, _ in batch], results))
        except Exception as err:  # noqa: BLE001 - isolate the failing records
            if len(batch) == 1:
                return [(batch[0][0], Reject(f"{type(err).__name__}: {err}"))]
            logger.warning("%s: batch failed (%s); retrying record by record", self.desc, err)
            out: list[tuple[int, dict | Reject | None]] = []
            for pair in batch:
                out.extend(self._process_batch(process, [pair]))
            return out


class StageRunner:
    """Runs ``process`` (a ``Process`` or an ``ActorStage``) over a ``RecordSource`` block by block on Ray
    Data, resumably (see the module docstring). ``num_workers`` is the number of Ray tasks (plain stage)
    or actors (overrides ``ActorStage.num_actors``) running at once; ``ray_address`` as in ``init_ray``."""

    def __init__(
        self,
        out_dir: str | Path,
        process: Process | ActorStage | None,
        *,
        chunk_size: int = 256,
        batch_size: int | None = None,
        validate: Callable[[dict], str | None] | None = None,
        config: dict[str, Any] | None = None,
        desc: str = "stage",
        progress: bool = True,
        ray_address: str | None = None,
        num_workers: int | None = None,
    ) -> None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        if num_workers is not None and num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        self.out_dir = Path(out_dir)
        self.process = process
        self.chunk_size = chunk_size
        self.batch_size = batch_size or chunk_size
        self.validate = validate
        self.config = config or {}
        self.config_hash = config_hash(self.config)
        self.desc = desc
        self.progress = progress
        self.ray_address = ray_address
        self.num_workers = num_workers

    # ---------------------------------------------------------------- paths
    def part_path(self, chunk: int) -> Path:
        return self.out_dir / f"part-{chunk:05d}.jsonl"

    def rejects_path(self, chunk: int) -> Path:
        return self.out_dir / f"part-{chunk:05d}.rejects.jsonl"

    def num_chunks(self, num_records: int) -> int:
        return -(-num_records // self.chunk_size)

    def _check_run_info(self, source: RecordSource) -> None:
        info = {"input": source.name, "num_records": len(source), "chunk_size": self.chunk_size,
                "config_hash": self.config_hash, "config": self.config}
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

    def _remove_stale_temps(self) -> None:
        """Delete temporary files a killed run left behind (atomic writes that never reached their rename)."""
        for stale in self.out_dir.glob(".part-*.tmp"):
            stale.unlink(missing_ok=True)

    # ---------------------------------------------------------------- running
    def run(self, source: RecordSource | str | Path | list[dict]) -> RunSummary:
        from data_pipelines.common.ray_exec import run_blocks

        if self.process is None:
            raise ValueError(f"{self.desc}: this runner has no process (it only reads results back)")
        if not hasattr(source, "chunk"):
            source = open_source(source)  # type: ignore[arg-type]
        start_time = time.perf_counter()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._check_run_info(source)
        self._remove_stale_temps()
        total = self.num_chunks(len(source))
        todo = [c for c in range(total) if not self.part_path(c).exists()]
        bar = None
        if self.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=total, initial=total - len(todo), desc=self.desc, unit="block")
        out_count = rej_count = 0
        task = BlockTask(source, self.chunk_size, self.batch_size, self.validate, self.config_hash, self.desc)
        try:
            for block, outputs, rejects in run_blocks(task, self.process, todo, ray_address=self.ray_address,
                                                      num_workers=self.num_workers):
                atomic_write_jsonl(self.rejects_path(block), rejects)
                atomic_write_jsonl(self.part_path(block), outputs)
                out_count += len(outputs)
                rej_count += len(rejects)
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(out=out_count, rejects=rej_count)
        finally:
            if bar is not None:
                bar.close()
        return RunSummary(total, total - len(todo), len(todo), out_count, rej_count,
                          time.perf_counter() - start_time)

    # ---------------------------------------------------------------- results
    def is_complete(self, num_records: int) -> bool:
        return all(self.part_path(c).exists() for c in range(self.num_chunks(num_records)))

    def _finished_parts(self, suffix: str) -> list[Path]:
        """The part files named ``part-<block><suffix>``, in block order: by the block number, not the name,
        which sorts ``part-100000`` before ``part-99999``."""
        parts = []
        for path in self.out_dir.glob(f"part-*{suffix}"):
            block = path.name[len("part-"):-len(suffix)]
            if block.isdigit():
                parts.append((int(block), path))
        return [path for _, path in sorted(parts)]

    def iter_outputs(self) -> Iterator[dict]:
        """Outputs of every finished block, in input order."""
        for path in self._finished_parts(".jsonl"):
            yield from read_jsonl(path)

    def iter_rejects(self) -> Iterator[dict]:
        for path in self._finished_parts(".rejects.jsonl"):
            yield from read_jsonl(path)

    def merge(self, path: str | Path, num_records: int) -> int:
        """Write all outputs to one JSONL file (atomically); fails if any block is not done yet."""
        missing = [c for c in range(self.num_chunks(num_records)) if not self.part_path(c).exists()]
        if missing:
            raise RuntimeError(f"cannot merge {self.out_dir}: blocks {missing[:10]} not done; rerun the command")
        records = list(self.iter_outputs())
        atomic_write_jsonl(path, records)
        return len(records)


def run_once(path: str | Path, compute: Callable[[], list[dict]]) -> list[dict]:
    """A whole-dataset step, resumable: the records in ``path`` if it exists, else ``compute()``'s records,
    written to ``path`` atomically (a run killed inside ``compute`` recomputes it next time)."""
    path = Path(path)
    if path.exists():
        return read_jsonl(path)
    records = compute()
    if not isinstance(records, list):
        raise TypeError(f"run_once({path}): compute() must return a list of dicts, got {type(records).__name__}")
    for n, record in enumerate(records):
        if not isinstance(record, dict):
            raise TypeError(f"run_once({path}): record {n} is a {type(record).__name__}, not a dict")
    atomic_write_jsonl(path, records)
    return records


def add_backbone_args(parser) -> None:
    """The Ray flags every pipeline takes: ``--ray_address`` and ``--num_workers``."""
    parser.add_argument("--ray_address", default=None,
                        help="Ray cluster to run on ('auto', 'ray://host:port'); default: a local in-process Ray. "
                        "On a cluster --output must be on storage shared by every node")
    parser.add_argument("--num_workers", type=int, default=1,
                        help="Ray workers per stage (tasks, or actors each holding one engine)")


def runner_options(args) -> dict[str, Any]:
    """``StageRunner`` keyword arguments from the flags of ``add_backbone_args``."""
    if args.num_workers < 1:
        raise SystemExit(f"error: --num_workers must be >= 1, got {args.num_workers}")
    return {"ray_address": args.ray_address, "num_workers": args.num_workers}
