"""Stage runner on Ray Data: blocks, rejects, content-hash ids, config guard, ActorStage (one engine per
actor), run_once, input formats, and kill -9 / restart equivalence of a driver joined to the session's Ray."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from data_pipelines.common.io import JsonlSource, open_source
from data_pipelines.common.runner import (
    ActorStage,
    Reject,
    StageRunner,
    StaleOutput,
    StepOutput,
    record_id,
    run_once,
    run_step,
)
from tests.unit.ray_session import (
    kill_when_parts,
    ray_session_fixture,  # noqa: F401 - the `ray_session` fixture
)

pytestmark = pytest.mark.heavy  # starts Ray

REPO = Path(__file__).resolve().parents[2]


def _write_input(path: Path, n: int, bad: tuple[int, ...] = ()) -> None:
    lines = []
    for i in range(n):
        lines.append("{not json" if i in bad else json.dumps({"id": i, "x": i * 3}))
    path.write_text("\n".join(lines) + "\n")


def _square(batch):
    return [Reject("x is 13") if r["x"] == 13 * 3 else {"id": r["id"], "y": r["x"] ** 2} for r in batch]


def test_runner_outputs_rejects_and_resume(tmp_path, ray_session):
    src = tmp_path / "in.jsonl"
    _write_input(src, 50, bad=(7,))
    runner = StageRunner(tmp_path / "out", _square, chunk_size=8, progress=False, num_workers=2,
                         validate=lambda r: "no id" if "id" not in r else None)
    s = runner.run(src)
    assert (s.chunks_total, s.chunks_run, s.records_out, s.records_rejected) == (7, 7, 48, 2)
    rejects = list(runner.iter_rejects())
    assert [r["_index"] for r in rejects] == [7, 13]
    assert "invalid JSON" in rejects[0]["reason"] and rejects[1]["reason"] == "x is 13"
    outs = list(runner.iter_outputs())
    assert [o["_index"] for o in outs] == [i for i in range(50) if i not in (7, 13)]
    assert outs[0] == {"_index": 0, "_id": record_id({"id": 0, "x": 0}, runner.config_hash), "id": 0, "y": 0}
    again = runner.run(src)  # everything done: nothing recomputed
    assert again.chunks_run == 0 and again.chunks_done_before == 7
    assert runner.merge(tmp_path / "merged.jsonl", 50) == 48
    with pytest.raises(ValueError, match="chunk_size"):
        StageRunner(tmp_path / "out", _square, chunk_size=4, progress=False).run(src)
    with pytest.raises(StaleOutput, match="config.k: None -> 1"):
        StageRunner(tmp_path / "out", _square, chunk_size=8, config={"k": 1}, progress=False).run(src)
    # the same refusal before any run (a pipeline checks it before costly preparation); none with --overwrite
    with pytest.raises(StaleOutput, match="config.k: None -> 1"):
        StageRunner(tmp_path / "out", _square, chunk_size=8, config={"k": 1}, progress=False).check_config()
    StageRunner(tmp_path / "out", _square, chunk_size=8, progress=False).check_config()
    StageRunner(tmp_path / "out", _square, config={"k": 1}, progress=False, overwrite=True).check_config()


def _slow_copy(batch):
    time.sleep(3)
    return [dict(r) for r in batch]


def test_a_slow_block_is_not_a_stall_unless_the_limit_says_so(tmp_path, ray_session, monkeypatch):
    """Ray Data's own no-progress guard (here 1 s, by default 30 min) would fail a block slower than it;
    the runner turns it off, and ``stall_timeout_s`` sets one."""
    from ray.data import DataContext
    from ray.data.exceptions import ExecutionTimeoutError

    monkeypatch.setattr(DataContext.get_current(), "execution_no_progress_timeout_s", 1.0)
    records = [{"id": 0}, {"id": 1}]
    slow = StageRunner(tmp_path / "off", _slow_copy, chunk_size=2, progress=False)
    assert slow.run(records).records_out == 2
    limited = StageRunner(tmp_path / "on", _slow_copy, chunk_size=2, progress=False, stall_timeout_s=1.0)
    with pytest.raises(ExecutionTimeoutError, match="no progress"):
        limited.run(records)
    with pytest.raises(ValueError, match="stall_timeout_s"):
        StageRunner(tmp_path / "bad", _slow_copy, stall_timeout_s=-1)


def test_ids_are_content_hashes_of_input_and_config(tmp_path, ray_session):
    records = [{"id": 0, "x": 1}, {"id": 1, "x": 2}, {"id": 0, "x": 1}]
    a = list(_run(tmp_path / "a", records, {"k": 1}))
    b = list(_run(tmp_path / "b", records, {"k": 1}))
    c = list(_run(tmp_path / "c", records, {"k": 2}))
    assert [o["_id"] for o in a] == [o["_id"] for o in b]  # stable across runs
    assert a[0]["_id"] == a[2]["_id"] != a[1]["_id"]  # same content, same key; other content, other key
    assert {o["_id"] for o in a}.isdisjoint(o["_id"] for o in c)  # other config, other keys
    assert record_id({"x": 1, "id": 0}, "h") == record_id({"id": 0, "x": 1}, "h")  # key order does not matter


def _run(out, records, config):
    runner = StageRunner(out, _square, chunk_size=2, config=config, progress=False)
    runner.run(records)
    return runner.iter_outputs()


class _CountedStage:
    """A factory that records every call in a file (the calls happen inside Ray actors)."""

    def __init__(self, log: Path) -> None:
        self.log = log

    def __call__(self):
        with open(self.log, "a") as handle:
            handle.write(f"{os.getpid()}\n")
        return _square


def test_actor_stage_builds_the_engine_once_per_actor(tmp_path, ray_session):
    log = tmp_path / "factory_calls.txt"
    runner = StageRunner(tmp_path / "o", ActorStage(_CountedStage(log), num_actors=2), chunk_size=3,
                         progress=False)
    summary = runner.run([{"id": i, "x": i} for i in range(24)])
    assert summary.chunks_run == 8 and summary.records_out == 24
    calls = log.read_text().split()
    # one build per actor process, never one per block: at most the pool's two for eight blocks (on a loaded
    # machine Ray may finish every block before the second actor has started)
    assert 1 <= len(calls) <= 2 and len(set(calls)) == len(calls), calls
    assert [o["_index"] for o in runner.iter_outputs()] == list(range(24))
    with pytest.raises(ValueError, match="num_actors"):
        ActorStage(_CountedStage(log), num_actors=0)


def test_run_once_computes_once_then_reads_back(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return [{"cluster": 0, "ids": [1, 2]}, {"cluster": 1, "ids": None}]

    first = run_once(tmp_path / "clusters.jsonl", compute, config={"k": 2})
    second = run_once(tmp_path / "clusters.jsonl", compute, config={"k": 2})
    assert first == second == [{"cluster": 0, "ids": [1, 2]}, {"cluster": 1, "ids": None}] and calls == [1]
    with pytest.raises(TypeError, match="record 1 is a int"):
        run_once(tmp_path / "bad.jsonl", lambda: [{"a": 1}, 5], config={})
    assert not (tmp_path / "bad.jsonl").exists()


def test_run_step_returns_its_companions_fresh_and_resumed(tmp_path):
    """A step's companions come back as values, the same on a fresh run and on a resumed one (read from their
    files then); a step missing a companion file is redone, and a step returning other companions than it
    declared is an error naming both."""
    calls = []

    def compute():
        calls.append(1)
        return StepOutput([{"id": 1}], {"s.dropped.jsonl": [{"id": 2, "reason": "copy"}], "s.info.json": {"n": 1}})

    names = ("s.dropped.jsonl", "s.info.json")
    first = run_step(tmp_path / "s.jsonl", compute, config={"k": 2}, companions=names)
    second = run_step(tmp_path / "s.jsonl", compute, config={"k": 2}, companions=names)
    assert first == second and calls == [1]
    assert second.companions == {"s.dropped.jsonl": [{"id": 2, "reason": "copy"}], "s.info.json": {"n": 1}}
    (tmp_path / "s.info.json").unlink()
    assert run_step(tmp_path / "s.jsonl", compute, config={"k": 2}, companions=names) == first and calls == [1, 1]
    with pytest.raises(ValueError, match=r"returned companions \['s.dropped.jsonl', 's.info.json'\], declared \[\]"):
        run_step(tmp_path / "other.jsonl", compute, config={})
    assert not (tmp_path / "other.jsonl").exists()


def test_open_source_formats(tmp_path):
    import datasets

    ds = datasets.Dataset.from_list([{"text": "a"}, {"text": "b"}])
    ds.to_parquet(str(tmp_path / "d.parquet"))
    ds.save_to_disk(str(tmp_path / "disk"))
    assert open_source(tmp_path / "d.parquet").chunk(0, 5) == [{"text": "a"}, {"text": "b"}]
    assert open_source(tmp_path / "disk").chunk(1, 2) == [{"text": "b"}]
    (tmp_path / "e.jsonl").write_text('{"a": 1}\n\n[1]\n')
    items = JsonlSource(tmp_path / "e.jsonl").chunk(0, 10)
    assert items[0] == {"a": 1} and "not a JSON object" in items[1].reason


_WORKER = """
import sys, time
from data_pipelines.common.runner import StageRunner
delay = float(sys.argv[3])  # read here: the stage runs in Ray workers, whose sys.argv is their own
def slow(batch):
    time.sleep(delay)
    return [{"id": r["id"], "y": r["x"] * 2 + 1} for r in batch]
