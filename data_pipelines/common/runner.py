"""The data backbone: a resumable stage runner on Ray Data (records in, records out, in blocks).

Layout of ``out_dir``::

    run.json                      the stage's identity: its config (every flag that shapes its output and the
                                  identity of every model it calls), the block size and the input's length
    part-00003.jsonl              outputs of block 3 (input records [3*C, 4*C))
    part-00003.meta.json          block 3's input identity (sha256 of its input records) and counts
    part-00003.rejects.jsonl      malformed / invalid / refused records of block 3, each with the reason

Every stage is one Ray Data job (``ray_read`` reads, ``ray_exec`` runs, ``blocks`` does one block): the
workers read the input themselves (JSONL, Parquet, ``datasets`` folders, any pyarrow filesystem), each block
of exactly ``chunk_size`` records goes to one worker, which writes that block's files itself, so the driver
holds neither the dataset nor the outputs: only a one-row summary per block comes back. A plain ``Process``
runs as Ray tasks, an ``ActorStage`` as a pool of actors (``num_gpus`` per actor), so an LLM or embedding
engine is built once per actor, not once per block. ``ray_address=None`` starts (or joins) a local
in-process Ray; ``"auto"`` or ``"ray://host:port"`` runs the same pipeline on a cluster, where the output
folder must be on storage every worker and the driver see.

**Resume is content-addressed.** A block's part file is reused only if ``run.json`` matches this run (config,
models, block size, input length) and the block's input records hash to what its ``meta.json`` recorded.
Any mismatch refuses the run with ``StaleOutput`` naming what changed (``config.tasks: ['task1'] ->
['task2']``, or the block whose input differs), unless ``overwrite=True`` (``--overwrite``), which redoes
the mismatched work; stale work is never reused. ``StageRunner.check_config`` gives the config part of that
refusal before the caller prepares anything costly for the stage (an index, a model). ``run_once`` keeps the
same promise for a whole-dataset step (clustering, dedup, filtering): its identity is its config plus a hash
of its input records.

**Failures.** Data rejects (malformed, invalid, ``Reject`` returned by the stage) are written with their
reason and the block is done. An exception is an infrastructure failure (a server down, a missing package,
out of memory): retried with backoff, then the run fails with ``StageFailed`` naming the block and the
cause; the failed block has no part file, so a rerun retries it (``blocks``).

Kill-and-resume is exact: a block is done exactly when its part file exists (written last, atomically,
after its rejects and meta files); a worker or driver killed mid-block leaves only temporary files, which the
next run deletes, and the next run skips the done blocks, recomputes the rest, and ``merge`` writes a file
byte-identical to an uninterrupted run's, on one worker or many. Workers get blocks in no guaranteed order,
so a stage must not carry state from block to block: state that runs in input order over the whole dataset
is a driver-side step between two stages (EntropyLong's ``--max-reuse`` counts, ``select_contexts``).

Records are keyed by content: every output carries ``_id`` = ``record_id(input record, config hash)``,
stable across runs and machines; ``_index`` (the input position) keeps order. A stage fed by an earlier
stage's outputs may return its own ``_index`` and ``_id`` (those of the root record); they are kept.
Determinism: ``process`` sees whole blocks (in ``batch_size`` batches); a stage whose randomness is seeded
per record or per block (``posttrain.common.seeds.derive_seed(seed, block_index)``) gives the same output whether or not it was resumed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data_pipelines.common.blocks import (  # noqa: F401 - StageFailed and record_id are part of this API
    BlockTask,
    StageFailed,
    StaleOutput,
    part_name,
    record_id,
)
from data_pipelines.common.ray_exec import init_ray, run_blocks
from data_pipelines.common.ray_read import INDEX, indexed_lines
from data_pipelines.common.stage import ActorStage, Process, Reject, stage_workers  # noqa: F401 - Reject: this API
from posttrain.common.files import atomic_write_jsonl, atomic_write_text
from posttrain.common.jsonl import read_jsonl

logger = logging.getLogger(__name__)


def config_hash(config: dict[str, Any]) -> str:
    """The stage's config as 16 hex digits (``run.json`` and ``_id``)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class RunSummary:
    chunks_total: int
    chunks_done_before: int
    chunks_run: int
    records_out: int
    records_rejected: int
    seconds: float
    num_records: int


