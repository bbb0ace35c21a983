"""``bench_prefix_rl.py --report_only``: the report comes from the runs that finished, each arm over the seeds it
has, names every run still to come under ``missing``, and starts no training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import bench_prefix_rl, seed_curves


def finished_run(path: Path, accuracies: list[float]) -> None:
    path.mkdir(parents=True)
    rows = [{"step": 10 * i, "eval/accuracy": a} for i, a in enumerate(accuracies)]
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (path / "checkpoints" / "step_40").mkdir(parents=True)
    (path / "checkpoints" / "step_40" / "COMPLETE").touch()


def test_report_only_summarises_the_finished_runs_and_lists_the_rest(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    runs = tmp_path / "runs"
    finished_run(runs / "full-rl" / "seed0", [0.5, 0.75])
    finished_run(runs / "full-rl" / "seed1", [0.5, 0.25])
    finished_run(runs / "lora-rl" / "seed1", [0.5, 1.0])
    (runs / "lora-rl" / "seed0").mkdir(parents=True)  # started, not finished: missing, never summarised
    monkeypatch.setattr(bench_prefix_rl, "training_flops",
                        lambda arm: {"flops_per_step": 2.0 if arm == "lora-rl" else 4.0})
    monkeypatch.setattr(bench_prefix_rl, "plot", lambda *a: None)
    monkeypatch.setattr(seed_curves.subprocess, "run", lambda *a, **k: pytest.fail("report_only started a run"))

    assert bench_prefix_rl.main(["--report_only", "--seeds", "0", "1", "--arms", "full-rl", "lora-rl",
                                 "--runs", str(runs), "--out", str(tmp_path / "report")]) == 0

    report = json.loads((tmp_path / "report.json").read_text())
    assert report["missing"] == ["lora-rl seed 0", "clustering seed 0", "clustering seed 1"]
    full, lora = report["summary"]["full-rl"], report["summary"]["lora-rl"]
    assert full["seeds"] == [0, 1] and full["final_mean"] == 0.5
    assert full["final_std"] == pytest.approx(0.25 * 2 ** 0.5)  # sample sd of 0.75 and 0.25
    assert lora["seeds"] == [1] and lora["final_mean"] == 1.0 and lora["final_std"] == 0.0
    assert lora["fraction_of_full-rl_gain"] is None  # full RL's mean gain is 0: no fraction
    assert lora["flops_vs_full_rl"] == 0.5


def curves(accuracies: list[float]) -> dict[str, list[list[float]]]:
    return {"eval/accuracy": [[10 * i, a] for i, a in enumerate(accuracies)]}


def test_reuse_takes_recorded_runs_the_finished_ones_win_and_the_summary_covers_both(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    earlier = tmp_path / "earlier.json"  # made before the flags were recorded, as the committed report
    earlier.write_text(json.dumps({
        "command": "bench --report_only", "clustering": {"with_prefix": 0.25}, "ceiling": {"examples": 128},
        "runs": {"full-rl": {"0": curves([0.5, 0.0]), "1": curves([0.5, 0.5])}, "lora-rl": {"1": curves([0.625, 1.0])}}}))
    runs = tmp_path / "runs"
    finished_run(runs / "full-rl" / "seed0", [0.5, 0.75])  # finished under --runs: wins over the recorded 0.0
    (runs / "lora-rl" / "seed0").mkdir(parents=True)  # neither finished nor recorded: missing
    monkeypatch.setattr(bench_prefix_rl, "training_flops", lambda arm: {"flops_per_step": 4.0})
    monkeypatch.setattr(bench_prefix_rl, "plot", lambda *a: None)
    monkeypatch.setattr(seed_curves.subprocess, "run", lambda *a, **k: pytest.fail("report_only started a run"))

    assert bench_prefix_rl.main(["--report_only", "--no_clustering", "--seeds", "0", "1", "--arms", "full-rl",
                                 "lora-rl", "--runs", str(runs), "--reuse", str(earlier),
                                 "--out", str(tmp_path / "report")]) == 0

    report = json.loads((tmp_path / "report.json").read_text())
    assert report["missing"] == ["lora-rl seed 0"]
    assert report["reused"] == {"file": str(earlier), "command": "bench --report_only",
                                "runs": ["full-rl seed 1", "lora-rl seed 1"],
                                "unchecked_flags": ["common", "extra", "arms"]}
    full, lora = report["summary"]["full-rl"], report["summary"]["lora-rl"]
    assert full["seeds"] == [0, 1] and full["per_seed_final"] == [0.75, 0.5] and full["final_mean"] == 0.625
    assert lora["seeds"] == [1] and lora["final_mean"] == 1.0
    assert lora["fraction_of_full-rl_gain"] == 3.0  # from its own start: (1.0 - 0.625) / (0.625 - 0.5)
    assert report["clustering"] == {"with_prefix": 0.25} and report["ceiling"] == {"examples": 128}
    assert report["carried"] == {"file": str(earlier), "rows": ["ceiling", "clustering"]}
    assert report["common"] == bench_prefix_rl.COMMON and report["arms"] == bench_prefix_rl.ARMS
    assert report["extra"] == []


def test_reuse_refuses_a_report_whose_arm_ran_with_other_flags(tmp_path: Path) -> None:
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({
        "command": "bench", "common": bench_prefix_rl.COMMON, "extra": [],
        "arms": {**bench_prefix_rl.ARMS, "lora-rl": ["--lora_r", "4"]}, "runs": {"lora-rl": {"0": curves([0.5])}}}))
    with pytest.raises(ValueError, match="arm 'lora-rl'"):
        bench_prefix_rl.main(["--report_only", "--no_clustering", "--runs", str(tmp_path / "runs"),
                              "--reuse", str(earlier), "--out", str(tmp_path / "report")])
