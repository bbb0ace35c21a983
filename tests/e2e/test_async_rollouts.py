"""``--async_rollouts`` end to end on the embedded tiny model with the HF engine (remote workers are covered
by tests/e2e/test_rollout_workers.py): the run works under the deepspeed launcher with the staleness the
pipeline promises, and a run killed with SIGKILL and resumed ends exactly where an uninterrupted async run
does (the checkpoint carries the rollouts already generated for the next steps)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.conftest import deepspeed_launcher, run_entry
from tests.e2e.resume import assert_same_end, kill_and_resume


def _args(model: Path, out: Path, data: Path) -> list[str]:
    return ["--algo", "grpo", "--model", str(model), "--output_dir", str(out), "--task", "dataset",
            "--dataset", str(data), "--test_fraction", "0.2", "--reward", "tests.e2e.rewards:digit_fraction",
            "--steps", "4", "--save_every", "2", "--eval_every", "2", "--pass_k", "2", "--prompts_per_step", "4",
            "--group_size", "4",
            "--micro_batch_size", "8", "--max_new_tokens", "6", "--progress", "false", "--keep_last", "3",
            "--async_rollouts", "true", "--max_staleness", "1", "--report_to", "jsonl"]


def _dataset(tmp_path: Path) -> Path:
    data = tmp_path / "problems.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{a}+{a + 1}", "answer": str(2 * a + 1)}) + "\n"
                            for a in range(10)))
    return data


def test_async_grpo_under_deepspeed_keeps_the_staleness_bound(tiny_arithmetic: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = _args(tiny_arithmetic, out, _dataset(tmp_path)) + ["--max_staleness", "2", "--eval_every", "0"]
    result = run_entry(args, launcher=deepspeed_launcher(1), env={"OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-4000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    # depth 2: steps 1-3 were all launched on the initial weights, step 4 on step 1's
    assert [r["async/staleness"] for r in rows] == [0.0, 1.0, 2.0, 2.0]


def test_killed_async_run_resumes_to_the_uninterrupted_end(tiny_arithmetic: Path, tmp_path: Path) -> None:
    data = _dataset(tmp_path)
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    kill_and_resume(lambda out: _args(tiny_arithmetic, out, data), straight, killed, kill_after=2, final=4)
    rows = assert_same_end(tiny_arithmetic, straight, killed, final=4)
    assert [r.get("async/staleness") for r in rows[1:]] == [0.0, 1.0, 1.0, 1.0]
    saved = json.loads((killed / "checkpoints" / "step_2" / "trainer_state.json").read_text())
    assert [p["step"] for p in saved["async_rollouts"][0]["launched"]] == [3]
