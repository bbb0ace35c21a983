"""``--algo espo``: a run killed with SIGKILL after its step-2 checkpoint and resumed with ``--resume auto``
ends with the same weights and metrics as an uninterrupted run. ESPO draws its ELBO masks from the
algorithm's generator and its rollouts from per-step seeds, so the resumed run must restore the generator
(checkpointed per rank) and the sampler position (not on an epoch boundary here: sudoku has thousands of
training puzzles) to reproduce the uninterrupted run bit for bit.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

from tests.e2e.test_resume import _popen, _stable_metrics


def _args(model: Path, out: Path) -> list[str]:
    return ["--algo", "espo", "--model", str(model), "--output_dir", str(out), "--task", "sudoku",
            "--reward", "tests.e2e.rewards:digit_fraction", "--steps", "4", "--save_every", "2", "--eval_every", "2",
            "--eval_examples", "8", "--prompts_per_step", "2", "--group_size", "4", "--micro_batch_size", "4",
            "--mu", "2", "--max_new_tokens", "20", "--block_length", "10", "--pass_k", "2", "--progress", "false",
            "--keep_last", "3", "--report_to", "jsonl"]


def test_espo_sigkill_and_resume_equals_uninterrupted(tiny_diffusion: Path, tmp_path: Path) -> None:
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    full = _popen(_args(tiny_diffusion, straight))
    victim = _popen(_args(tiny_diffusion, killed))
    marker = killed / "checkpoints" / "step_2" / "COMPLETE"
    deadline = time.time() + 600
    while not marker.exists():
        assert victim.poll() is None, "the run ended before it could be killed: " + victim.stderr.read()[-3000:]
        assert time.time() < deadline
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    _, err = full.communicate(timeout=600)
    assert full.returncode == 0, err[-3000:]
    assert not (killed / "checkpoints" / "step_4").exists()
    resumed = _popen(_args(tiny_diffusion, killed) + ["--resume", "auto"])
    assert resumed.wait(timeout=600) == 0, resumed.stderr.read()[-3000:]

    final = "checkpoints/step_4/hf/model.safetensors"
    a, b = load_file(straight / final), load_file(killed / final)
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    before = load_file(tiny_diffusion / "model.safetensors")
    assert any(not torch.equal(before[k], a[k]) for k in a)  # training really changed the weights
    rows = _stable_metrics(killed)
    assert _stable_metrics(straight) == rows
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4]
    assert all("train/ratio_mean" in r for r in rows[1:])