StageRunner(sys.argv[2], slow, chunk_size=5, progress=False, ray_address=sys.argv[4]).run(sys.argv[1])
"""


def test_kill_and_restart_equals_uninterrupted(tmp_path, ray_session):
    src = tmp_path / "in.jsonl"
    _write_input(src, 120)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-c", _WORKER, str(src)]
    killed = tmp_path / "killed"
    done_at_kill = kill_when_parts(cmd + [str(killed), "0.15", ray_session], killed, 5, env)
    assert 5 <= done_at_kill < 24, done_at_kill  # really interrupted mid-way
    subprocess.run(cmd + [str(killed), "0", ray_session], check=True, env=env)
    res = StageRunner(killed, None, chunk_size=5)
    res.merge(tmp_path / "res.jsonl", 120)
    # the uninterrupted run's file, written out by hand: every record once, in input order
    expected = "".join(json.dumps({"_index": i, "_id": record_id({"id": i, "x": i * 3}, res.config_hash),
                                   "id": i, "y": i * 6 + 1}) + "\n" for i in range(120))
    assert (tmp_path / "res.jsonl").read_text() == expected
    assert not list(res.iter_rejects())
    assert not list(killed.glob(".*.tmp"))  # no stray temporary files visible as parts


def test_outputs_come_in_block_order_past_99999_blocks(tmp_path: Path) -> None:
    """Part names pad block numbers to five digits; block 100000 sorts before 99999 by name, not by number."""
    runner = StageRunner(tmp_path / "out", _square, chunk_size=1, progress=False)
    runner.out_dir.mkdir()
    for block in (100_000, 99_999, 7):
        runner.part_path(block).write_text(json.dumps({"block": block}) + "\n")
        runner.rejects_path(block).write_text(json.dumps({"block": block, "reason": "r"}) + "\n")
    assert [r["block"] for r in runner.iter_outputs()] == [7, 99_999, 100_000]
    assert [r["block"] for r in runner.iter_rejects()] == [7, 99_999, 100_000]


def test_workers_read_every_format_and_one_or_two_workers_give_the_same_bytes(tmp_path, ray_session):
    """The workers read JSONL (gzip too), a Parquet folder and a save_to_disk folder themselves; the numbering
    (``_index``) runs across files in name order, and 1 and 2 workers write byte-identical parts."""
    import gzip

    import datasets

    rows = [{"id": i, "x": i * 3} for i in range(23)]
    ds = datasets.Dataset.from_list(rows)
    (tmp_path / "pq").mkdir()
    ds.select(range(10)).to_parquet(str(tmp_path / "pq" / "a.parquet"))
    ds.select(range(10, 23)).to_parquet(str(tmp_path / "pq" / "b.parquet"))
    ds.save_to_disk(str(tmp_path / "disk"))
    with gzip.open(tmp_path / "in.jsonl.gz", "wt") as handle:
        handle.write("".join(json.dumps(r) + "\n" for r in rows))
    merged = {}
    for name, workers in (("pq", 1), ("pq", 2), ("disk", 2), ("in.jsonl.gz", 2)):
        runner = StageRunner(tmp_path / f"out-{name}-{workers}", _square, chunk_size=4, progress=False,
                             num_workers=workers)
        assert runner.run(tmp_path / name).records_out == 22  # x == 39 is rejected
        runner.merge(tmp_path / f"{name}-{workers}.jsonl", 23)
        merged[name, workers] = (tmp_path / f"{name}-{workers}.jsonl").read_bytes()
    assert len(set(merged.values())) == 1, "every format and worker count gives the same file"
    assert [json.loads(line)["_index"] for line in merged["pq", 1].splitlines()] == [i for i in range(23) if i != 13]
