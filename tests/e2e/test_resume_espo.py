"""``--algo espo``: a run killed with SIGKILL after its step-2 checkpoint and resumed with ``--resume auto``
ends with the same weights and metrics as an uninterrupted run. ESPO draws its ELBO masks from the
algorithm's generator and its rollouts from per-step seeds, so the resumed run must restore the generator
(checkpointed per rank) and the sampler position (not on an epoch boundary here: sudoku has thousands of
training puzzles) to reproduce the uninterrupted run bit for bit. The runs are also CI's one-rank ESPO run
(``test_diffusion_train.py`` runs the other diffusion algorithms and ESPO on two ranks): importance ratios
near 1 on the first step, finite losses, an evaluation and a diffusion checkpoint at the end.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.e2e.resume import assert_same_end, kill_and_resume


def _args(model: Path, out: Path) -> list[str]:
    return ["--algo", "espo", "--model", str(model), "--output_dir", str(out), "--task", "sudoku",
            "--reward", "tests.e2e.rewards:digit_fraction", "--steps", "4", "--save_every", "2", "--eval_every", "2",
            "--eval_examples", "8", "--prompts_per_step", "2", "--group_size", "4", "--micro_batch_size", "4",
            "--mu", "2", "--max_new_tokens", "20", "--block_length", "10", "--pass_k", "2", "--progress", "false",
            "--keep_last", "3", "--report_to", "jsonl"]


def test_espo_sigkill_and_resume_equals_uninterrupted(tiny_diffusion: Path, tmp_path: Path) -> None:
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    kill_and_resume(lambda out: _args(tiny_diffusion, out), straight, killed, kill_after=2, final=4)
    rows = assert_same_end(tiny_diffusion, straight, killed, final=4)
    train = [r for r in rows if r["step"] > 0]
    assert train[0]["train/ratio_mean"] == pytest.approx(1.0, abs=0.5)
    assert all(torch.isfinite(torch.tensor(r["train/loss"])) for r in train)
    assert "eval/accuracy" in rows[-1]
    config = json.loads((killed / "checkpoints" / "step_4" / "hf" / "config.json").read_text())
    assert config.get("posttrain_kind") == "diffusion" and config.get("is_causal") is False