@dataclass(frozen=True)
class StageOutputs:
    """What a stage gave, read back once it has run: its outputs in input order, and its rejects with the reason."""

    records: list[dict]
    rejects: list[dict]


class StageRunner:
    """Runs ``process`` (a ``Process`` or an ``ActorStage``) over an input block by block on Ray Data,
    resumably (see the module docstring). ``num_workers`` is the number of Ray tasks (plain stage) or actors
    (overrides ``ActorStage.num_actors``) running at once; ``ray_address`` as in ``init_ray``; ``retries``
    and ``retry_backoff_s`` bound the retries of an infrastructure failure; ``overwrite`` redoes stale
    work instead of refusing it; ``stall_timeout_s`` fails the stage when no block finishes for that long
    (0: no limit)."""

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
        retries: int = 3,
        retry_backoff_s: float = 2.0,
        overwrite: bool = False,
        stall_timeout_s: float = 0,
    ) -> None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        if num_workers is not None and num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        if retries < 0 or retry_backoff_s < 0:
            raise ValueError(f"retries and retry_backoff_s must be >= 0, got {retries} and {retry_backoff_s}")
        if stall_timeout_s < 0:
            raise ValueError(f"stall_timeout_s must be >= 0 (0 = no limit), got {stall_timeout_s}")
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
        self.retries = retries
        self.retry_backoff_s = retry_backoff_s
        self.overwrite = overwrite
        self.stall_timeout_s = stall_timeout_s

    # ---------------------------------------------------------------- paths
    def part_path(self, chunk: int) -> Path:
        return self.out_dir / part_name(chunk)

    def rejects_path(self, chunk: int) -> Path:
        return self.out_dir / part_name(chunk, ".rejects.jsonl")

    def num_chunks(self, num_records: int) -> int:
        return -(-num_records // self.chunk_size)

    def check_config(self) -> None:
        """Refuse now, before the caller prepares anything costly for this stage (an index, a model), when
        ``run.json`` holds a run of another config: ``StaleOutput`` naming what changed, as ``run`` would
        raise it after that work. Nothing is refused with ``overwrite`` (``run`` then redoes the stage)."""
        path = self.out_dir / "run.json"
        if self.overwrite or not path.exists():
            return
        old = json.loads(path.read_text())
        changed = identity_changes({"config": old.get("config")}, {"config": self.config})
        if changed:
            raise self._stale(changed)

    def _stale(self, changed: list[str]) -> StaleOutput:
        return StaleOutput(f"{self.out_dir} holds a {self.desc} run made with other settings "
                           f"({'; '.join(changed) or 'config hash'}); rerun with --overwrite to redo it, "
                           "or use another --output folder")

    def _check_identity(self, input_name: str, num_records: int) -> None:
        """Compare ``run.json`` with this run (config, block size, input length): write it on a first run;
        on a mismatch raise ``StaleOutput`` naming what changed, or with ``overwrite`` clear the folder."""
        info = {"input": input_name, "num_records": num_records, "chunk_size": self.chunk_size,
                "config_hash": self.config_hash, "config": self.config}
        path = self.out_dir / "run.json"
        if path.exists():
            old = json.loads(path.read_text())
            changed = identity_changes({k: old.get(k) for k in ("num_records", "chunk_size", "config")},
                                       {k: info[k] for k in ("num_records", "chunk_size", "config")})
            if not changed and old.get("config_hash") == self.config_hash:
                return
            if not self.overwrite:
                raise self._stale(changed)
            logger.warning("%s: redoing %s (%s)", self.desc, self.out_dir, "; ".join(changed))
            for stale in self.out_dir.glob("part-*"):
                stale.unlink()
        atomic_write_text(path, json.dumps(info, indent=2, default=str) + "\n")

    def _remove_stale_temps(self) -> None:
        """Delete temporary files a killed run left behind (atomic writes that never reached their rename)."""
        for stale in self.out_dir.glob(".part-*.tmp"):
            stale.unlink(missing_ok=True)

    # ---------------------------------------------------------------- running
    def run(self, source: str | Path | list[dict], *, limit: int = 0) -> RunSummary:
        """Run the stage over ``source`` (a path or URI the workers read, or records in memory; ``limit``:
        only its first ``limit`` records, 0 = all)."""
        if self.process is None:
            raise ValueError(f"{self.desc}: this runner has no process (it only reads results back)")
        start_time = time.perf_counter()
        init_ray(self.ray_address, stage_workers(self.process, self.num_workers))
        ds, num_records = indexed_lines(source)
        if limit and limit < num_records:
            from ray.data.expressions import col

            ds, num_records = ds.filter(expr=col(INDEX) < limit), limit
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._check_identity("memory" if isinstance(source, list) else str(source), num_records)
        self._remove_stale_temps()
        total = self.num_chunks(num_records)
        bar = None
        if self.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=total, desc=self.desc, unit="block")
        task = BlockTask(str(self.out_dir.resolve()), num_records, self.chunk_size, self.batch_size, self.validate,
                         self.config_hash, self.desc, self.retries, self.retry_backoff_s, self.overwrite)
        counts = {"reused": 0, "done": 0, "outputs": 0, "rejects": 0}
        try:
            for row in (run_blocks(ds, task, self.process, num_workers=self.num_workers,
                                             stall_timeout_s=self.stall_timeout_s) if total else ()):
                if row["status"] == "input_changed":
                    raise StaleOutput(f"{self.out_dir}: {row['detail']}; rerun with --overwrite to redo it, "
                                      "or use another --output folder")
                if row["status"] == "failed":
                    raise StageFailed(f"{self.desc}: block {row['block']} failed after {self.retries + 1} "
                                      f"attempts: {row['detail']}. Finished blocks are kept; rerun the command "
                                      "to retry the failed ones")
                counts[row["status"]] += 1
                counts["outputs"] += row["outputs"]
                counts["rejects"] += row["rejects"]
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(out=counts["outputs"], rejects=counts["rejects"])
        finally:
            if bar is not None:
                bar.close()
        return RunSummary(total, counts["reused"], counts["done"], counts["outputs"], counts["rejects"],
                          time.perf_counter() - start_time, num_records)

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
        """Write all outputs to one JSONL file (atomically, streamed part by part: the outputs are never held
        in memory together); the number of records. Fails if any block is not done yet."""
        missing = [c for c in range(self.num_chunks(num_records)) if not self.part_path(c).exists()]
        if missing:
            raise RuntimeError(f"cannot merge {self.out_dir}: blocks {missing[:10]} not done; rerun the command")
        count = 0

        def counted() -> Iterator[dict]:
            nonlocal count
            for record in self.iter_outputs():
                count += 1
                yield record
        atomic_write_jsonl(path, counted())
        return count


