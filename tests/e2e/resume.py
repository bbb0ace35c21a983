"""Kill-and-resume harness shared by the resume-equivalence tests: run a job uninterrupted and, side by side,
the same job killed with SIGKILL once a checkpoint is complete, resume the victim with ``--resume auto``,
and check that both end with the same weights and the same metrics."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load_file

from tests.e2e.conftest import REPO

VOLATILE = ("time/", "perf/")
"""Metric prefixes that depend on wall time, left out of the comparison."""


def popen_entry(args: list[str], script: Path | None = None) -> subprocess.Popen:
    """``posttrain/train.py`` (or ``script``, a wrapper of it) as a single-threaded subprocess (deterministic on
    CPU)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, str(script or REPO / "posttrain" / "train.py"), *args], cwd=REPO,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def stable_metrics(out: Path) -> list[dict]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if not k.startswith(VOLATILE)} for row in rows]


def kill_and_resume(args: Callable[[Path], list[str]], straight: Path, killed: Path, kill_after: int,
                    final: int, straight_script: Path | None = None) -> None:
    """Run ``args(straight)`` to the end and ``args(killed)`` until its step-``kill_after`` checkpoint is
    complete, SIGKILL it, then resume it with ``--resume auto`` to the end. ``straight_script``: a wrapper of
    ``train.py`` that runs the uninterrupted job and checks more after it (e.g. ``vllm_sync_check.py``)."""
    full = popen_entry(args(straight), straight_script)
    victim = popen_entry(args(killed))
    marker = killed / "checkpoints" / f"step_{kill_after}" / "COMPLETE"
    deadline = time.time() + 600
    while not marker.exists():
        assert victim.poll() is None, "the run ended before it could be killed: " + victim.stderr.read()[-3000:]
        assert time.time() < deadline
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    _, err = full.communicate(timeout=600)
    assert full.returncode == 0, err[-3000:]
    assert not (killed / "checkpoints" / f"step_{final}").exists()
    resumed = popen_entry(args(killed) + ["--resume", "auto"])
    assert resumed.wait(timeout=600) == 0, resumed.stderr.read()[-3000:]


def assert_same_end(model: Path, straight: Path, killed: Path, final: int) -> list[dict]:
    """Bitwise-equal final weights (which differ from ``model``'s) and equal metrics; returns the metrics."""
    name = f"checkpoints/step_{final}/hf/model.safetensors"
    a, b = load_file(straight / name), load_file(killed / name)
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    before = load_file(model / "model.safetensors")
    assert any(not torch.equal(before[k], a[k]) for k in a if k in before)  # training really changed the weights
    rows = stable_metrics(killed)
    assert stable_metrics(straight) == rows
    assert [r["step"] for r in rows] == list(range(final + 1))
    return rows
