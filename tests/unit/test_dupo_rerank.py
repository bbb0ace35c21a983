"""DuPO reranking (posttrain.algos.dupo.rerank) through a scripted engine: choices and accuracies by hand."""

from __future__ import annotations

import pytest

from posttrain.algos.dupo.rerank import (
    choose,
    majority,
    rerank_choice,
    sample_solutions,
    score_answers,
    summarise,
)
from posttrain.engines.base import SamplingParams
from posttrain.tasks.base import Example
from posttrain.tasks.word_arithmetic import WordArithmeticTask
from tests.unit.test_dupo_reward import PROBLEM, ScriptedEngine, inverse_of_addition

GREEDY = SamplingParams(max_new_tokens=4, temperature=0.0)


def test_choose_prefers_score_then_agreement_then_order() -> None:
    assert choose(["5", "6", "6"], {"5": 1.0, "6": 0.5}) == 0
    assert choose(["5", "6", "6"], {"5": 0.5, "6": 0.5}) == 1
    assert choose(["5", None, "6"], {"5": 0.5, "6": 0.5}) == 0
    assert majority(["8", "7", "8"]) == 0 and majority([None, "3"]) == 1 and majority([None]) == 0


def test_rerank_picks_the_answer_the_dual_confirms_over_the_majority() -> None:
    examples = [Example(PROBLEM, "7"), Example("How many pens does Ann have?", "3")]
    engine = ScriptedEngine(inverse_of_addition, primal=["8", "7", "8", "x", "3", "3", "2", "3"])
    samples = sample_solutions(engine, examples, 4, GREEDY)
    assert samples == [["8", "7", "8", "x"], ["3", "3", "2", "3"]]
    scores = score_answers(engine, examples, samples, k=1, dual_params=GREEDY, max_questions=3)
    assert scores == [{"7": 1.0, "8": 0.0}, None]  # the second problem has no number to hide
    choices = [rerank_choice(s, sc, 4) for s, sc in zip(samples, scores)]
    assert choices[0].chosen == 1 and choices[0].scored
    assert choices[1].chosen == 0 and not choices[1].scored
    summary = summarise(WordArithmeticTask(), examples, choices)
    assert summary == pytest.approx({"single_sample_accuracy": (1 / 4 + 3 / 4) / 2, "majority_accuracy": 0.5,
                                     "rerank_accuracy": 1.0, "pass_at_n": 1.0, "unscored_fraction": 0.5,
                                     "questions": 2.0})


def test_rerank_of_fewer_samples_uses_only_their_answers() -> None:
    choice = rerank_choice(["8", "8", "7"], {"7": 1.0, "8": 0.0}, n=2)
    assert choice.samples == ["8", "8"] and choice.scores == {"8": 0.0} and choice.chosen == 0
    assert not rerank_choice(["x", "7"], {"7": 1.0}, n=1).scored
