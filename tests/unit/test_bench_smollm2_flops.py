"""``bench_smollm2_learning.py``'s training FLOPs per step (its "Equal compute"), on hand-computed counts: 6 N
per token for a fully trained model, 4 N + 6 N_lora with LoRA, 2 N more for a KL reference; tokens are the mean
prompt plus the mean logged completion length, times the step's sequences. Parameter and prompt counts are
stubbed (the real ones load SmolLM2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from benchmarks import bench_smollm2_learning as bench


@pytest.fixture
def stub_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """100 parameters, of which a rank-8 LoRA trains 10; every prompt 30 tokens."""
    monkeypatch.setattr(bench, "parameter_counts", lambda model, lora_r: (100, 10 if lora_r else 100))
    monkeypatch.setattr(bench, "resolve_model_name", lambda model: model)
    monkeypatch.setattr(bench, "mean_prompt_tokens", lambda *args: 30.0)
    bench.update_flops_per_token.cache_clear()
    yield
    bench.update_flops_per_token.cache_clear()


@pytest.mark.parametrize(("lora_r", "kl_coef", "per_token"), [(0, 0.0, 600.0), (0, 0.001, 800.0),
                                                              (8, 0.0, 460.0), (8, 0.001, 660.0)])
def test_flops_per_token(stub_counts: None, lora_r: int, kl_coef: float, per_token: float) -> None:
    assert bench.update_flops_per_token("m", lora_r, kl_coef) == per_token


def test_flops_per_step_from_the_runs_config_and_log(stub_counts: None, tmp_path: Path) -> None:
    config = {"model": "m", "task": "arithmetic", "system_prompt": None, "max_prompt_tokens": 256, "lora_r": 0,
              "kl_coef": 0.001, "prompts_per_step": 4, "group_size": 4}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    rows = [{"step": 0, "eval/accuracy": 0.1}, {"step": 1, "completion/length_mean": 7.0},
            {"step": 2, "completion/length_mean": 9.0}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert bench.training_flops_per_step(tmp_path) == 800.0 * (30 + 8) * 16
    (tmp_path / "metrics.jsonl").write_text(json.dumps(rows[0]) + "\n")
    assert bench.training_flops_per_step(tmp_path) is None  # no step yet
