"""GRPO with ``--rollout vllm`` (vLLM's CPU build in every rank's process) through the real entry point:
after training and a sync the engine holds the trainer's weights (1 rank; 2 ranks with ZeRO-3), GRPO
learns as it does with the HF engine, SmolLM2-135M trains a few steps, and a killed run resumes to
where an uninterrupted one ends.

The embedded default model has attention heads of 24, which vLLM's CPU attention does not implement
(``--rollout vllm`` refuses it at start-up), so these runs use the same recipe with 3 heads of 32.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.e2e.conftest import REPO, run_entry
from tests.e2e.resume import assert_same_end, kill_and_resume

pytest.importorskip("vllm")

SYNC_CHECK = REPO / "tests" / "e2e" / "vllm_sync_check.py"
SHORT = ["--algo", "grpo", "--rollout", "vllm", "--reward", "tests.e2e.rewards:digit_fraction", "--prompts_per_step",
         "4", "--group_size", "4", "--micro_batch_size", "8", "--max_new_tokens", "8", "--progress", "false",
         "--report_to", "jsonl"]


@pytest.fixture(scope="module")
def vllm_arithmetic() -> Path:
    """The embedded arithmetic policy (same data, noise and warm-start recipe) with heads vLLM's CPU build
    serves, warm-started for 400 steps and cached like the embedded models (built once per machine)."""
    from posttrain.models.tiny import RECIPES, build_recipe

    recipe = dataclasses.replace(RECIPES.get("causal-arithmetic"), num_heads=3, num_kv_heads=1, warm_start_steps=400)
    return build_recipe(recipe)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _deepspeed(ranks: int) -> list[str]:
    # An explicit free port: other jobs on the machine may hold the launcher's default 29500.
    return ["deepspeed", "--num_gpus", str(ranks), "--master_port", str(_free_port())]


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _ok(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def _sync_check(model: Path, out: Path, launcher: list[str], extra: list[str]) -> list[dict]:
    """Train 2 steps through ``vllm_sync_check.py`` (the real Trainer) and return each rank's comparison."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    cmd = [*launcher, str(SYNC_CHECK), *SHORT, "--model", str(model), "--output_dir", str(out), "--steps", "2",
           "--eval_every", "0", "--lr", "3e-3", *extra]
    _ok(subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=1200, check=False))
    return [json.loads(p.read_text()) for p in sorted(out.glob("sync_check_rank*.json"))]


def _assert_synced(checks: list[dict], model: Path, out: Path, ranks: int) -> None:
    assert len(checks) == ranks
    for check in checks:
        assert check["weight_version"] == check["rollout_version"] == 2  # the trainer step it holds
        assert check["engine"] == check["trainer"]
    before = load_file(model / "model.safetensors")
    after = load_file(out / "checkpoints" / "step_2" / "hf" / "model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in before if k in after)  # it did train


@pytest.mark.distributed
def test_after_training_the_engine_holds_the_trainers_weights_one_rank(vllm_arithmetic: Path, tmp_path: Path) -> None:
    checks = _sync_check(vllm_arithmetic, tmp_path, [sys.executable], [])
    _assert_synced(checks, vllm_arithmetic, tmp_path, 1)
    rows = _rows(tmp_path)
    assert 0 < rows[-1]["rollout/logprob_abs_diff"] < 1e-3  # fp32 engine and trainer: rounding apart
    assert rows[-1]["rollout/tis_weight_mean"] == pytest.approx(1.0, abs=1e-3)  # on by default for vLLM


@pytest.mark.distributed
def test_after_training_the_engine_holds_the_trainers_weights_two_ranks_zero3(vllm_arithmetic: Path,
                                                                              tmp_path: Path) -> None:
    checks = _sync_check(vllm_arithmetic, tmp_path, _deepspeed(2), ["--zero_stage", "3"])
    _assert_synced(checks, vllm_arithmetic, tmp_path, 2)


@pytest.mark.distributed
def test_grpo_with_vllm_learns_like_with_hf(vllm_arithmetic: Path, tmp_path: Path) -> None:
    results = {}
    for engine in ("hf", "vllm"):
        out = tmp_path / engine
        result = run_entry(["--algo", "grpo", "--rollout", engine, "--model", str(vllm_arithmetic), "--output_dir",
                            str(out), "--steps", "40", "--eval_every", "40", "--eval_examples", "128", "--pass_k", "1",
                            "--save_every", "0", "--progress", "false", "--report_to", "jsonl"],
                           launcher=_deepspeed(1), timeout=1200)
        _ok(result)
        evals = [r["eval/accuracy"] for r in _rows(out) if "eval/accuracy" in r]
        results[engine] = (evals[0], evals[-1])
    (hf_start, hf_end), (vllm_start, vllm_end) = results["hf"], results["vllm"]
    assert vllm_start == hf_start  # the same model, greedy: both engines score it the same
    assert hf_end > hf_start, results
    assert vllm_end > vllm_start, results
    assert abs(vllm_end - hf_end) <= 0.1, results


@pytest.mark.distributed
def test_grpo_steps_on_smollm2_with_vllm(smollm2: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = run_entry(["--algo", "grpo", "--rollout", "vllm", "--model", "smollm2-135m", "--output_dir", str(out),
                        "--steps", "2", "--prompts_per_step", "2", "--group_size", "2", "--micro_batch_size", "2",
                        "--max_new_tokens", "8", "--eval_every", "0", "--lr", "1e-5", "--progress", "false",
                        "--report_to", "jsonl", "--reward", "tests.e2e.rewards:digit_fraction"],
                       launcher=_deepspeed(1), timeout=1200)
    _ok(result)
    rows = _rows(out)
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        assert torch.isfinite(torch.tensor(row["train/loss"]))
        assert row["rollout/logprob_abs_diff"] < 1e-2 and row["rollout/logprob_kl"] < 1e-3
    assert (out / "checkpoints" / "step_2" / "COMPLETE").exists()


def test_sigkill_and_resume_with_vllm_rollouts_equals_uninterrupted(vllm_arithmetic: Path, tmp_path: Path) -> None:
    def args(out: Path) -> list[str]:
        return [*SHORT, "--model", str(vllm_arithmetic), "--output_dir", str(out), "--steps", "4", "--save_every",
                "2", "--eval_every", "2", "--eval_examples", "16", "--pass_k", "2", "--keep_last", "3"]

    straight, killed = tmp_path / "straight", tmp_path / "killed"
    kill_and_resume(args, straight, killed, kill_after=2, final=4)
    rows = assert_same_end(vllm_arithmetic, straight, killed, final=4)
    assert all("rollout/logprob_kl" in r for r in rows if r["step"] > 0)
