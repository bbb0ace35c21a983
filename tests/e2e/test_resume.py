"""A run killed with SIGKILL and resumed with ``--resume auto`` ends with the same weights and
metrics as an uninterrupted run, including when the checkpoint falls exactly on an epoch boundary."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

from tests.e2e.conftest import REPO

VOLATILE = ("time/", "perf/")


def _args(model: Path, out: Path, data: Path) -> list[str]:
    return ["--algo", "grpo", "--model", str(model), "--output_dir", str(out), "--task", "dataset",
            "--dataset", str(data), "--test_fraction", "0.2", "--reward", "tests.e2e.rewards:digit_fraction",
            "--steps", "4", "--save_every", "2", "--eval_every", "2", "--prompts_per_step", "4", "--group_size", "4",
            "--micro_batch_size", "8", "--mu", "2", "--kl_coef", "0.05", "--max_new_tokens", "6", "--pass_k", "2",
            "--progress", "false", "--keep_last", "3"]


def _popen(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, str(REPO / "posttrain" / "train.py"), *args], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _stable_metrics(out: Path) -> list[dict]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if not k.startswith(VOLATILE)} for row in rows]


def test_sigkill_and_resume_equals_uninterrupted(tiny_arithmetic: Path, tmp_path: Path) -> None:
    data = tmp_path / "problems.jsonl"
    # 10 rows, 2 held out: 8 training prompts = 2 steps of 4, so the step-2 checkpoint is an epoch boundary.
    data.write_text("".join(json.dumps({"prompt": f"{a}+{a + 1}", "answer": str(2 * a + 1)}) + "\n"
                            for a in range(10)))
    straight = tmp_path / "straight"
    full = _popen(_args(tiny_arithmetic, straight, data))
    assert full.wait(timeout=600) == 0, full.stderr.read()[-3000:]

    killed = tmp_path / "killed"
    victim = _popen(_args(tiny_arithmetic, killed, data))
    marker = killed / "checkpoints" / "step_2" / "COMPLETE"
    deadline = time.time() + 600
    while not marker.exists():
        assert victim.poll() is None, "the run ended before it could be killed"
        assert time.time() < deadline
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    assert not (killed / "checkpoints" / "step_4").exists()
    resumed = _popen(_args(tiny_arithmetic, killed, data) + ["--resume", "auto"])
    assert resumed.wait(timeout=600) == 0, resumed.stderr.read()[-3000:]

    final = "checkpoints/step_4/hf/model.safetensors"
    a, b = load_file(straight / final), load_file(killed / final)
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    before = load_file(tiny_arithmetic / "model.safetensors")
    assert any(not torch.equal(before[k], a[k]) for k in a)  # training really changed the weights
    assert _stable_metrics(straight) == _stable_metrics(killed)
    assert [r["step"] for r in _stable_metrics(killed)] == [0, 1, 2, 3, 4]
