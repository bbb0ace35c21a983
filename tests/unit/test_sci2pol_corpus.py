"""Sci2Pol pair miner: citation filter, executive-summary split, split similarity, judge passes, polishing."""

from data_pipelines.common.runner import Reject
from data_pipelines.sci2pol.corpus import (
    RELEVANCE_SCHEMA,
    candidate_pairs,
    jaccard,
    make_judge_stage,
    make_polish_stage,
    parse_relevance,
    split_long,
)
from data_pipelines.sci2pol.embedded import STYLE_EXAMPLES, corpus_inputs
from tests.unit.test_sci2pol_judge import ScriptedEngine


def _pairs():
    docs, papers = corpus_inputs()
    return candidate_pairs(docs, {p["paper_id"]: p for p in papers}, max_citations=3)


def test_citation_filter_expands_and_rejects():
    pairs, rejects = _pairs()
    assert [p["pair_id"] for p in pairs] == ["D0:P0", "D1:P1", "D4:P2", "D5:P3"]
    assert rejects == [{"policy_id": "D2", "reason": "cites 4 papers > max 3"},
                       {"policy_id": "D3", "reason": "none of the cited papers ['P404'] is in the paper table"}]
    _, bad = candidate_pairs([{"policy_id": "X", "text": " ", "cited_papers": ["P0"]}], {}, 3)
    assert bad == [{"policy_id": "X", "reason": "field 'text' missing or empty"}]


def test_executive_summary_split_and_similarity():
    pairs, _ = _pairs()
    assert split_long(pairs[0], 3000) == {**pairs[0], "split": False}
    split = split_long(pairs[2], 3000)
    assert split["split"] and split["brief_raw"].startswith("Policy problem:")
    assert split["paper_text"].startswith("Full Report")
    no_summary = split_long(pairs[3], 3000)
    assert isinstance(no_summary, Reject) and "without an executive summary" in no_summary.reason
    assert jaccard("a b c d e f", "a b c d e f") == 1.0 and jaccard("a b c d e", "v w x y z") == 0.0


def test_judge_passes_and_polish_with_a_scripted_engine():
    pairs, _ = _pairs()
    assert parse_relevance('{"relevant": true}') and not parse_relevance("{'relevant': False}")
    # coarse: D0 relevant, D1 unparsable twice (retries=1), D4 not relevant, D5 relevant
    judge = ScriptedEngine(['{"relevant": true}', "maybe", "perhaps", '{"relevant": false}', '{"relevant": true}'])
    coarse = make_judge_stage(lambda: judge, "scripted", "coarse", retries=1)(pairs)
    assert coarse[0]["filter_verdicts"] == {"coarse": {"relevant": True, "attempts": 1}}
    assert coarse[1].reason == "coarse judge output unparsable after 2 attempts"
    assert coarse[2].reason == "coarse judge: document is not about the paper"
    assert {p.json_schema for p in judge.params} == {RELEVANCE_SCHEMA}
    fine = make_judge_stage(lambda: ScriptedEngine(['{"relevant": true}']), "scripted", "fine", retries=0,
                            long_chars=3000, max_split_similarity=0.5)([coarse[0], coarse[3]])
    assert "without an executive summary" in fine[1].reason
    free = ScriptedEngine([" true}"])  # the ablation: free text after a prefilled '{"relevant":'
    assert make_judge_stage(lambda: free, "scripted", "coarse", retries=0, structured=False)(pairs[:1])[0][
        "filter_verdicts"]["coarse"]["relevant"]
    assert free.params[0].json_schema is None and free.prompts[0].endswith('{"relevant":')
    polished = make_polish_stage(lambda: ScriptedEngine(["Policy problem: bills."]), "scripted",
                                 STYLE_EXAMPLES, 16)([fine[0]])[0]
    assert polished["answer"] == polished["brief_polished"] == "Policy problem: bills."
    assert polished["prompt"].endswith(polished["paper_text"])
    assert polished["models"] == {"coarse_judge": "scripted", "fine_judge": "scripted", "polisher": "scripted"}
    assert make_polish_stage(lambda: ScriptedEngine(["  "]), "s", STYLE_EXAMPLES, 16)([fine[0]])[0].reason == \
        "polishing produced an empty brief"
