"""Test-side harness of ``vllm_sync_check.py``: launch it (plain python or ``deepspeed`` on N ranks) for a
few GRPO steps and assert that every rank's rollout engine ends on the trainer's weights."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from tests.e2e.conftest import REPO

SYNC_CHECK = REPO / "tests" / "e2e" / "vllm_sync_check.py"
SHORT = ["--algo", "grpo", "--reward", "tests.e2e.rewards:digit_fraction", "--prompts_per_step", "4", "--group_size",
         "4", "--micro_batch_size", "8", "--max_new_tokens", "8", "--progress", "false", "--report_to", "jsonl"]
"""A short GRPO run (add ``--rollout``, ``--model`` and ``--output_dir``)."""


def run_sync_check(model: Path, out: Path, launcher: list[str], extra: list[str]) -> list[dict]:
    """Train 2 steps through ``vllm_sync_check.py`` (the real Trainer) and return each rank's comparison."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    cmd = [*launcher, str(SYNC_CHECK), *SHORT, "--model", str(model), "--output_dir", str(out), "--steps", "2",
           "--eval_every", "0", "--lr", "3e-3", *extra]
    result = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=1200, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return [json.loads(p.read_text()) for p in sorted(out.glob("sync_check_rank*.json"))]


def assert_synced(checks: list[dict], model: Path, out: Path, ranks: int) -> None:
    """Every rank's engine holds version 2 and decodes greedily as the trainer's module does, which trained."""
    assert len(checks) == ranks
    for check in checks:
        assert check["weight_version"] == check["rollout_version"] == 2  # the trainer step it holds
        assert check["engine"] == check["trainer"]
    before = load_file(model / "model.safetensors")
    after = load_file(out / "checkpoints" / "step_2" / "hf" / "model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in before if k in after)  # it did train
