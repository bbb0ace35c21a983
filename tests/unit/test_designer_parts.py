"""DESIGNER's pure parts: 3:2:1 sampling and its shortfall report, the demo caps and per-stage models, the
Mermaid validator, logic dedup, 13-gram decontamination, structured-output parsing."""

from __future__ import annotations

import random

import numpy as np
import pytest

from data_pipelines.designer.filtering import Decontaminator, word_ngrams
from data_pipelines.designer.logic_dedup import UnionFind, dedup_logics, medoid, threshold_edges
from data_pipelines.designer.mermaid import MermaidError, extract_flowchart, parse_flowchart
from data_pipelines.designer.sampling import ratio_quota, ratio_shortfall, sample_cluster, sample_seeds
from data_pipelines.designer.structured import InvalidOutput, check_multiple_choice, parse_json_object


def test_ratio_quota_is_3_2_1() -> None:
    assert ratio_quota(6) == {"Very Hard": 3, "Hard": 2, "Medium": 1}
    assert ratio_quota(12) == {"Very Hard": 6, "Hard": 4, "Medium": 2}
    assert ratio_quota(1) == {"Very Hard": 1, "Hard": 0, "Medium": 0}
    assert sum(ratio_quota(7).values()) == 7


def test_sample_cluster_draws_at_the_ratio_and_fills_shortfalls_with_easier() -> None:
    levels = ["Very Hard"] * 5 + ["Hard"] * 5 + ["Medium"] * 5 + ["Easy"] * 5
    picked = [levels[i] for i in sample_cluster(levels, 6, random.Random(0))]
    assert sorted(picked) == sorted(["Very Hard"] * 3 + ["Hard"] * 2 + ["Medium"])
    short = ["Very Hard"] + ["Hard"] * 4 + ["Medium"] * 4 + ["Easy"] * 2
    picked = [short[i] for i in sample_cluster(short, 6, random.Random(0))]
    # 1 Very Hard; its missing 2 pass to Hard (2 + 2 = 4); Medium keeps its 1
    assert sorted(picked) == sorted(["Very Hard"] + ["Hard"] * 4 + ["Medium"])
    only_easy = ["Easy", "Easy", "Medium"]
    assert sorted(only_easy[i] for i in sample_cluster(only_easy, 6, random.Random(0))) == ["Easy", "Easy", "Medium"]
    with pytest.raises(ValueError, match="difficulty 'Tricky'"):
        sample_cluster(["Tricky"], 1, random.Random(0))


def test_ratio_shortfall_by_hand() -> None:
    full = ["Very Hard"] * 3 + ["Hard"] * 2 + ["Medium"]
    assert ratio_shortfall(full, 6) == {}
    # quota of 6 is 3:2:1; no Very Hard at all, one Hard: short 3 and 1
    assert ratio_shortfall(["Hard"] + ["Medium"] * 5, 6) == {"Very Hard": 3, "Hard": 1}
    # 2 questions: quota Very Hard 1, Hard 1 (largest remainders), Medium 0; Easy never has a quota
    assert ratio_shortfall(["Easy", "Medium"], 6) == {"Very Hard": 1, "Hard": 1}
    assert ratio_shortfall([], 6) == {}


def test_sample_seeds_lists_the_clusters_that_miss_the_ratio() -> None:
    records = ([{"discipline": "Physics", "difficulty": lv} for lv in ["Very Hard"] * 3 + ["Hard"] * 2 + ["Medium"]]
               + [{"discipline": "Biology", "difficulty": lv} for lv in ["Medium"] * 3 + ["Easy"] * 3])
    vectors = np.zeros((len(records), 2), dtype=np.float32)
    seeds, shortfalls = sample_seeds(records, vectors, per_cluster=6, k_max=1)
    assert len(seeds) == 12 and {s["cluster"] for s in seeds} == {"Physics/0", "Biology/0"}
    assert shortfalls == [{"cluster": "Biology/0", "size": 6, "quota": {"Very Hard": 3, "Hard": 2, "Medium": 1},
                           "short": {"Very Hard": 3, "Hard": 2}}]


def _designer_config(*argv: str):
    import argparse

    from data_pipelines.designer.options import DesignerConfig, add_designer_args

    parser = argparse.ArgumentParser()
    add_designer_args(parser)
    return DesignerConfig.from_args(parser.parse_args(list(argv)))


def test_demo_caps_apply_to_the_built_in_inputs_only() -> None:
    from data_pipelines.designer.options import DEMO_CAPS, INPUT_DEFAULTS

    demo = _designer_config()
    assert demo.demo_caps == ("--max-questions 24", "--k-max 3", "--max-segments 12")
    assert {k: getattr(demo, k) for k in DEMO_CAPS} == DEMO_CAPS
    user = _designer_config("--input", "bank.jsonl", "--sources", "src.jsonl")
    assert user.demo_caps == ()
    assert {k: getattr(user, k) for k in DEMO_CAPS} == INPUT_DEFAULTS == {"max_questions": 0, "max_segments": 0,
                                                                          "k_max": 8}
    mixed = _designer_config("--input", "bank.jsonl", "--max-questions", "5")  # built-in sources: segments capped
    assert mixed.demo_caps == ("--max-segments 12",) and (mixed.max_questions, mixed.k_max) == (5, 8)
    with pytest.raises(ValueError, match="--k-max must be >= 0"):
        _designer_config("--k-max", "-1")


