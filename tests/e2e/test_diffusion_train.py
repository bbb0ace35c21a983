"""ESPO, its baselines and diffusion SFT through the real entry point (plain python and the deepspeed
launcher, one and two ranks) on a tiny diffusion model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.e2e.conftest import deepspeed_launcher, run_entry, train_in_process

SMALL = ["--task", "sudoku", "--reward", "tests.e2e.rewards:digit_fraction", "--steps", "2", "--prompts_per_step", "2",
         "--group_size", "4", "--micro_batch_size", "4", "--mu", "2", "--max_new_tokens", "20", "--block_length", "10",
         "--eval_every", "2", "--eval_examples", "8", "--pass_k", "1", "--progress", "false", "--report_to", "jsonl"]


@pytest.mark.parametrize("algo,extra", [  # one-rank ESPO: tests/e2e/test_resume_espo.py's runs
    ("token-elbo", ["--num_mc", "1", "--coupled", "false"]),
    ("diffu-grpo", ["--kl_estimator", "k2"]),
])
def test_diffusion_algorithms_train(tiny_diffusion: Path, tmp_path: Path, algo: str, extra: list[str]) -> None:
    out = tmp_path / algo
    result = run_entry(["--algo", algo, "--model", str(tiny_diffusion), "--output_dir", str(out), *SMALL, *extra])
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["step"] > 0]
    assert train[0]["train/ratio_mean"] == pytest.approx(1.0, abs=0.5)
    assert all(torch.isfinite(torch.tensor(r["train/loss"])) for r in train)
    assert "eval/accuracy" in rows[-1]
    before = load_file(tiny_diffusion / "model.safetensors")
    after = load_file(out / "checkpoints" / "step_2" / "hf" / "model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in before if k in after)
    config = json.loads((out / "checkpoints" / "step_2" / "hf" / "config.json").read_text())
    assert config.get("posttrain_kind") == "diffusion" and config.get("is_causal") is False


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _is_diffusion_checkpoint(out: Path, step: int) -> bool:
    config = json.loads((out / "checkpoints" / f"step_{step}" / "hf" / "config.json").read_text())
    return config.get("posttrain_kind") == "diffusion" and config.get("is_causal") is False


@pytest.mark.distributed
def test_espo_two_ranks_zero2(tiny_diffusion: Path, tmp_path: Path) -> None:
    out = tmp_path / "espo"
    result = run_entry(["--algo", "espo", "--model", str(tiny_diffusion), "--output_dir", str(out), *SMALL,
                        "--zero_stage", "2"], launcher=deepspeed_launcher(2))
    assert result.returncode == 0, result.stderr[-3000:]
    rows = _rows(out)
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert rows[1]["train/ratio_mean"] == pytest.approx(1.0, abs=0.5) and "train/kl" in rows[1]
    assert _is_diffusion_checkpoint(out, 2)


def test_diffusion_sft_trains_the_masked_diffusion_loss(tiny_diffusion: Path, tmp_path: Path) -> None:
    """``--algo sft --rollout diffusion``: LLaDA's masked-diffusion SFT loss, evaluated with the diffusion
    sampler; 12 steps at a high learning rate lower the loss of the barely warm-started model."""
    out = tmp_path / "sft"
    result = run_entry(["--algo", "sft", "--rollout", "diffusion", "--model", str(tiny_diffusion),
                        "--output_dir", str(out), "--task", "sudoku", "--steps", "12", "--lr", "3e-3",
                        "--prompts_per_step", "16", "--micro_batch_size", "16", "--max_new_tokens", "20",
                        "--block_length", "20", "--eval_every", "12", "--eval_examples", "8", "--pass_k", "1",
                        "--progress", "false", "--report_to", "jsonl"])
    assert result.returncode == 0, result.stderr[-3000:]
    train = [r for r in _rows(out) if r["step"] > 0]
    assert len(train) == 12 and all(0 < r["train/masked_fraction"] <= 1 for r in train)
    first, last = sum(r["train/nll"] for r in train[:4]) / 4, sum(r["train/nll"] for r in train[-4:]) / 4
    assert last < first, (first, last)
    assert "eval/accuracy" in _rows(out)[-1]
    assert _is_diffusion_checkpoint(out, 12)


def test_diffusion_sft_rejects_a_target_longer_than_the_canvas(tiny_diffusion: Path, tmp_path: Path) -> None:
    result = run_entry(["--algo", "sft", "--rollout", "diffusion", "--model", str(tiny_diffusion),
                        "--output_dir", str(tmp_path / "sft"), "--task", "sudoku", "--steps", "1",
                        "--max_new_tokens", "8", "--block_length", "8", "--eval_every", "0", "--progress", "false"])
    assert result.returncode != 0
    assert "over max_new_tokens=8" in result.stderr


def test_causal_algorithms_refuse_the_diffusion_sampler(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    assert train_in_process(["--algo", "grpo", "--rollout", "diffusion", "--output_dir", str(tmp_path / "grpo")],
                            monkeypatch) == 2
    stderr = capsys.readouterr().err
    assert "rollout" in stderr and "diffusion" in stderr


def test_espo_on_a_remote_code_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """LLaDA/Dream ship their modeling code with the weights: ``--trust_remote_code true`` trains one; without
    it the entry point refuses the checkpoint while validating its options (before any training)."""
    from tests.remote_code_model import write_remote_code_model

    model = write_remote_code_model(tmp_path / "tiny-llada")
    out = tmp_path / "espo"
    result = run_entry(["--algo", "espo", "--model", str(model), "--trust_remote_code", "true",
                        "--output_dir", str(out), *SMALL])
    assert result.returncode == 0, result.stderr[-3000:]
    rows = _rows(out)
    assert [r["step"] for r in rows] == [0, 1, 2] and "eval/accuracy" in rows[-1]
    exported = out / "checkpoints" / "step_2" / "hf"
    before, after = load_file(model / "model.safetensors"), load_file(exported / "model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in before)
    assert (exported / "modeling_tiny_llada.py").exists()  # the export stays loadable with its own code
    capsys.readouterr()
    assert train_in_process(["--algo", "espo", "--model", str(model), "--output_dir", str(tmp_path / "no"), *SMALL],
                            monkeypatch) == 2
    assert "--trust_remote_code true" in capsys.readouterr().err
