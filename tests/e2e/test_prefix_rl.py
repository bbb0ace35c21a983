"""``--algo prefix-rl`` and ``posttrain prefix-cluster`` end to end on quickly warm-started answer-format models:
the trainer builds the declared roles and never changes the target's weights while the adapter learns; a run
killed with SIGKILL and resumed equals an uninterrupted one; the clustering CLI writes its JSON summary."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.e2e.conftest import REPO
from tests.e2e.resume import assert_same_end, kill_and_resume


@pytest.fixture(scope="module")
def answer_format_models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(adapter, target): the answer-format recipes with a few warm-start steps (tests need models, not good
    ones)."""
    from posttrain.models.tiny import RECIPES, build_recipe

    cache = tmp_path_factory.mktemp("prefix-cache")
    adapter, target = (build_recipe(dataclasses.replace(RECIPES.get(name), warm_start_steps=20), cache_dir=cache)
                       for name in ("causal-answer-format-adapter", "causal-answer-format"))
    return adapter, target


def _args(models: tuple[Path, Path], out: Path) -> list[str]:
    adapter, target = models
    return ["--algo", "prefix-rl", "--model", str(adapter), "--target_model", str(target), "--output_dir", str(out),
            "--prefix_tokens", "8", "--max_new_tokens", "20", "--steps", "4", "--save_every", "2",
            "--eval_every", "2", "--eval_examples", "8", "--prompts_per_step", "4", "--group_size", "4",
            "--micro_batch_size", "8", "--mu", "2", "--kl_coef", "0.05", "--progress", "false", "--keep_last", "3",
            "--reward", "tests.e2e.rewards:digit_fraction"]


def _in_process_trainer(args: list[str], monkeypatch: pytest.MonkeyPatch):
    """A ``Trainer`` built in this process from train.py's ``args``, on a one-rank group whose variables are set
    through ``monkeypatch`` so they do not leak into later subprocesses."""
    from posttrain.algos import get_algorithm
    from posttrain.config import build_config, requested_algo
    from posttrain.engines.weight_sync import free_port
    from posttrain.trainer import Trainer

    for name, value in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0"), ("MASTER_ADDR", "127.0.0.1"),
                        ("MASTER_PORT", str(free_port()))):
        monkeypatch.setenv(name, value)
    config_class = get_algorithm(requested_algo(args)).config_class
    return Trainer.from_config(build_config(config_class, args + ["--report_to", "jsonl"]))


@pytest.mark.parametrize("algo", ["prefix-rl", "prefix-rl-ppo"])
def test_trainer_builds_the_roles_and_never_changes_the_target(answer_format_models: tuple[Path, Path],
                                                              tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              algo: str) -> None:
    args = _args(answer_format_models, tmp_path / "run")
    args[args.index("--steps") + 1] = "2"
    args[args.index("--algo") + 1] = algo
    trainer = _in_process_trainer(args, monkeypatch)
    target = trainer.ctx.engines["target"].model
    trained = {"critic"} if algo == "prefix-rl-ppo" else set()  # the paper's PPO: a critic role of its own
    assert set(trainer.ctx.models) == {"reference"} | trained and set(trainer.ctx.engines) == {"policy", "target"}
    assert set(trainer.role_deepspeed_models) == trained
    assert trainer.ctx.engines["target"] is not trainer.rollout
    assert all(not p.requires_grad for p in target.parameters())
    before = {k: v.clone() for k, v in target.state_dict().items()}
    adapter_before = {k: v.clone() for k, v in trainer.deepspeed_model.module.state_dict().items()}
    final = trainer.fit()
    assert "eval/accuracy" in final
    assert all(torch.equal(before[k], v) for k, v in target.state_dict().items())
    assert any(not torch.equal(adapter_before[k], v) for k, v in trainer.deepspeed_model.module.state_dict().items())
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all("prefix_rl/answer_length_mean" in r and r["completion/length_max"] <= 8 for r in rows if r["step"])
    if trained:
        assert all("critic/value_loss" in r and "ppo/kl_coef" in r for r in rows if r["step"])


def test_self_prefix_target_is_a_frozen_copy_of_the_model(answer_format_models: tuple[Path, Path],
                                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pretrained checkpoint as ``--model`` and no ``--target_model`` (the paper's self-prefix form, as on
    SmolLM2): the target is that checkpoint loaded again, a module of its own, frozen, equal to the adapter's
    initial weights and sharing its tokenizer; the adapter's budget is k, the target's the rest of
    ``--max_new_tokens``."""
    target_checkpoint = answer_format_models[1]
    args = ["--algo", "prefix-rl", "--model", str(target_checkpoint), "--task", "arithmetic", "--prefix_tokens",
            "4", "--max_new_tokens", "10", "--output_dir", str(tmp_path / "run"), "--progress", "false"]
    trainer = _in_process_trainer(args, monkeypatch)
    target, policy = trainer.ctx.engines["target"], trainer.deepspeed_model.module
    assert {role.name: role for role in trainer.algo.roles()}["target"].checkpoint == str(target_checkpoint)
    assert target is not trainer.rollout and target.model is not policy and target.model is not trainer.rollout.model
    assert all(not p.requires_grad for p in target.model.parameters())
    assert any(p.requires_grad for p in policy.parameters())
    initial = policy.state_dict()
    assert all(torch.equal(initial[name], value) for name, value in target.model.state_dict().items())
    assert target.tokenizer.get_vocab() == trainer.tokenizer.get_vocab()
    engine = trainer.algo.evaluation_engine()
    assert (engine.prefix_tokens, engine.target_max_new_tokens) == (4, 6)


def test_prefix_rl_sigkill_and_resume_equals_uninterrupted(answer_format_models: tuple[Path, Path],
                                                          tmp_path: Path) -> None:
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    kill_and_resume(lambda out: _args(answer_format_models, out), straight, killed, kill_after=2, final=4)
    rows = assert_same_end(answer_format_models[0], straight, killed, final=4)
    assert all("train/kl" in r for r in rows if r["step"])


def test_prefix_cluster_cli_writes_its_summary(answer_format_models: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "clusters.json"
    cmd = [sys.executable, "-m", "posttrain.cli", "prefix-cluster", "--target_model", str(answer_format_models[1]),
           "--prefix_tokens", "8", "--train_examples", "24", "--eval_examples", "8", "--max_clusters", "3",
           "--max_new_tokens", "12", "--eval_temperature", "0", "--no_progress", "--output", str(out)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(out.read_text())
    assert json.dumps(summary, indent=2) in result.stdout  # printed too (after any library's own output)
    assert summary["settings"]["eval_temperature"] == 0.0  # held-out scored greedily, like the trainer's evaluation
    assert 1 <= summary["clusters_chosen"] <= 3 and len(summary["clusters"]) == summary["clusters_chosen"]
    assert summary["chosen_prefix"] == summary["clusters"][summary["best_cluster"]]["representative"]
    for part in ("target_alone", "with_chosen_prefix"):
        assert set(summary["heldout"][part]["by_kind"]) == {"short", "long"}
