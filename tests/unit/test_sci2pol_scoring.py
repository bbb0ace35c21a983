"""Sci2Pol scoring: label extraction, micro-F1 and bootstrap SE against hand-computed values."""

import numpy as np
import pytest

from data_pipelines.sci2pol.bench import gold_label, score_tasks
from data_pipelines.sci2pol.scoring import bootstrap_se, extract_label, micro_f1


@pytest.mark.parametrize("response, labels, expected", [
    ("B", "ABCD", "B"),
    ("(c) because the methods follow", "ABCD", "C"),
    ("The answer is D.", "ABCD", "D"),
    ("I think so", "ABCD", None),
    ('```json\n{"verdict": "Unsupported"}\n```', ["Supported", "Unsupported"], "Unsupported"),
    ("The evidence does CONTRADICT it, not support", ["SUPPORT", "CONTRADICT", "NEI"], "CONTRADICT"),
    ("  true. ", ["True", "False"], "True"),
    ("no idea", ["True", "False"], None),
])
def test_extract_label(response, labels, expected):
    assert extract_label(response, list(labels)) == expected


def test_micro_f1_by_hand_counts_an_invalid_answer_as_a_wrong_label():
    gold = ["A", "B", "A", "C"]
    # TP=2 (items 0, 1); item 2 predicts C: FP 1 (C) + FN 1 (A); item 3 invalid (None): FP 1 + FN 1, as
    # sklearn's f1_score(average="micro") counts the invalid string: 2*2 / (2*2 + 2 + 2) = 0.5 = accuracy 2/4
    predicted = ["A", "B", "C", None]
    assert micro_f1(gold, predicted) == pytest.approx(0.5)
    # n = 2, one right, one invalid: 2*1 / (2*1 + 1 + 1) = 0.5 (counting the invalid one only as a false
    # negative gave 2 / 3, which no accuracy on 2 items can be)
    assert micro_f1(["A", "B"], ["A", None]) == pytest.approx(0.5)
    assert micro_f1(gold, gold) == 1.0 and micro_f1([], []) == 0.0
    with pytest.raises(ValueError):
        micro_f1(gold, predicted[:2])


def test_bootstrap_se_known_cases():
    assert bootstrap_se(5, lambda ix: 3.0) == 0.0
    values = np.array([0.0, 1.0])
    # the mean of a size-2 resample is 0, 1/2, 1 with probabilities 1/4, 1/2, 1/4: sd = sqrt(1/8)
    se = bootstrap_se(2, lambda ix: float(values[ix].mean()), resamples=4000)
    assert se == pytest.approx(np.sqrt(1 / 8), abs=0.02)
    assert bootstrap_se(2, lambda ix: float(values[ix].mean())) == bootstrap_se(2, lambda ix: float(values[ix].mean()))


def test_score_tasks_strict_robust_and_failures():
    rows = [{"task": "task18", "id": "a", "answer": '{"verdict": "Supported"}', "response": '{"verdict": "Supported"}'},
            {"task": "task18", "id": "b", "answer": '{"verdict": "Unsupported"}', "response": "Unsupported"},
            {"task": "task7", "id": "c", "answer": "", "response": "x", "score": 80.0, "judge_attempts": 1},
            {"task": "task7", "id": "d", "answer": "", "response": "y", "score": None, "judge_attempts": 3}]
    assert gold_label(rows[0]["answer"]) == "Supported"
    report = score_tasks(rows, resamples=50)
    t18, t7 = report["tasks"]["task18"], report["tasks"]["task7"]
    assert t18["strict"] == 50.0  # raw strings: a matches, b does not (a wrong label: 1 of 2)
    assert t18["robust"] == 100.0
    assert t7 == {**t7, "judged": 1, "judge_failures": 1, "score": 80.0, "judge_attempts": 4}
    assert report["stages"]["summarization"] == 80.0
    assert report["overall"] == pytest.approx((100.0 + 80.0) / 2)


def test_score_tasks_counts_rejected_items_in_n():
    """A refused item stays in its task's n: a wrong label (classification), unscored (judged)."""
    rows = [{"task": "task18", "id": "a", "answer": '{"verdict": "Supported"}', "response": "Supported"},
            {"task": "task7", "id": "c", "answer": "", "response": "x", "score": 80.0, "judge_attempts": 1}]
    rejected = [{"task": "task18", "id": "b", "answer": '{"verdict": "Unsupported"}'},
                {"task": "task7", "id": "d", "answer": ""}]
    t18, t7 = (score_tasks(rows, resamples=10, rejected=rejected)["tasks"][t] for t in ("task18", "task7"))
    assert (t18["n"], t18["rejected"], t18["robust"]) == (2, 1, 50.0)  # 1 right of 2: micro-F1 = accuracy
    assert t7 == {**t7, "n": 2, "rejected": 1, "judged": 1, "judge_failures": 0, "judge_calls": 1, "score": 80.0}
