"""Text2Grad's critic evaluation (``rewards.text2grad.span_metrics``, ``rewards.text2grad.evaluate``): the chance
baselines, the ``incomplete`` flag and the verdict on hand-made labels whose values are computed here by hand."""

from __future__ import annotations

import pytest

from posttrain.tasks.span_feedback import SpanFeedback
from posttrain.tasks.step_arithmetic import program_feedback
from rewards.text2grad.evaluate import score_split
from rewards.text2grad.span_metrics import base_rates, chance_baselines, response_steps, span_metrics, verdict

PROBLEMS = ["1+1+1+1=", "1+1+1+1="]
RESPONSES = ["1+1=2,2+1=4,4+1=5", "1+1=2,2+1=3"]  # one wrong step (2+1=4); two right steps and one missing
GOLD = [program_feedback(p, r) for p, r in zip(PROBLEMS, RESPONSES)]


def test_labels_and_base_rates_by_hand():
    assert GOLD[0].poor == ("2+1=4",) and GOLD[0].good == ("1+1=2", "4+1=5") and not GOLD[0].incomplete
    assert GOLD[1].poor == () and GOLD[1].incomplete
    assert response_steps(" 1+1=2, ,2+1=3") == ["1+1=2", "2+1=3"]
    assert base_rates(GOLD) == {"poor_steps": 1 / 5, "incomplete": 1 / 2}  # 1 of 5 steps poor; 1 of 2 cut short


def test_all_good_baseline_by_hand():
    m = chance_baselines(GOLD, RESPONSES)["all_good"]
    # nothing predicted poor while 5 gold poor characters exist: precision 0 (the convention), recall 0
    assert m["poor"]["token"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    # good: 15 + 10 predicted characters, 10 + 10 of them gold good, every gold good character found
    assert m["good"]["token"]["precision"] == pytest.approx(20 / 25) and m["good"]["token"]["recall"] == 1.0
    assert m["incomplete"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0}  # never flags the cut-short answer


def test_incomplete_flag_precision_and_recall_by_hand():
    flags_both = [SpanFeedback("spans", incomplete=True), SpanFeedback("spans", incomplete=True)]
    m = span_metrics(flags_both, GOLD, RESPONSES)["incomplete"]
    assert m["precision"] == 0.5 and m["recall"] == 1.0 and m["f1"] == pytest.approx(2 / 3)
    assert span_metrics([None, None], GOLD, RESPONSES)["incomplete"]["recall"] == 0.0  # unparsable: no flag


def test_random_flagger_at_the_extremes_and_on_average():
    every_step_poor = [program_feedback("1+1+1+1=", "1+1=3,3+1=5,5+1=7")]  # base rate 1: flags everything poor
    rand = chance_baselines(every_step_poor, ["1+1=3,3+1=5,5+1=7"])["random"]
    assert rand["poor_probability"] == 1.0 and rand["poor"]["token"]["precision"] == 1.0
    assert rand["poor"]["token"]["recall"] == 1.0
    rand = chance_baselines(GOLD, RESPONSES, draws=4000, seed=1)["random"]
    assert rand["draws"] == 4000 and rand["poor_probability"] == 0.2 and rand["incomplete_probability"] == 0.5
    # the one poor step (5 characters) is flagged with probability 0.2: mean recall 0.2
    assert rand["poor"]["token"]["recall"] == pytest.approx(0.2, abs=0.03)
    # the cut-short answer is flagged with probability 0.5: mean incomplete recall 0.5
    assert rand["incomplete"]["recall"] == pytest.approx(0.5, abs=0.03)
    assert chance_baselines(GOLD, RESPONSES, draws=8) == chance_baselines(GOLD, RESPONSES, draws=8)  # seeded


def test_verdict_needs_precision_and_recall_above_the_random_flagger():
    chance = {"poor": {"token": {"precision": 0.30, "recall": 0.30}}}
    both = {"poor": {"token": {"precision": 0.40, "recall": 0.36}}}
    assert verdict(both, chance)["beats_chance"] is True
    one = {"poor": {"token": {"precision": 0.60, "recall": 0.33}}}  # recall only 0.03 above: not enough
    v = verdict(one, chance)
    assert v["beats_chance"] is False and v["margin"] == 0.05 and v["random_recall"] == 0.30


class StubCritic:
    """A critic that answers fixed feedback."""

    def __init__(self, answers: list[SpanFeedback | None]) -> None:
        self.answers = answers

    def feedback(self, problems, responses):
        return self.answers


def test_score_split_puts_the_critic_beside_its_baselines():
    split = score_split(StubCritic(list(GOLD)), PROBLEMS, RESPONSES, GOLD)  # a perfect critic
    assert split["poor"]["token"]["f1"] == 1.0 and split["incomplete"]["recall"] == 1.0
    assert split["base_rate"] == {"poor_steps": 0.2, "incomplete": 0.5}
    assert set(split["baselines"]) == {"all_good", "random"} and split["verdict"]["beats_chance"] is True
    silent = score_split(StubCritic([SpanFeedback("spans", good=tuple(response_steps(r))) for r in RESPONSES]),
                         PROBLEMS, RESPONSES, GOLD)
    assert silent["poor"] == split["baselines"]["all_good"]["poor"] and silent["verdict"]["beats_chance"] is False
