"""Fixtures for end-to-end runs: one quickly warm-started tiny model per test session."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def tiny_arithmetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The causal-arithmetic recipe with a short warm start (tests need a model, not a good one)."""
    from posttrain.models.tiny import RECIPES, build_recipe

    recipe = dataclasses.replace(RECIPES.get("causal-arithmetic"), warm_start_steps=30)
    return build_recipe(recipe, cache_dir=tmp_path_factory.mktemp("tiny-cache"))


@pytest.fixture(scope="session")
def tiny_diffusion(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The diffusion-sudoku recipe with a very short warm start (tests need a model, not a good one)."""
    from posttrain.models.tiny import RECIPES, build_recipe

    recipe = dataclasses.replace(RECIPES.get("diffusion-sudoku"), warm_start_steps=5, batch_size=16)
    return build_recipe(recipe, cache_dir=tmp_path_factory.mktemp("tiny-diffusion-cache"))


def deepspeed_launcher(ranks: int) -> list[str]:
    """``deepspeed`` on ``ranks`` ranks with an explicit free port: other jobs (a parallel test worker, a user's
    run) may hold the launcher's default 29500."""
    from posttrain.engines.weight_sync import free_port

    return ["deepspeed", "--num_gpus", str(ranks), "--master_port", str(free_port())]


def run_entry(args: list[str], launcher: list[str] | None = None, timeout: float = 600,
              env: dict[str, str] | None = None, script: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``posttrain/train.py`` (or ``script``, a wrapper of it) as a user would: under the deepspeed launcher
    or plain python."""
    cmd = (launcher or [sys.executable]) + [str(script or REPO / "posttrain" / "train.py")] + args
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **(env or {})}
    full_env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + full_env.get("PATH", "")
    result = subprocess.run(cmd, check=False, cwd=REPO, env=full_env, capture_output=True, text=True, timeout=timeout)
    if launcher and "--master_port" in launcher and result.returncode == 0:
        _assert_no_shm_buffer_left(launcher[launcher.index("--master_port") + 1])
    return result


def train_in_process(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    """``posttrain/train.py``'s ``main`` in the test process, for argument errors and ``--help``, which end
    before any training: a subprocess (seconds of imports) adds nothing such a check needs. The malloc tuning a
    run starts with is left out of the test process."""
    from posttrain import train

    monkeypatch.setattr(train, "fix_malloc_thresholds", lambda: None)
    return train.main(argv)


def _assert_no_shm_buffer_left(port: str) -> None:
    """A finished run leaves none of DeepSpeed's CPU all-reduce buffers in /dev/shm (``posttrain.dist`` unlinks
    them once every rank has mapped them; DeepSpeed itself never does, 69 MB per rank per run)."""
    left = sorted(p.name for p in Path("/dev/shm").glob(f"deepspeed_allreduce_buffer_{os.getuid()}_*_{port}_*"))
    assert not left, f"DeepSpeed's shared-memory buffers left behind: {left}"
