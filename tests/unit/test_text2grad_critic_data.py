"""The span critic's training data (``rewards.text2grad.tiny``): the poor-span weights on its targets and the mix
of noisy responses with the policy's own samples."""

from __future__ import annotations

import pytest

from posttrain.models.tiny import RECIPES, build_tokenizer
from posttrain.tasks.base import Example
from posttrain.tasks.step_arithmetic import feedback_example
from rewards.text2grad.tiny import POLICY_SHARE, POOR_WEIGHT, mixed_examples, poor_span_weights


def test_poor_span_weights_cover_the_poor_field_and_the_incomplete_flag():
    answer = feedback_example("1+1+1+1=", "1+1=2,2+1=4").answer  # 2+1=4 wrong, one step missing
    ids = build_tokenizer()(answer, add_special_tokens=False)["input_ids"] + [0]
    weights = poor_span_weights(answer, ids)
    start = answer.index('"poor_spans":')
    assert len(weights) == len(answer) + 1 and weights[-1] == 1.0  # EOS
    assert set(weights[:start]) == {1.0} and set(weights[start:-1]) == {POOR_WEIGHT}
    assert '"incomplete":true' in answer[start:]
    with pytest.raises(ValueError, match="one token per character"):
        poor_span_weights(answer, ids[:-2])


def test_mixed_examples_draw_the_policy_share_seeded():
    noisy = [Example(prompt=f"n{i}", answer="") for i in range(10)]
    policy = [Example(prompt=f"p{i}", answer="") for i in range(10)]
    mixed = mixed_examples(noisy, policy, 4000, seed=0)
    share = sum(e.prompt.startswith("p") for e in mixed) / len(mixed)
    assert share == pytest.approx(POLICY_SHARE, abs=0.03) and mixed == mixed_examples(noisy, policy, 4000, seed=0)


def test_the_critic_recipe_was_bumped():
    recipe = RECIPES.get("reward-text2grad")
    assert recipe.data_version == 2 and recipe.warm_start == "rewards.text2grad.tiny:warm_start"
    assert RECIPES.get("reward-text2grad-nocritique").data_version == 2  # the ablation shares the warm start


def test_sft_warm_start_trains_on_given_examples_with_their_target_weights():
    import dataclasses

    import torch

    from posttrain.algos.warm_start import sft_warm_start
    from posttrain.models.tiny import build_model

    recipe = dataclasses.replace(RECIPES.get("reward-text2grad"), warm_start_steps=2, batch_size=2)
    tokenizer = build_tokenizer()
    examples = [feedback_example("1+1+1+1=", "1+1=2,2+1=4,4+1=5")]

    def trained(weights) -> bool:
        model = build_model(recipe, tokenizer)
        before = [p.detach().clone() for p in model.parameters()]
        sft_warm_start(model, tokenizer, recipe, torch.Generator().manual_seed(0), examples=examples,
                       target_weights=weights)
        return any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))

    assert not trained(lambda answer, ids: [0.0] * len(ids))  # every token weighs 0: nothing learnt
    assert trained(poor_span_weights)
    with pytest.raises(ValueError, match="target_weights gave 1 weights"):
        trained(lambda answer, ids: [1.0])
