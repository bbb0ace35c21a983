"""Start-up memory: the trainer lends its rollout engine a frozen copy of the policy only where the engine runs
that module in process (hf, diffusion); the vLLM engines get the policy itself (the colocated one reads its
checkpoint name and dtype, the remote one pushes its weights once), and no copy of the policy is made."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch

from posttrain.engines.spec import parse_engine_spec


@pytest.mark.parametrize(("spec", "borrows"), [("hf", True), ("hf:/some/checkpoint", False), ("diffusion", True),
                                               ("vllm", False), ("vllm-remote:http://127.0.0.1:9", False),
                                               ("fake", False)])
def test_only_in_process_engines_without_a_checkpoint_borrow_the_callers_module(spec: str, borrows: bool) -> None:
    assert parse_engine_spec(spec).borrows_module is borrows


class _RecordingEngine:
    """Stands in for the engine the trainer builds (no vLLM is started): records the module and dtype it was
    given."""

    def __init__(self, model: torch.nn.Module, dtype: torch.dtype | None) -> None:
        self.model = model
        self.dtype = dtype
        self.weight_version = 0


def _trainer(rollout: str, extra: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list]:
    """A GRPO trainer on the embedded default with a recording engine, and the modules deep-copied on the way."""
    import posttrain.trainer_parts as parts_module
    from posttrain.algos import get_algorithm
    from posttrain.config import build_config
    from posttrain.engines.weight_sync import free_port
    from posttrain.trainer import Trainer

    for name, value in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0"), ("MASTER_ADDR", "127.0.0.1"),
                        ("MASTER_PORT", str(free_port()))):
        monkeypatch.setenv(name, value)
    copied: list[Any] = []
    real_deepcopy = copy.deepcopy

    def recording_deepcopy(obj: Any, *args: Any) -> Any:
        if isinstance(obj, torch.nn.Module):
            copied.append(obj)
        return real_deepcopy(obj, *args)

    monkeypatch.setattr(parts_module.copy, "deepcopy", recording_deepcopy)
    monkeypatch.setattr(parts_module, "build_engine",
                        lambda spec, model, dtype=None, **_: _RecordingEngine(model, dtype))
    config = build_config(get_algorithm("grpo").config_class,
                          ["--algo", "grpo", "--rollout", rollout, "--output_dir", str(tmp_path), "--steps", "1",
                           "--report_to", "jsonl", "--progress", "false", "--kl_coef", "0", *extra])
    return Trainer.from_config(config), copied


@pytest.mark.heavy
@pytest.mark.parametrize("rollout", ["vllm", "vllm-remote:http://127.0.0.1:9", "hf"])
def test_vllm_engines_get_the_policy_itself_and_no_copy_is_made(rollout: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    trainer, copied = _trainer(rollout, [], tmp_path, monkeypatch)
    policy = trainer.deepspeed_model.module
    if rollout == "hf":  # the HF engine runs its module in process: a frozen copy of its own
        assert trainer.rollout.model is not policy and copied == [policy]
        assert not any(p.requires_grad for p in trainer.rollout.model.parameters())
    else:
        assert trainer.rollout.model is policy and copied == []
    assert trainer.rollout.dtype is None  # no autocast: every engine serves the policy's dtype


@pytest.mark.heavy
@pytest.mark.parametrize("rollout", ["hf", "vllm"])
def test_under_bf16_autocast_the_rollouts_run_bf16_weights(rollout: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``--autocast bf16``: the trained policy keeps fp32 weights; the HF engine's own copy is bf16 and vLLM is
    asked for bf16 (decoding reads every weight per token: half the bytes)."""
    trainer, _ = _trainer(rollout, ["--autocast", "bf16"], tmp_path, monkeypatch)
    policy = trainer.deepspeed_model.module
    assert {p.dtype for p in policy.parameters()} == {torch.float32}
    assert trainer.rollout.dtype == torch.bfloat16
    if rollout == "hf":
        assert {p.dtype for p in trainer.rollout.model.parameters()} == {torch.bfloat16}
