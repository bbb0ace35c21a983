"""``bench_text2grad.py --reuse``: an earlier report's runs stand in for runs whose directories are gone, but only
when they ran with this script's budget and the same arm flags (else the report's runs are another benchmark's),
and the committed report still loads with them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.bench_text2grad import ARMS, BUDGET, REPO
from benchmarks.seed_curves import recorded_runs


def write(path: Path, budget: list[str], arms: dict[str, list[str]]) -> Path:
    runs = {"grpo": {"0": {"eval/accuracy": [[0, 0.5], [10, 0.625]]}}}
    path.write_text(json.dumps({"command": "bench --seeds 0", "budget": budget, "arms": arms, "runs": runs}))
    return path


def test_recorded_runs_come_back_keyed_by_integer_seed_with_step_value_points(tmp_path: Path) -> None:
    recorded = recorded_runs(write(tmp_path / "r.json", BUDGET, ARMS), {"budget": BUDGET}, ARMS)
    assert recorded.command == "bench --seeds 0"
    assert recorded.runs == {"grpo": {0: {"eval/accuracy": [(0, 0.5), (10, 0.625)]}}}


def test_a_report_with_another_budget_or_other_arm_flags_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="budget"):
        recorded_runs(write(tmp_path / "budget.json", [*BUDGET, "--steps", "10"], ARMS), {"budget": BUDGET}, ARMS)
    with pytest.raises(ValueError, match="arm 'grpo'"):
        recorded_runs(write(tmp_path / "arms.json", BUDGET, {**ARMS, "grpo": ["--algo", "grpo"]}),
                      {"budget": BUDGET}, ARMS)


def test_the_committed_report_loads_with_the_scripts_flags() -> None:
    recorded = recorded_runs(REPO / "benchmarks" / "results" / "text2grad.json", {"budget": BUDGET}, ARMS)
    assert recorded.unchecked_flags == [] and 0 in recorded.runs["grpo"]


def test_the_critics_reward_and_verdict_are_summarised_and_absent_from_older_runs() -> None:
    from benchmarks.bench_text2grad import DIAGNOSTICS, summarise

    assert DIAGNOSTICS["span_reward"] == "span_rm/token_reward_mean" and DIAGNOSTICS["verdict"] == "span_rm/verdict_mean"
    logged = {"eval/accuracy": [(0, 0.4), (10, 0.5)], "span_rm/verdict_mean": [(1, 0.5), (2, -0.5)]}
    older = {"eval/accuracy": [(0, 0.4), (10, 0.3)]}  # recorded before the critic's verdict was logged
    summary = summarise({"text2grad": {0: logged, 1: older}}, gain=0.05)
    assert summary["text2grad"]["diagnostics"]["verdict"] == {"first_10": 0.0, "last_10": 0.0}
    assert summary["text2grad"]["diagnostics"]["span_reward"] == {"first_10": None, "last_10": None}
