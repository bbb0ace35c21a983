"""GRPO with ``--rollout vllm`` (vLLM's CPU build in every rank's process) through the real entry point:
after training and a sync the engine holds the trainer's weights (2 ranks with ZeRO-3; 1 rank: the
uninterrupted run of the resume test), GRPO learns as it does with the HF engine, SmolLM2-135M trains a few
steps, and a killed run resumes to where an uninterrupted one ends.

The embedded default model has attention heads of 24, which vLLM's CPU attention does not implement, so
``--rollout vllm`` without ``--model`` starts from its registered twin ``causal-arithmetic-vllm`` (3 heads
of 32, same recipe otherwise); the learning test goes through that default path, the others name the twin.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from tests.e2e.conftest import deepspeed_launcher, run_entry
from tests.e2e.resume import assert_same_end, kill_and_resume
from tests.e2e.sync_harness import SHORT as GRPO_SHORT
from tests.e2e.sync_harness import SYNC_CHECK, assert_synced, run_sync_check

pytest.importorskip("vllm")

SHORT = [*GRPO_SHORT, "--rollout", "vllm"]
VLLM_RECIPE = "causal-arithmetic-vllm"


@pytest.fixture(scope="module")
def vllm_arithmetic() -> Path:
    """The embedded default of a ``--rollout vllm`` run (the registered twin of the arithmetic policy),
    built once per machine in the tiny-model cache."""
    from posttrain.models.tiny import build_tiny

    return build_tiny(VLLM_RECIPE)


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _ok(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


@pytest.mark.distributed
def test_after_training_the_engine_holds_the_trainers_weights_two_ranks_zero3(vllm_arithmetic: Path,
                                                                              tmp_path: Path) -> None:
    checks = run_sync_check(vllm_arithmetic, tmp_path, deepspeed_launcher(2), ["--rollout", "vllm", "--zero_stage", "3"])
    assert_synced(checks, vllm_arithmetic, tmp_path, 2)


@pytest.mark.distributed
def test_grpo_with_vllm_learns_like_with_hf(vllm_arithmetic: Path, tmp_path: Path) -> None:
    """`--algo grpo --rollout vllm` with no --model (the embedded default path) against `--rollout hf` on the
    same weights (the twin, named with --model, so both start from one model)."""
    results = {}
    for engine, model in (("hf", ["--model", str(vllm_arithmetic)]), ("vllm", [])):
        out = tmp_path / engine
        result = run_entry(["--algo", "grpo", "--rollout", engine, *model, "--output_dir", str(out), "--steps", "40",
                            "--eval_every", "40", "--eval_examples", "128", "--pass_k", "1", "--save_every", "0",
                            "--progress", "false", "--report_to", "jsonl"],
                           launcher=deepspeed_launcher(1), timeout=1200)
        _ok(result)
        evals = [r["eval/accuracy"] for r in _rows(out) if "eval/accuracy" in r]
        results[engine] = (evals[0], evals[-1])
    assert f"using the embedded recipe {VLLM_RECIPE} ({vllm_arithmetic})" in result.stderr  # logged, with why
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
                       launcher=deepspeed_launcher(1), timeout=1200)
    _ok(result)
    rows = _rows(out)
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        assert torch.isfinite(torch.tensor(row["train/loss"]))
        assert row["rollout/logprob_abs_diff"] < 1e-2 and row["rollout/logprob_kl"] < 1e-3
    assert (out / "checkpoints" / "step_2" / "COMPLETE").exists()


def test_sigkill_and_resume_with_vllm_rollouts_equals_uninterrupted(vllm_arithmetic: Path, tmp_path: Path) -> None:
    """The uninterrupted run goes through ``vllm_sync_check.py`` (one rank, plain python): after training and a
    sync its engine holds the trainer's weights, and the killed and resumed run ends where it ends."""
    def args(out: Path) -> list[str]:
        return [*SHORT, "--model", str(vllm_arithmetic), "--output_dir", str(out), "--steps", "4", "--save_every",
                "2", "--eval_every", "2", "--eval_examples", "16", "--pass_k", "2", "--keep_last", "3", "--lr", "3e-3"]

    straight, killed = tmp_path / "straight", tmp_path / "killed"
    kill_and_resume(args, straight, killed, kill_after=2, final=4, straight_script=SYNC_CHECK)
    checks = [json.loads((straight / "sync_check_rank0.json").read_text())]
    assert_synced(checks, vllm_arithmetic, straight, 1, step=4)
    rows = assert_same_end(vllm_arithmetic, straight, killed, final=4)
    assert all("rollout/logprob_kl" in r for r in rows if r["step"] > 0)
    last = [r for r in rows if "rollout/logprob_abs_diff" in r][-1]
    assert 0 < last["rollout/logprob_abs_diff"] < 1e-3  # fp32 engine and trainer: rounding apart
    assert last["rollout/tis_weight_mean"] == pytest.approx(1.0, abs=1e-3)  # on by default for vLLM
