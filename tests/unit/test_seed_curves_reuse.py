"""``seed_curves.recorded_runs`` and ``RecordedRuns.take``, the one ``--reuse`` of the learning benchmarks: an
earlier report's runs come back keyed by integer seed; a report whose recorded flags differ from the script's is
refused naming the file and the key or arm; a report without flag records is refused unless the script allows
it (then listed as unchecked); a run finished under ``--runs`` wins over a recorded one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.seed_curves import RecordedRuns, recorded_runs

COMMON = ["--steps", "40"]
ARMS = {"a": ["--lr", "1e-3"], "b": ["--lr", "1e-4"]}
RUNS = {"a": {"0": {"eval/accuracy": [[0, 0.25], [10, 0.5]]}, "1": {"eval/accuracy": [[0, 0.25], [10, 0.75]]}}}


def write(path: Path, **records: object) -> Path:
    path.write_text(json.dumps({"command": "bench --seeds 0 1", **records, "runs": RUNS}))
    return path


def test_a_report_with_the_same_flags_gives_its_runs_by_integer_seed(tmp_path: Path) -> None:
    recorded = recorded_runs(write(tmp_path / "r.json", common=COMMON, arms=ARMS), {"common": COMMON}, ARMS)
    assert recorded.command == "bench --seeds 0 1" and recorded.unchecked_flags == []
    assert recorded.runs == {"a": {0: {"eval/accuracy": [(0, 0.25), (10, 0.5)]},
                                   1: {"eval/accuracy": [(0, 0.25), (10, 0.75)]}}}


def test_other_flags_are_refused_naming_the_file_and_the_key_or_arm(tmp_path: Path) -> None:
    path = write(tmp_path / "arm.json", common=COMMON, arms={**ARMS, "a": ["--lr", "3e-3"]})
    with pytest.raises(ValueError, match=r"arm\.json: arm 'a' ran with flags"):
        recorded_runs(path, {"common": COMMON}, ARMS)
    path = write(tmp_path / "common.json", common=["--steps", "10"], arms=ARMS)
    with pytest.raises(ValueError, match=r"common\.json: common"):
        recorded_runs(path, {"common": COMMON}, ARMS)
    # an arm the report did not run may differ: only the recorded runs' flags matter
    recorded_runs(write(tmp_path / "b.json", common=COMMON, arms={"a": ARMS["a"]}), {"common": COMMON}, ARMS)


def test_a_report_without_flag_records_is_refused_unless_allowed_then_listed(tmp_path: Path) -> None:
    path = write(tmp_path / "old.json")
    with pytest.raises(ValueError, match=r"old\.json: the report records no 'common'"):
        recorded_runs(path, {"common": COMMON}, ARMS)
    recorded = recorded_runs(path, {"common": COMMON}, ARMS, unrecorded_ok=True)
    assert recorded.unchecked_flags == ["common", "arms"] and set(recorded.runs["a"]) == {0, 1}


def test_a_finished_run_wins_then_a_recorded_one_else_none_to_train(tmp_path: Path) -> None:
    recorded = recorded_runs(write(tmp_path / "r.json", common=COMMON, arms=ARMS), {"common": COMMON}, ARMS)
    done = tmp_path / "runs" / "a" / "seed0"
    (done / "checkpoints" / "step_40").mkdir(parents=True)
    (done / "checkpoints" / "step_40" / "COMPLETE").touch()
    (done / "metrics.jsonl").write_text("")
    assert recorded.take("a", 0, done) is None  # finished under --runs: read from there
    assert recorded.take("a", 1, tmp_path / "runs" / "a" / "seed1") == {"eval/accuracy": [(0, 0.25), (10, 0.75)]}
    assert recorded.take("b", 0, tmp_path / "runs" / "b" / "seed0") is None  # not recorded: to train
    assert recorded.reused == ["a seed 1"]
    assert recorded.report() == {"file": str(tmp_path / "r.json"), "command": "bench --seeds 0 1",
                                 "runs": ["a seed 1"]}
    assert RecordedRuns().report() is None  # nothing reused: no record
