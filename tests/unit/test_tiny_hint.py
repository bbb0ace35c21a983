"""The hinted warm start (``TinyRecipe.hint_fraction`` / ``hint_template``): GPO's guider prompt mixed into
the SFT data, the arithmetic task's compensation hint, and ``--algo gpo``'s embedded default."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest
import torch

from posttrain.algos.gpo.hint import HINT_RECIPE, PRIVILEGED_TEMPLATE, privileged_examples
from posttrain.algos.gpo.llm import GPOConfig
from posttrain.algos.pg import GRPOConfig
from posttrain.algos.warm_start import sft_warm_start_pair
from posttrain.models.tiny import CODE_VERSION, FORMER_WARM_STARTS, RECIPES, TinyRecipe, default_recipe_for
from posttrain.tasks import TASKS
from posttrain.tasks.arithmetic import compensation_hint
from posttrain.tasks.base import Example

HINT = RECIPES.get(HINT_RECIPE)
PLAIN = RECIPES.get("causal-arithmetic")


def _draws(recipe: TinyRecipe, n: int) -> tuple[list, torch.Generator, torch.Generator]:
    task = TASKS.get("arithmetic")()
    examples = task.split("train")
    noise, hint = torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)
    picks = [examples[i % len(examples)] for i in range(n)]
    return [(ex, *sft_warm_start_pair(task, ex, recipe, noise, hint)) for ex in picks], noise, hint


def test_hint_recipe_is_gpos_default_and_only_gpos() -> None:
    assert HINT.task == "arithmetic" and HINT.kind == "causal" and 0 < HINT.hint_fraction < 1
    assert HINT.hint_template == PRIVILEGED_TEMPLATE == GPOConfig(algo="gpo").privileged_template
    assert HINT.target_noise == PLAIN.target_noise and PLAIN.hint_fraction == 0 and not PLAIN.hint_template
    assert default_recipe_for("arithmetic") == "causal-arithmetic"
    assert GRPOConfig().tiny_recipe("causal") == "causal-arithmetic"
    # --algo gpo with no --model starts from the warm start that has seen its guider's prompts
    assert GPOConfig(algo="gpo").tiny_recipe("causal") == HINT_RECIPE
    assert GPOConfig(algo="gpo", task="sudoku").tiny_recipe("causal") == "causal-sudoku"


@pytest.mark.parametrize("a,op,b,hint,answer", [(23, "+", 7, "23+8=31", 30), (3, "-", 5, "3-6=-3", -2),
                                                (0, "-", 0, "0-1=-1", 0), (19, "+", 19, "19+20=39", 38)])
def test_compensation_hint_by_hand(a: int, op: str, b: int, hint: str, answer: int) -> None:
    assert compensation_hint(a, op, b) == hint
    assert int(hint.split("=")[1]) == answer + (1 if op == "+" else -1)
    with pytest.raises(ValueError, match="op"):
        compensation_hint(1, "*", 2)


def test_arithmetic_hints_never_state_the_answer() -> None:
    task = TASKS.get("arithmetic")()
    examples = task.split("train") + task.split("test")
    for ex in examples:
        rendered = privileged_examples([ex])[0].prompt
        assert rendered == f"{ex.prompt}\nHint: {ex.columns['hint']}."
        left, value = ex.columns["hint"].split("=")
        assert left != ex.prompt[:-1] and abs(int(value) - int(ex.answer)) == 1


def test_dataset_columns_named_prompt_or_answer_do_not_clash() -> None:
    """The example's own prompt and answer fill {prompt} and {answer}, whatever its columns are called."""
    ex = Example(prompt="2+2=", answer="4", columns={"prompt": "raw", "answer": "four", "hint": "2+3=5"})
    assert privileged_examples([ex])[0].prompt == "2+2=\nHint: 2+3=5."
    assert privileged_examples([ex], "{prompt}|{answer}")[0].prompt == "2+2=|4"
    with pytest.raises(ValueError, match="column 'hint'.*prompt '1\\+1='"):
        privileged_examples([Example(prompt="1+1=", answer="2", columns={"answer": "2"})])


def test_hinted_pairs_use_the_gpo_template_and_clean_targets() -> None:
    task = TASKS.get("arithmetic")()
    recipe = dataclasses.replace(HINT, hint_fraction=0.3)
    draws, _, _ = _draws(recipe, 4000)
    hinted = [(ex, prompt, target) for ex, prompt, target in draws if prompt.prompt != ex.prompt]
    plain = [(ex, target) for ex, prompt, target in draws if prompt.prompt == ex.prompt]
    assert abs(len(hinted) / len(draws) - 0.3) < 0.03
    for ex, prompt, target in hinted:
        assert prompt == privileged_examples([ex])[0]
        assert prompt.prompt == PRIVILEGED_TEMPLATE.format(prompt=ex.prompt, hint=ex.columns["hint"])
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


def test_fingerprint_ignores_unset_hint_fields() -> None:
    fields = dataclasses.asdict(PLAIN)
    del fields["hint_fraction"], fields["hint_template"], fields["data_version"]
    fields["warm_start"] = "posttrain.models.tiny:sft_warm_start"  # where the warm start lived: the key stays
    before = json.dumps({**fields, "code_version": CODE_VERSION}, sort_keys=True)
    assert PLAIN.fingerprint() == hashlib.sha256(before.encode()).hexdigest()[:12]
    hinted = dataclasses.replace(PLAIN, hint_fraction=0.25, hint_template=PRIVILEGED_TEMPLATE)
    assert hinted.fingerprint() != PLAIN.fingerprint()
    assert HINT.fingerprint() != dataclasses.replace(HINT, hint_fraction=0.5).fingerprint()
    # a new hint template is a new warm start, so a new cache key
    assert HINT.fingerprint() != dataclasses.replace(HINT, hint_template="{prompt} ({hint})").fingerprint()
    with pytest.raises(ValueError, match="hint_fraction"):
        dataclasses.replace(PLAIN, name="bad", hint_fraction=1.0)


def test_moved_warm_starts_keep_their_cache_keys() -> None:
    for new, former in FORMER_WARM_STARTS.items():
        assert dataclasses.replace(PLAIN, warm_start=new).fingerprint() == \
            dataclasses.replace(PLAIN, warm_start=former).fingerprint()
    assert dataclasses.replace(PLAIN, warm_start="elsewhere:other").fingerprint() != PLAIN.fingerprint()
    with pytest.raises(ValueError, match="set together"):
        dataclasses.replace(PLAIN, name="bad", hint_template=PRIVILEGED_TEMPLATE)
    with pytest.raises(ValueError, match="set together"):
        dataclasses.replace(PLAIN, name="bad", hint_fraction=0.2)
