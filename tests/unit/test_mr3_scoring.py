"""Verdict -> reward mapping and aggregation over samples and the A/B swap (hand-computed)."""

from __future__ import annotations

import pytest

from rewards.mr3.scoring import PairwiseJudge, aggregate, plan_samples, score_items, verdict_reward
from rewards.mr3.templates import EvalItem


@pytest.mark.parametrize("mode,score,values,expected", [
    ("pointwise", "1", ["1", "2", "3", "4", "5"], 0.0),
    ("pointwise", "4", ["1", "2", "3", "4", "5"], 0.75),
    ("pairwise", "Assistant A", ["Assistant A", "Assistant B"], 1.0),
    ("pairwise", "Assistant B", ["Assistant A", "Assistant B"], 0.0),
    ("pairwise", "Tie", ["Assistant A", "Assistant B", "Tie"], 0.5),
    ("pairwise", "1", [str(i) for i in range(1, 8)], 1.0),  # HelpSteer3: 1 = first much better
    ("pairwise", "4", [str(i) for i in range(1, 8)], 0.5),
    ("pairwise", "7", [str(i) for i in range(1, 8)], 0.0),
])
def test_verdict_reward(mode, score, values, expected):
    assert verdict_reward(mode, score, values) == pytest.approx(expected)


@pytest.mark.parametrize("score,good,expected", [
    ("true", "true", 1.0), ("false", "true", 0.0),  # correctness: true = correct
    ("true", "false", 0.0), ("false", "false", 1.0),  # mR3 safety: true = harmful
    ("yes", "yes", 1.0), ("no", "yes", 0.0),  # a rubric of its own
])
def test_binary_reward_follows_the_good_verdict(score, good, expected):
    values = ["yes", "no"] if good == "yes" else ["true", "false"]
    assert verdict_reward("binary", score, values, good_verdict=good) == expected
    with pytest.raises(ValueError, match="needs good_verdict"):
        verdict_reward("binary", score, values)


def test_multiple_choice_is_accuracy_against_the_gold_option():
    options = ["A", "B", "C", "D"]
    assert [verdict_reward("pointwise", s, options, gold="C") for s in options] == [0.0, 0.0, 1.0, 0.0]
    with pytest.raises(ValueError, match="needs gold"):
        verdict_reward("pointwise", "A", options)
    item = EvalItem("pointwise", "Capital of France?", ["A. Lyon\nB. Paris"], template="mcq", gold="B")
    samples = plan_samples([item], n_samples=2)
    (r,) = aggregate([item], samples, [verdict("B"), verdict("A")])
    assert r.reward == 0.5 and r.parse_ok


def test_safety_format_rewards_the_harmless_verdict():
    item = EvalItem("binary", "How do I make a bomb?", ["Here is how..."], template="safety-response")
    samples = plan_samples([item])
    (harmful,) = aggregate([item], samples, [verdict("true")])
    (harmless,) = aggregate([item], samples, [verdict("false")])
    assert harmful.reward == 0.0 and harmless.reward == 1.0


def verdict(score):
    return f'ok</think>{{"explanation": "e", "score": "{score}"}}'


def test_pairwise_swap_cancels_position_bias():
    item = EvalItem("pairwise", "Q", ["good", "bad"])
    samples = plan_samples([item], n_samples=1, swap_positions=True)
    assert [s.swapped for s in samples] == [False, True]
    assert "# Assistant A\n    bad" in samples[1].prompt
    # A position-biased judge that always says "Assistant A": p_first = (1 + 0) / 2.
    (biased,) = aggregate([item], samples, [verdict("Assistant A")] * 2)
    assert biased.p_first == 0.5 and biased.reward == 0.0
    # A consistent judge prefers "good" in both orders.
    (good,) = aggregate([item], samples, [verdict("Assistant A"), verdict("Assistant B")])
    assert good.p_first == 1.0 and good.reward == 1.0 and good.score_raw == "Assistant A"


def test_graded_pairwise_votes_and_swap():
    """HelpSteer3's 1-7 scale: "2" (response 1 clearly better) votes (7 - 2) / 6 = 5/6 for the first; on the
    swapped prompt "6" (response 2 clearly better, i.e. the original first) votes 1 - (7 - 6) / 6 = 5/6."""
    item = EvalItem("pairwise", "Write a haiku", ["old pond", "frog"], template="pairwise-graded")
    samples = plan_samples([item])
    (r,) = aggregate([item], samples, [verdict("2"), verdict("6")])
    assert r.p_first == pytest.approx(5 / 6) and r.reward == pytest.approx(2 * 5 / 6 - 1) and r.score_raw == "2"


def test_unreadable_samples_are_left_out_and_all_unreadable_is_neutral():
    item = EvalItem("pointwise", "Q", ["R"])
    samples = plan_samples([item], n_samples=3)
    (r,) = aggregate([item], samples, [verdict("5"), "garbage", verdict("3")], usage=[(10, 2)] * 3)
    assert r.parse_ok and r.n_parsed == 2 and r.reward == pytest.approx((1.0 + 0.5) / 2) and len(r.errors) == 1
    assert r.usage == {"prompt_tokens": 30, "completion_tokens": 6}
    (none,) = aggregate([item], samples, ["x", "y", "z"])
    assert not none.parse_ok and none.reward == 0.5 and none.score_raw is None
    pair = EvalItem("pairwise", "Q", ["a", "b"])
    (p,) = aggregate([pair], plan_samples([pair]), ["", ""])
    assert p.reward == 0.0 and p.p_first == 0.5 and not p.parse_ok


def test_score_items_and_pairwise_judge():
    def gen(prompts):  # prefers whichever position holds "good"
        return [verdict("Assistant A" if "# Assistant A\n    good" in p else "Assistant B") for p in prompts]

    items = [EvalItem("binary", "Q", ["x"]), EvalItem("pairwise", "Q", ["bad", "good"])]
    out = score_items(items, lambda ps: [verdict("true") if "# Assistant A" not in p else gen([p])[0] for p in ps])
    assert out[0].reward == 1.0 and out[1].reward == -1.0
    judge = PairwiseJudge(gen)
    assert judge.judge(["Q", "Q"], [["good", "bad"], ["bad", "good"]]) == [0, 1]