def records_digest(records: Iterable[dict]) -> str:
    """sha256 of records (canonical JSON, in order): the input identity of a whole-dataset step."""
    digest = hashlib.sha256()
    for record in records:
        digest.update(json.dumps(record, sort_keys=True, ensure_ascii=False, default=str).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def identity_changes(old: dict, new: dict, prefix: str = "") -> list[str]:
    """What differs between two identities, one ``key: old -> new`` line per changed leaf."""
    changes = []
    for key in sorted(set(old) | set(new), key=str):
        name, a, b = f"{prefix}{key}", old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            changes += identity_changes(a, b, f"{name}.")
        elif json.dumps(a, sort_keys=True, default=str) != json.dumps(b, sort_keys=True, default=str):
            changes.append(f"{name}: {a!r} -> {b!r}")
    return changes


def run_once(path: str | Path, compute: Callable[[], list[dict]], *, config: dict[str, Any],
             inputs: Iterable[dict] = (), overwrite: bool = False) -> list[dict]:
    """A whole-dataset step, resumable and content-addressed: the records in ``path`` if they were made from
    the same ``config`` (every flag and model identity that shapes them) and ``inputs`` (hashed), else
    ``compute()``'s records, written to ``path`` atomically after their identity (``<stem>.run.json``).
    Finished records made with another identity raise ``StaleOutput`` naming what changed, unless
    ``overwrite``. A run killed inside ``compute`` recomputes it next time. ``run_step`` is the same for a
    step that has more to say than its records."""
    return run_step(path, lambda: StepOutput(compute()), config=config, inputs=inputs, overwrite=overwrite).records


@dataclass(frozen=True)
class StepOutput:
    """What a whole-dataset step (``run_step``) returns: its records, and its companions, each a file beside
    the records (``name`` ending ``.jsonl``: a list of records; ``.json``: one object): what the step found
    on the way (a removed count, the records it dropped and why) that a resumed run reports as a fresh one."""

    records: list[dict]
    companions: dict[str, list[dict] | dict] = field(default_factory=dict)


def run_step(path: str | Path, compute: Callable[[], StepOutput], *, config: dict[str, Any],
             inputs: Iterable[dict] = (), companions: tuple[str, ...] = (), overwrite: bool = False) -> StepOutput:
    """``run_once`` for a step with ``companions`` (the file names of its ``StepOutput.companions``): the step
    is done when its records and every companion exist under its identity; each is written atomically, the
    companions before the records, so a run killed between them recomputes the step."""
    path = Path(path)
    identity_path = path.with_name(f"{path.stem}.run.json")
    companion_paths = {name: path.with_name(name) for name in companions}
    identity = {"config": config, "inputs_sha256": records_digest(inputs)}
    identity = json.loads(json.dumps(identity, default=str))  # as it reads back from the file
    if path.exists():
        old = json.loads(identity_path.read_text()) if identity_path.exists() else {}
        changed = identity_changes(old, identity)
        if not changed and all(p.exists() for p in companion_paths.values()):
            return StepOutput(read_jsonl(path), {name: read_jsonl(p) if name.endswith(".jsonl")
                                                 else json.loads(p.read_text()) for name, p in companion_paths.items()})
        if changed and not overwrite:
            raise StaleOutput(f"{path} was made with other settings ({'; '.join(changed)}); rerun with "
                              "--overwrite to redo it, or use another --output folder")
        logger.warning("redoing %s (%s)", path, "; ".join(changed) or "a companion file is missing")
        path.unlink()
    output = compute()
    if not isinstance(output.records, list):
        raise TypeError(f"run_step({path}): compute() must return a list of dicts, "
                        f"got {type(output.records).__name__}")
    for n, record in enumerate(output.records):
        if not isinstance(record, dict):
            raise TypeError(f"run_step({path}): record {n} is a {type(record).__name__}, not a dict")
    if sorted(output.companions) != sorted(companions):
        raise ValueError(f"run_step({path}): the step returned companions {sorted(output.companions)}, "
                         f"declared {sorted(companions)}")
    for name, content in output.companions.items():
        if name.endswith(".jsonl"):
            atomic_write_jsonl(companion_paths[name], content)
        else:
            atomic_write_text(companion_paths[name], json.dumps(content) + "\n")
    atomic_write_text(identity_path, json.dumps(identity, indent=2) + "\n")
    atomic_write_jsonl(path, output.records)
    return output
