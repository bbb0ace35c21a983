"""The hinted warm start (``TinyRecipe.hint_fraction``): GPO's guider prompt mixed into the SFT data."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest
import torch

from posttrain.algos.gpo.hint import PRIVILEGED_TEMPLATE, privileged_examples
from posttrain.algos.gpo.llm import GPOConfig
from posttrain.models.tiny import CODE_VERSION, RECIPES, TinyRecipe, default_recipe_for, sft_warm_start_pair
from posttrain.tasks import TASKS

HINT = RECIPES.get("causal-arithmetic-hint")
PLAIN = RECIPES.get("causal-arithmetic")


def _draws(recipe: TinyRecipe, n: int) -> tuple[list, torch.Generator, torch.Generator]:
    task = TASKS.get("arithmetic")()
    examples = task.split("train")
    noise, hint = torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)
    picks = [examples[i % len(examples)] for i in range(n)]
    return [(ex, *sft_warm_start_pair(task, ex, recipe, noise, hint)) for ex in picks], noise, hint


def test_hint_recipe_declared_and_not_the_default() -> None:
    assert HINT.task == "arithmetic" and HINT.kind == "causal" and 0 < HINT.hint_fraction < 1
    assert HINT.target_noise == PLAIN.target_noise and PLAIN.hint_fraction == 0
    assert default_recipe_for("arithmetic") == "causal-arithmetic"
    assert GPOConfig(algo="gpo").privileged_template == PRIVILEGED_TEMPLATE


def test_hinted_pairs_use_the_gpo_template_and_clean_targets() -> None:
    task = TASKS.get("arithmetic")()
    recipe = dataclasses.replace(HINT, hint_fraction=0.3)
    draws, _, _ = _draws(recipe, 4000)
    hinted = [(ex, prompt, target) for ex, prompt, target in draws if prompt.prompt != ex.prompt]
    plain = [(ex, target) for ex, prompt, target in draws if prompt.prompt == ex.prompt]
    assert abs(len(hinted) / len(draws) - 0.3) < 0.03
    for ex, prompt, target in hinted:
        assert prompt == privileged_examples([ex])[0]
        assert prompt.prompt == PRIVILEGED_TEMPLATE.format(prompt=ex.prompt, answer=ex.answer)
        assert target == ex.answer
    noisy = [target == task.distractor(ex) for ex, target in plain]
    assert all(target in (ex.answer, task.distractor(ex)) for ex, target in plain)
    assert abs(sum(noisy) / len(noisy) - recipe.target_noise) < 0.04


def test_recipes_without_hints_draw_exactly_as_before() -> None:
    task = TASKS.get("arithmetic")()
    draws, _, hint = _draws(PLAIN, 500)
    assert torch.equal(hint.get_state(), torch.Generator().manual_seed(2).get_state())  # never drawn from
    reference = torch.Generator().manual_seed(1)
    for ex, prompt, target in draws:  # the rule before hints existed: one noise draw per visit
        noisy = torch.rand((), generator=reference).item() < PLAIN.target_noise
        assert prompt == ex and target == (task.distractor(ex) if noisy else ex.answer)


def test_fingerprint_ignores_an_unset_hint_fraction() -> None:
    fields = dataclasses.asdict(PLAIN)
    del fields["hint_fraction"]
    before = json.dumps({**fields, "code_version": CODE_VERSION}, sort_keys=True)
    assert PLAIN.fingerprint() == hashlib.sha256(before.encode()).hexdigest()[:12]
    assert dataclasses.replace(PLAIN, hint_fraction=0.25).fingerprint() != PLAIN.fingerprint()
    assert HINT.fingerprint() != dataclasses.replace(HINT, hint_fraction=0.5).fingerprint()
    with pytest.raises(ValueError, match="hint_fraction"):
        dataclasses.replace(PLAIN, name="bad", hint_fraction=1.0)
