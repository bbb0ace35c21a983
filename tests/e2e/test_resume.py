"""A run killed with SIGKILL and resumed with ``--resume auto`` ends with the same weights and
metrics as an uninterrupted run, including when the checkpoint falls exactly on an epoch boundary, and in bf16
(``--precision bf16``: the resumed run must step from the saved fp32 master weights, not their bf16 rounding)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.resume import assert_same_end, kill_and_resume


def _args(model: Path, out: Path, data: Path) -> list[str]:
    return ["--algo", "grpo", "--model", str(model), "--output_dir", str(out), "--task", "dataset",
            "--dataset", str(data), "--test_fraction", "0.2", "--reward", "tests.e2e.rewards:digit_fraction",
            "--steps", "4", "--save_every", "2", "--eval_every", "2", "--prompts_per_step", "4", "--group_size", "4",
            "--micro_batch_size", "8", "--mu", "2", "--kl_coef", "0.05", "--max_new_tokens", "6", "--pass_k", "2",
            "--progress", "false", "--keep_last", "3"]


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_sigkill_and_resume_equals_uninterrupted(tiny_arithmetic: Path, tmp_path: Path, precision: str) -> None:
    data = tmp_path / "problems.jsonl"
    # 10 rows, 2 held out: 8 training prompts = 2 steps of 4, so the step-2 checkpoint is an epoch boundary.
    data.write_text("".join(json.dumps({"prompt": f"{a}+{a + 1}", "answer": str(2 * a + 1)}) + "\n"
                            for a in range(10)))
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    kill_and_resume(lambda out: [*_args(tiny_arithmetic, out, data), "--precision", precision], straight, killed,
                    kill_after=2, final=4)
    assert_same_end(tiny_arithmetic, straight, killed, final=4)
