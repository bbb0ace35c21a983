"""``--algo ppo`` and ``--algo text2grad`` end to end. PPO: a run killed with SIGKILL after its step-2 checkpoint and resumed with ``--resume
auto`` ends with the same policy, the same critic (its own DeepSpeed state, ``ds_critic/``) and the same
metrics as an uninterrupted run; the adaptive KL coefficient, which changes every step, is restored too.
Text2Grad: quickly warm-started policy and span reward model train through the real command, with the reward
model's unparsable outputs counted (they keep their KL term) and punctuation out of PPO's mask."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import torch

from tests.e2e.conftest import run_entry
from tests.e2e.resume import assert_same_end, kill_and_resume
from tests.e2e.test_train import check_run


def _args(model: Path, out: Path) -> list[str]:
    return ["--algo", "ppo", "--model", str(model), "--output_dir", str(out), "--task", "arithmetic",
            "--steps", "4", "--save_every", "2", "--eval_every", "2", "--eval_examples", "8", "--pass_k", "1",
            "--prompts_per_step", "4", "--group_size", "2", "--micro_batch_size", "4", "--mu", "2",
            "--max_new_tokens", "5", "--reward", "tests.e2e.rewards:digit_fraction", "--kl_coef", "0.1", "--kl_target", "0.01", "--kl_horizon", "10",
            "--kl_estimator", "full", "--critic_lr", "1e-3", "--progress", "false", "--keep_last", "3"]


def _critic_state(run: Path, step: int) -> dict[str, torch.Tensor]:
    files = list((run / "checkpoints" / f"step_{step}" / "ds_critic").rglob("*model_states.pt"))
    assert len(files) == 1, files
    return torch.load(files[0], map_location="cpu", weights_only=False)["module"]


def test_ppo_sigkill_and_resume_equals_uninterrupted(tiny_arithmetic: Path, tmp_path: Path) -> None:
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    kill_and_resume(lambda out: _args(tiny_arithmetic, out), straight, killed, kill_after=2, final=4)
    rows = assert_same_end(tiny_arithmetic, straight, killed, final=4)
    a, b, start = _critic_state(straight, 4), _critic_state(killed, 4), _critic_state(straight, 2)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["value_head.weight"], start["value_head.weight"])  # the critic trained after step 2
    train = [r for r in rows if r["step"] > 0]
    assert all("critic/value_loss" in r and "ppo/kl_coef" in r for r in train)
    assert all(r["train/grad_norm"] > 0 and r["critic/grad_norm"] > 0 for r in train)  # ZeRO-0: the trainer's clip
    coefficients = [r["ppo/kl_coef"] for r in train]
    assert coefficients[0] == 0.1 and len(set(coefficients)) == 4  # adapted every step, restored on resume


@pytest.fixture(scope="module")
def step_arithmetic_models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(policy, span reward model): the step-arithmetic recipes with a few warm-start steps (tests need models,
    not good ones)."""
    from posttrain.models.tiny import RECIPES, build_recipe

    cache = tmp_path_factory.mktemp("text2grad-cache")
    policy, span_rm = (build_recipe(dataclasses.replace(RECIPES.get(name), warm_start_steps=20), cache_dir=cache)
                       for name in ("causal-step-arithmetic", "reward-text2grad"))
    return policy, span_rm


def test_text2grad_trains_on_span_rewards(step_arithmetic_models: tuple[Path, Path], tmp_path: Path) -> None:
    policy, span_rm = step_arithmetic_models
    out = tmp_path / "run"
    result = run_entry(["--algo", "text2grad", "--model", str(policy), "--span_model", str(span_rm),
                        "--span_style", "compact", "--span_max_new_tokens", "48",
                        "--output_dir", str(out), "--steps", "2", "--eval_every", "2", "--eval_examples", "8",
                        "--pass_k", "1", "--prompts_per_step", "4", "--group_size", "2", "--micro_batch_size", "8",
                        "--max_new_tokens", "24", "--mu", "2", "--progress", "false"], env={"OMP_NUM_THREADS": "1"})
    rows = check_run(result, out)
    train = [r for r in rows if r["step"] > 0]
    for key in ("span_rm/unparsable_fraction", "span_rm/marked_fraction", "ppo/unrewarded_fraction",
                "ppo/trained_token_fraction", "critic/value_loss"):
        assert all(math.isfinite(r[key]) for r in train), key
    # a sample goes without a reward exactly when its feedback could not be parsed (it keeps its KL term)
    assert all(r["ppo/unrewarded_fraction"] == r["span_rm/unparsable_fraction"] for r in train)
    assert all(r["ppo/trained_token_fraction"] < 1 for r in train)  # the commas between steps left PPO's mask
    assert (out / "checkpoints" / "step_2" / "ds_critic").is_dir()
