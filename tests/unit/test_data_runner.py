"""Stage runner: chunks, rejects, sharding, config guard, and kill -9 / restart equivalence."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from data_pipelines.common.io import JsonlSource, open_source
from data_pipelines.common.runner import Reject, StageRunner, parse_shard

REPO = Path(__file__).resolve().parents[2]


def _write_input(path: Path, n: int, bad: tuple[int, ...] = ()) -> None:
    lines = []
    for i in range(n):
        lines.append("{not json" if i in bad else json.dumps({"id": i, "x": i * 3}))
    path.write_text("\n".join(lines) + "\n")


def _square(batch):
    return [Reject("x is 13") if r["x"] == 13 * 3 else {"id": r["id"], "y": r["x"] ** 2} for r in batch]


def test_parse_shard():
    assert parse_shard(None) == (0, 1) and parse_shard("2/4") == (2, 4)
    for bad in ("4/4", "a/b", "1"):
        with pytest.raises(ValueError):
            parse_shard(bad)


def test_runner_outputs_rejects_and_resume(tmp_path):
    src = tmp_path / "in.jsonl"
    _write_input(src, 50, bad=(7,))
    runner = StageRunner(tmp_path / "out", _square, chunk_size=8, progress=False,
                         validate=lambda r: "no id" if "id" not in r else None)
    s = runner.run(src)
    assert (s.chunks_total, s.chunks_run, s.records_out, s.records_rejected) == (7, 7, 48, 2)
    rejects = list(runner.iter_rejects())
    assert [r["_index"] for r in rejects] == [7, 13]
    assert "invalid JSON" in rejects[0]["reason"] and rejects[1]["reason"] == "x is 13"
    outs = list(runner.iter_outputs())
    assert [o["_index"] for o in outs] == [i for i in range(50) if i not in (7, 13)]
    again = runner.run(src)  # everything done: nothing recomputed
    assert again.chunks_run == 0 and again.chunks_done_before == 7
    assert runner.merge(tmp_path / "merged.jsonl", 50) == 48
    with pytest.raises(ValueError, match="chunk_size"):
        StageRunner(tmp_path / "out", _square, chunk_size=4, progress=False).run(src)


def test_batch_failure_isolates_bad_record(tmp_path):
    def fragile(batch):
        if any(r["x"] == 9 for r in batch):
            raise KeyError("boom")
        return [{"ok": True} for _ in batch]

    runner = StageRunner(tmp_path / "o", fragile, chunk_size=10, progress=False)
    runner.run([{"x": i} for i in range(10)])
    assert len(list(runner.iter_outputs())) == 9
    assert [r["_index"] for r in runner.iter_rejects()] == [9] and "boom" in next(runner.iter_rejects())["reason"]


def test_shards_split_the_work(tmp_path):
    records = [{"id": i, "x": i} for i in range(30)]
    parts = []
    for i in range(3):
        r = StageRunner(tmp_path / "o", _square, chunk_size=4, shard=(i, 3), progress=False)
        parts.append(r.run(records).chunks_run)
        if i < 2:
            assert not r.is_complete(30)
    assert parts == [3, 3, 2] and r.is_complete(30)
    merged = tmp_path / "m.jsonl"
    r.merge(merged, 30)
    assert [json.loads(line)["_index"] for line in merged.read_text().splitlines()] == list(range(30))


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
def slow(batch):
    time.sleep(float(sys.argv[3]))
    return [{"id": r["id"], "y": r["x"] * 2 + 1} for r in batch]
StageRunner(sys.argv[2], slow, chunk_size=5, progress=False).run(sys.argv[1])
"""


def test_kill_and_restart_equals_uninterrupted(tmp_path):
    src = tmp_path / "in.jsonl"
    _write_input(src, 120)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-c", _WORKER, str(src)]
    subprocess.run(cmd + [str(tmp_path / "ref"), "0"], check=True, env=env)
    killed = tmp_path / "killed"
    proc = subprocess.Popen(cmd + [str(killed), "0.15"], env=env)
    deadline = time.time() + 60
    while time.time() < deadline and len(list(killed.glob("part-*[0-9].jsonl"))) < 5:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_at_kill = len(list(killed.glob("part-*[0-9].jsonl")))
    assert 5 <= done_at_kill < 24, done_at_kill  # really interrupted mid-way
    subprocess.run(cmd + [str(killed), "0"], check=True, env=env)
    ref = StageRunner(tmp_path / "ref", None, chunk_size=5, progress=False)
    res = StageRunner(killed, None, chunk_size=5, progress=False)
    ref_out, res_out = list(ref.iter_outputs()), list(res.iter_outputs())
    assert res_out == ref_out and len(res_out) == 120
    assert len({o["_index"] for o in res_out}) == 120
    assert not list(killed.glob(".*.tmp"))  # no stray temporary files visible as parts
