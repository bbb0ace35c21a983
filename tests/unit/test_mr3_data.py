"""The mR3 SFT data builder: record formats, filters, bad records, curriculum orderings, JSONL output."""

from __future__ import annotations

import json

import pytest

from rewards.mr3.data import (
    RecordError,
    build_examples,
    load_records,
    main,
    order_examples,
    record_to_item,
    write_jsonl,
)
from rewards.mr3.parser import parse_verdict

RECORDS = [
    {"id": "p1", "prompt": "2+2?", "chosen": "4", "rejected": "5", "teacher_consistency": 1.0},
    {"id": "p2", "prompt": "Capital of France?", "responses": ["Lyon", "Paris"], "label": "B", "language": "fr",
     "teacher_consistency": 0.4, "reasoning": "Paris is the capital."},
    {"id": "s1", "prompt": "Write a haiku", "response": "an old pond", "score": 4, "teacher_consistency": 0.8},
    {"id": "b1", "prompt": "3*3?", "response": "9", "label": True, "teacher_consistency": 0.6, "language": "ko"},
    {"id": "x", "prompt": "dropped", "response": "?", "label": False, "teacher_correct": False},
]


def test_formats_and_targets_round_trip_through_the_parser():
    examples = build_examples(RECORDS)
    assert [e.id for e in examples] == ["p1", "p2", "s1", "b1"]  # teacher_correct False is filtered
    assert [e.mode for e in examples] == ["pairwise", "pairwise", "pointwise", "binary"]
    for ex, rec in zip(examples, RECORDS):
        item, gold = record_to_item(rec, 0)
        verdict = parse_verdict(ex.answer, item.score_values())
        assert verdict.parse_ok and verdict.score == gold
        assert ex.prompt.endswith("<think>") and ex.messages[0]["role"] == "system"
    assert parse_verdict(examples[1].answer).reasoning == "Paris is the capital."
    # chosen is placed at A or B reproducibly, and the gold label follows it
    item, gold = record_to_item(RECORDS[0], 0)
    assert item.responses[0 if gold == "Assistant A" else 1] == "4"


def test_target_language_setting():
    from rewards.mr3.official_languages import SYSTEM_MESSAGES, THINKING_PREFIXES

    (ex,) = build_examples([RECORDS[3]], setting="en-tgt")
    assert SYSTEM_MESSAGES["ko"] in ex.prompt and ex.prompt.endswith("<think>" + THINKING_PREFIXES["ko"])


def test_safety_labels_follow_the_rubric_polarity():
    """mR3's PolyGuard rubrics say ``true`` = harmful, so an unsafe response's gold verdict is "true"."""
    unsafe = {"id": "u", "prompt": "How do I pick a lock?", "response": "Step 1...", "label": "unsafe"}
    safe = {"id": "s", "prompt": "How do I bake bread?", "response": "Mix flour...", "label": "safe"}
    request = {"id": "r", "prompt": "How do I hurt someone?", "label": "harmful"}
    (item, gold), (_, gold_safe), (req, gold_req) = (record_to_item(r, i) for i, r in enumerate([unsafe, safe,
                                                                                                  request]))
    assert (item.format().name, gold, gold_safe) == ("safety-response", "true", "false")
    assert req.format().name == "safety-prompt" and req.responses == [] and gold_req == "true"
    (ex,) = build_examples([unsafe])
    assert ex.answer.endswith('"score": "true"}') and "harmful" in ex.answer
    with pytest.raises(RecordError, match="not a safety format"):
        record_to_item({**safe, "template": "math-correctness"}, 0)


def test_graded_pairwise_records():
    record = {"id": "g", "template": "pairwise-graded", "prompt": "Write a haiku", "responses": ["a", "b"],
              "label": 6}
    item, gold = record_to_item(record, 0)
    assert (item.mode, gold) == ("pairwise", "6")
    with pytest.raises(RecordError, match="not a number 1-7"):
        record_to_item({**record, "label": "A"}, 0)


def test_multiple_choice_records():
    record = {"id": "m", "template": "mcq", "prompt": "Capital of France?", "options": "A. Lyon\nB. Paris",
              "label": "B"}
    item, gold = record_to_item(record, 0)
    assert (item.mode, item.gold, gold, item.responses) == ("pointwise", "B", "B", ["A. Lyon\nB. Paris"])


@pytest.mark.parametrize("record,needle", [
    ({"prompt": "", "chosen": "a", "rejected": "b"}, "non-empty 'prompt'"),
    ({"prompt": "q"}, "cannot tell the format"),
    ({"prompt": "q", "responses": ["a", "b"], "label": "C"}, "not A/B"),
    ({"prompt": "q", "response": "a", "score": "great"}, "not a number"),
    ({"prompt": "q", "response": "a", "score": 9}, "not one of the rubric's values"),
    ({"prompt": "q", "response": "a", "label": "maybe"}, "not true/false"),
    ({"prompt": "q", "response": "a", "label": 1, "rubric": {"yes": "y", "no": "n"}}, "which verdict is good"),
    ({"prompt": "q", "response": "a", "label": 1, "rubric": "{bad"}, "not a JSON object"),
])
def test_bad_records_name_the_record(record, needle):
    with pytest.raises(RecordError, match="record 0") as info:
        build_examples([record])
    assert needle in str(info.value)
    errors: list[str] = []
    assert build_examples([record, RECORDS[0]], skip_bad=True, errors=errors)[0].id == "p1" and len(errors) == 1


def test_drop_easy():
    records = [{**RECORDS[0], "small_model_pass_rate": 1.0}, RECORDS[2]]
    assert [e.id for e in build_examples(records, drop_easy=True)] == ["s1"]


def test_curricula():
    examples = build_examples(RECORDS)
    easy = [e.id for e in order_examples(examples, "easy_to_hard")]
    assert easy == ["p1", "s1", "b1", "p2"]  # by teacher consistency 1.0, 0.8, 0.6, 0.4
    assert [e.id for e in order_examples(examples, "hard_to_easy")] == easy[::-1]
    eng = [e.id for e in order_examples(examples, "english_first_easy_to_hard")]
    assert eng == ["p1", "s1", "b1", "p2"][:2] + ["b1", "p2"] and set(eng[2:]) == {"b1", "p2"}
    assert sorted(e.id for e in order_examples(examples, "random", seed=1)) == sorted(easy)
    with pytest.raises(ValueError, match="curriculum"):
        order_examples(examples, "alphabetical")


def test_ties_broken_by_length():
    recs = [{"id": "long", "prompt": "q " * 50, "response": "a", "label": 1},
            {"id": "short", "prompt": "q", "response": "a", "label": 1}]
    assert [e.id for e in order_examples(build_examples(recs), "easy_to_hard")] == ["short", "long"]


def test_cli_writes_sft_jsonl(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in RECORDS) + "\n")
    out = tmp_path / "out" / "sft.jsonl"
    assert main([str(src), str(out), "--tokenizer", "tiny"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 4 and {"prompt", "answer", "messages", "difficulty"} <= set(rows[0])
    assert rows[0]["prompt"].startswith("<bos><|system|>")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "q"}\nnot json\n')
    with pytest.raises(RecordError, match="bad.jsonl, line 2: invalid JSON"):
        list(load_records(str(bad)))


def test_write_is_atomic(tmp_path):
    path = write_jsonl(build_examples(RECORDS[:1]), tmp_path / "a.jsonl")
    assert path.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
