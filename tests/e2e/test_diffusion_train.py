"""ESPO and its baselines through the real entry point (plain python, one rank) on a tiny diffusion model."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from posttrain.algos import ALGORITHM_MODULES
from tests.e2e.conftest import run_entry

pytestmark = pytest.mark.skipif(  # the entry point (a subprocess) only knows the algorithms listed there
    "posttrain.algos.espo" not in ALGORITHM_MODULES,
    reason="--algo espo is not registered (posttrain.algos.ALGORITHM_MODULES lacks posttrain.algos.espo)")

SMALL = ["--task", "sudoku", "--reward", "tests.e2e.rewards:digit_fraction", "--steps", "2", "--prompts_per_step", "2",
         "--group_size", "4", "--micro_batch_size", "4", "--mu", "2", "--max_new_tokens", "20", "--block_length", "10",
         "--eval_every", "2", "--eval_examples", "8", "--pass_k", "1", "--progress", "false", "--report_to", "jsonl"]


@pytest.fixture(scope="session")
def tiny_diffusion(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The diffusion-sudoku recipe with a very short warm start (tests need a model, not a good one)."""
    from posttrain.models.tiny import RECIPES, build_recipe

    recipe = dataclasses.replace(RECIPES.get("diffusion-sudoku"), warm_start_steps=5, batch_size=16)
    return build_recipe(recipe, cache_dir=tmp_path_factory.mktemp("tiny-diffusion-cache"))


@pytest.mark.parametrize("algo,extra", [
    ("espo", []),
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