def test_each_stage_takes_its_own_model_defaulting_to_model() -> None:
    from data_pipelines.designer.run import stage_engines

    config = _designer_config("--model", "m", "--answer-model", "long-cot", "--annotate-model", "small")
    assert stage_engines(config, config.model) == {"annotate": "small", "extract": "m", "generate": "m",
                                                   "answer": "long-cot"}
    given = {"annotate": "a", "extract": "e", "generate": "g", "answer": "r"}
    assert stage_engines(config, given) == given
    with pytest.raises(ValueError, match=r"no engine for \['answer'\]"):
        stage_engines(config, {k: v for k, v in given.items() if k != "answer"})


GOOD = """flowchart TD
    A[Pick a law] --> B[Set up values]
    B -->|hide one| C{Which unknown?}
    C -- force --> D((Ask for force))
    C -.-> E["Ask for (mass)"]; E ==> F
    %% a comment
    subgraph check
    direction LR
    F --- G([Validate])
    end
    classDef hard fill:#f96
"""


def test_mermaid_accepts_a_good_chart() -> None:
    chart = parse_flowchart(GOOD)
    assert chart.direction == "TD" and set(chart.nodes) == set("ABCDEFG")
    assert chart.nodes["E"] == "Ask for (mass)" and chart.nodes["F"] == "F"
    assert ("B", "C", "hide one") in chart.edges and ("C", "D", "force") in chart.edges and len(chart.edges) == 6


@pytest.mark.parametrize("bad, message", [
    ("A[x] --> B[y]", "expected 'flowchart"),
    ("flowchart XY\nA --> B", "expected 'flowchart"),
    ("flowchart TD\nA[x] -> B[y]", "expected a link"),
    ("flowchart TD\nA[x --> B[y]", "label"),
    ("flowchart TD\nA[x] -->", "link without a target"),
    ("flowchart TD\nA[only]", "at least 2"),
    ("flowchart TD\nA[one]\nB[two]", "no edges"),
    ("flowchart TD\nA[x] --> B[y]\nA[z] --> B", "relabeled"),
    ("flowchart TD\nsubgraph s\nA --> B", "without 'end'"),
    ("flowchart TD\nThe designer first picks a law --> B", "expected a link"),
])
def test_mermaid_rejects_bad_charts(bad: str, message: str) -> None:
    with pytest.raises(MermaidError, match=message):
        parse_flowchart(bad)


def test_extract_flowchart_stops_at_the_fence_or_a_blank_line() -> None:
    reply = "Sure:\n```mermaid\nflowchart TD\n    A[x] --> B[y]\n```\nThis chart shows..."
    assert extract_flowchart(reply) == "flowchart TD\n    A[x] --> B[y]"
    assert extract_flowchart("graph LR\nA-->B\n\nNote: done") == "graph LR\nA-->B"
    with pytest.raises(MermaidError, match="no 'flowchart'"):
        extract_flowchart("no chart here")


def test_logic_dedup_components_and_medoids_by_hand() -> None:
    # group g: a (0), b (1), c (2) chain: cos(a,b)=0.9, cos(b,c)=0.9, cos(a,c)=0.62 -> one component via b
    # plus an unrelated d (3); group h: e (4) identical to a but in another group, so never joined
    angle = np.arccos(0.9)
    a, b, c = (np.array([np.cos(t), np.sin(t), 0.0]) for t in (0.0, angle, 2 * angle))
    d = np.array([0.0, 0.0, 1.0])
    vectors = np.stack([a, b, c, d, a])
    keep, dropped = dedup_logics(vectors, ["g", "g", "g", "g", "h"], tau=0.85)
    assert keep == [1, 3, 4] and dropped == {0: 1, 2: 1}  # b has the largest summed similarity (1.8)
    assert medoid(vectors, [0, 1, 2]) == 1
    assert sorted(threshold_edges(vectors[:4], 0.9)) == [(0, 1), (1, 2)]  # >= tau: ties count


def test_union_find_components() -> None:
    forest = UnionFind(6)
    for x, y in ((0, 2), (4, 5), (2, 3)):
        forest.union(x, y)
    assert forest.components() == [[0, 2, 3], [1], [4, 5]]


def test_13gram_decontamination() -> None:
    benchmark = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
    decon = Decontaminator([benchmark])
    assert decon.hit("Prefix: ONE two three four five six seven eight nine ten eleven twelve thirteen!") == (
        "one two three four five six seven eight nine ten eleven twelve thirteen")
    assert decon.hit("two three four five six seven eight nine ten eleven twelve thirteen fourteen") is not None
    assert decon.hit("one two three four five six seven eight nine ten eleven twelve fourteen") is None
    assert word_ngrams("a b c", 13) == set()


def test_decontamination_names_the_first_shared_ngram_in_reading_order() -> None:
    """A reject's reason quotes the first shared n-gram of the text, whatever the process's string hashing
    (picked from a set, a SIGKILLed and resumed run wrote another reason than the uninterrupted one)."""
    words = [f"w{i}" for i in range(40)]
    decon = Decontaminator([" ".join(words)], n=3)
    assert decon.hit("Q: " + " ".join(words[5:])) == "w5 w6 w7"


def test_json_and_multiple_choice_checks() -> None:
    assert parse_json_object('{"a": "x"} trailing words') == {"a": "x"}
    with pytest.raises(InvalidOutput, match="not valid JSON"):
        parse_json_object('{"a": "x')
    check_multiple_choice("Which? A) one B) two C) three", "B")
    with pytest.raises(InvalidOutput, match="without options"):
        check_multiple_choice("Which gas is inert?", "A")
    with pytest.raises(InvalidOutput, match="not one of the options"):
        check_multiple_choice("Which? A) one B) two", "D) four")
