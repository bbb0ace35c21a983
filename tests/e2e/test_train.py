"""End-to-end runs through the real entry point: ``deepspeed posttrain/train.py`` and plain python."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from tests.e2e.conftest import deepspeed_launcher, run_entry, train_in_process

SMALL = ["--reward", "tests.e2e.rewards:digit_fraction", "--steps", "2", "--prompts_per_step", "4", "--group_size", "4", "--micro_batch_size", "8",
         "--eval_every", "2", "--eval_examples", "16", "--pass_k", "2", "--max_new_tokens", "8", "--progress", "false"]


def read_metrics(output_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines()]


def check_run(result, output_dir: Path, steps: int = 2) -> list[dict]:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = read_metrics(output_dir)
    assert rows[0]["step"] == 0 and "eval/accuracy" in rows[0]
    assert rows[-1]["step"] == steps
    train_rows = [r for r in rows if r["step"] > 0]
    for key in ("reward/mean", "train/loss", "time/generate", "time/train", "perf/tokens_per_s", "train/entropy",
                "train/grad_norm"):  # the norm before clipping, on every ZeRO stage (stage 0 clips in the trainer)
        assert key in train_rows[0], key
    # a step can have no gradient at all (every group's rewards equal: zero advantages), so >= 0 here; the runs
    # whose weights must move also check that some step had one (grad_norm_was_logged)
    assert all(math.isfinite(r["train/grad_norm"]) and r["train/grad_norm"] >= 0 for r in train_rows)
    assert all(torch.isfinite(torch.tensor(r["train/loss"])) for r in train_rows)
    final = output_dir / "checkpoints" / f"step_{steps}"
    assert (final / "COMPLETE").exists() and (output_dir / "config.yaml").exists()
    model = AutoModelForCausalLM.from_pretrained(final / "hf")
    assert sum(p.numel() for p in model.parameters()) > 0
    return rows


def weights_changed(model_dir: Path, output_dir: Path, steps: int) -> bool:
    before = load_file(model_dir / "model.safetensors")
    after = load_file(output_dir / "checkpoints" / f"step_{steps}" / "hf" / "model.safetensors")
    return any(not torch.equal(before[k], after[k]) for k in before if k in after)


def grad_norm_was_logged(rows: list[dict]) -> bool:
    """Some training step logged a positive gradient norm (the norm is logged on every ZeRO stage)."""
    return any(r.get("train/grad_norm", 0) > 0 for r in rows if r["step"] > 0)


@pytest.mark.distributed
def test_grpo_one_rank_deepspeed_launcher(tiny_arithmetic: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = run_entry(["--algo", "grpo", "--model", str(tiny_arithmetic), "--output_dir", str(out), *SMALL],
                       launcher=deepspeed_launcher(1))
    rows = check_run(result, out)
    assert weights_changed(tiny_arithmetic, out, 2) and grad_norm_was_logged(rows)


@pytest.mark.distributed
def test_grpo_two_ranks_zero3(tiny_arithmetic: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = run_entry(["--algo", "grpo", "--model", str(tiny_arithmetic), "--output_dir", str(out),
                        "--zero_stage", "3", "--kl_coef", "0.05", *SMALL],
                       launcher=deepspeed_launcher(2))
    rows = check_run(result, out)
    assert "train/kl" in rows[1]
    assert weights_changed(tiny_arithmetic, out, 2) and grad_norm_was_logged(rows)


@pytest.mark.parametrize("algo,extra", [
    ("rloo", ["--mu", "2", "--zero_stage", "2", "--loss_agg", "seq-mean"]),
    ("sft", ["--group_size", "1", "--micro_batch_size", "2"]),
])
def test_other_algorithms_plain_python(tiny_arithmetic: Path, tmp_path: Path, algo: str, extra: list[str]) -> None:
    out = tmp_path / algo
    args = [a for a in SMALL]
    args[args.index("--group_size") + 1] = "4"
    result = run_entry(["--algo", algo, "--model", str(tiny_arithmetic), "--output_dir", str(out), *args, *extra])
    assert result.returncode == 0, result.stderr[-3000:]
    assert weights_changed(tiny_arithmetic, out, 2)


def test_bad_config_names_field_and_valid_values(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    assert train_in_process(["--algo", "grpo", "--prompts_per_step", "4", "--group_size", "4", "--micro_batch_size", "5",
                  "--output_dir", str(tmp_path)], monkeypatch) == 2
    stderr = capsys.readouterr().err
    assert "micro_batch_size" in stderr and "[1, 2, 4, 8, 16]" in stderr
    assert train_in_process(["--algo", "grpo", "--loss_agg", "mean", "--output_dir", str(tmp_path)], monkeypatch) == 2
    stderr = capsys.readouterr().err
    assert "loss_agg" in stderr and "token-mean" in stderr
    assert train_in_process(["--algo", "grpo", "--lerning_rate", "1", "--output_dir", str(tmp_path)], monkeypatch) == 2
    assert "lerning_rate" in capsys.readouterr().err
    assert train_in_process(["--algo", "nope"], monkeypatch) == 2
    assert "grpo" in capsys.readouterr().err


def test_help_lists_documented_fields(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    assert train_in_process(["--algo", "grpo", "--help"], monkeypatch) == 0
    stdout = capsys.readouterr().out
    assert "--group_size" in stdout and "Completions sampled per prompt" in stdout
    assert "--kl_estimator" in stdout


def test_bad_dataset_row_names_file_row_and_field(tiny_arithmetic: Path, tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text('{"prompt": "1+1", "answer": "2"}\n{"prompt": "2+2"}\n')
    result = run_entry(["--algo", "grpo", "--model", str(tiny_arithmetic), "--task", "dataset", "--dataset", str(data),
                        "--output_dir", str(tmp_path / "out"), *SMALL])
    assert result.returncode != 0
    message = result.stderr
    assert str(data) in message and "2" in message and "answer" in message


def test_logged_evals_match_the_exported_checkpoint_and_a_non_log_step_evaluation_is_logged(
        tiny_arithmetic: Path, tmp_path: Path) -> None:
    """The final evaluation scores the trained weights (also for SFT, whose rollout engine is only
    synced for evaluation): re-evaluating the exported checkpoint gives the logged numbers. Step 2 evaluates
    (eval_every 2) but is no log step (log_every 5, 3 steps): its evaluation is logged. One run checks both."""
    from posttrain.engines.base import SamplingParams
    from posttrain.engines.hf import HFRolloutEngine
    from posttrain.models.loading import load_causal_lm, load_tokenizer
    from posttrain.tasks import TASKS
    from posttrain.tasks.prompts import encode_prompts

    out = tmp_path / "sft"
    result = run_entry(["--algo", "sft", "--model", str(tiny_arithmetic), "--output_dir", str(out), "--steps", "3",
                        "--prompts_per_step", "8", "--micro_batch_size", "8", "--lr", "1e-2", "--eval_every", "2",
                        "--log_every", "5", "--eval_examples", "32", "--pass_k", "1", "--max_new_tokens", "8",
                        "--save_every", "0", "--progress", "false"])
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_metrics(out)
    assert [r["step"] for r in rows] == [0, 2, 3]
    assert all("eval/accuracy" in r for r in rows) and "train/loss" in rows[1]
    logged = rows[-1]
    path = out / "checkpoints" / "step_3" / "hf"
    tokenizer, model = load_tokenizer(str(path)), load_causal_lm(str(path))
    task = TASKS.get("arithmetic")()
    examples = task.split("test")[:32]
    greedy = HFRolloutEngine(model, tokenizer).generate(encode_prompts(tokenizer, examples, None, 256),
                                                         SamplingParams(max_new_tokens=8, temperature=0.0))
    accuracy = sum(task.is_correct(t, e) for t, e in zip(greedy.texts, examples)) / len(examples)
    length = sum(len(c) for c in greedy.completion_ids) / len(examples)
    assert logged["eval/accuracy"] == accuracy
    assert logged["eval/completion_length"] == length
    assert rows[0]["eval/completion_length"] != length or rows[0]["eval/accuracy"] != accuracy
