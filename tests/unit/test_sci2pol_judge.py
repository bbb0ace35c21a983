"""Sci2Pol judge: score formulas by hand, the rubric schemas, JSON validation, bounded retries counted (schema-
constrained and free-text judges), release-folder loading."""

import json

import pytest

from data_pipelines.sci2pol.bench import (
    load_bench,
    make_generate_stage,
    make_judge_stage,
    paper_of,
    release_papers,
    score_tasks,
)
from data_pipelines.sci2pol.judge import (
    TASK11_COMPONENTS,
    judge_prompt,
    parse_judgement,
    rubric_schema,
    task_score,
)
from posttrain.engines.base import Rollouts, SamplingParams
from posttrain.models.tiny import build_tokenizer


class ScriptedEngine:
    """A generation engine (protocol only) answering each call with the next scripted text."""

    def __init__(self, outputs: list[str]) -> None:
        self.tokenizer = build_tokenizer()
        self.outputs = iter(outputs)
        self.calls = 0
        self.params: list[SamplingParams] = []
        self.prompts: list[str] = []

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts:
        self.calls += len(prompt_ids)
        self.params.append(params)
        self.prompts += self.tokenizer.batch_decode(prompt_ids)
        texts = [next(self.outputs) for _ in prompt_ids]
        ids = [self.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        return Rollouts(prompt_ids=prompt_ids, completion_ids=ids, texts=texts,
                        logprobs=[[0.0] * len(i) for i in ids], finish_reasons=["stop"] * len(ids))


def test_score_formulas_by_hand():
    assert task_score("task7", {"task7": {"clarity": 4, "accuracy": 3, "coverage": 5, "overall": 4}}) == 80
    importance = dict(zip(TASK11_COMPONENTS, [1.0, 0.5, 0.0, 1.0, 0.5]))
    quality = dict(zip(TASK11_COMPONENTS, [0.5, 1.0, 1.0, 0.0, 1.0]))
    # (0.5 + 0.5 + 0 + 0 + 0.5) / 5 * 100
    assert task_score("task11", {"task11_importance": importance, "task11_quality": quality}) == pytest.approx(30)
    assert task_score("task12", {"task12": dict.fromkeys("abcde", 0.5)}) == pytest.approx(50)
    assert task_score("task13", {"task13": {"clarity": 1, "technicality": 0.5, "terms": 0}}) == pytest.approx(60)
    assert task_score("task14", {"task14": {"a": 1, "b": 1, "c": 0, "d": 0.5}}) == pytest.approx(62.5)
    assert task_score("task15", {"task15": {"a": 5, "b": 4, "c": 3, "d": 0}}) == 60


def test_parse_judgement_strips_fences_quotes_and_validates():
    good = {"clarity": 4, "accuracy": 3, "coverage": 5, "overall": 2}
    assert parse_judgement("```json\n" + json.dumps(good) + "\n```", "task7") == {k: float(v) for k, v in good.items()}
    assert parse_judgement(json.dumps(good).replace('"', "'"), "task7")["overall"] == 2.0
    with pytest.raises(ValueError, match="missing keys"):
        parse_judgement('{"clarity": 4}', "task7")
    with pytest.raises(ValueError, match="outside"):
        parse_judgement(json.dumps({**good, "coverage": 6}), "task7")
    with pytest.raises(ValueError, match="not an integer"):
        parse_judgement(json.dumps({**good, "coverage": 2.5}), "task7")
    with pytest.raises(ValueError, match="no JSON"):
        parse_judgement("great summary", "task7")


def _row(task, item_id):
    return {"task": task, "id": item_id, "query": "Passage: solar cuts bills.", "answer": "", "response": "Solar cuts bills."}


def test_judge_retries_are_bounded_and_failures_counted(tmp_path):
    ok = '{"clarity": 5, "accuracy": 5, "coverage": 4, "overall": 4}'
    engine = ScriptedEngine(['{"clarity": 5', ok, "bad", "bad", "bad"])
    stage = make_judge_stage(lambda: engine, "scripted", str(tmp_path / "j.jsonl"), 32, retries=2)
    first, second = stage([_row("task7", "a"), _row("task7", "b")])
    assert first["score"] == 90 and first["judge_attempts"] == 2 and first["judge_error"] is None
    assert second["score"] is None and second["judge_attempts"] == 3 and "no JSON" in second["judge_error"]
    assert engine.calls == 5
    # every attempt asks for the rubric's schema; nothing is prefilled
    assert {p.json_schema for p in engine.params} == {rubric_schema("task7")}
    assert not any(p.rstrip().endswith('{"clarity":') for p in engine.prompts)
    again = make_judge_stage(lambda: ScriptedEngine([]), "scripted", str(tmp_path / "j.jsonl"), 32, retries=2)
    assert again([_row("task7", "a"), _row("task7", "b")]) == [first, second]  # cached: no model call


def test_free_text_judge_ablation_prefills_the_first_key(tmp_path):
    engine = ScriptedEngine([' 5, "accuracy": 5, "coverage": 4, "overall": 4}'])
    stage = make_judge_stage(lambda: engine, "scripted", str(tmp_path / "j.jsonl"), 32, retries=0, structured=False)
    assert stage([_row("task7", "a")])[0]["score"] == 90
    assert engine.params[0].json_schema is None and engine.prompts[0].endswith('{"clarity":')


def test_rubric_schema_accepts_exactly_the_valid_judgements():
    import jsonschema

    schema = json.loads(rubric_schema("task12"))
    good = dict.fromkeys(("completeness", "importance", "accuracy", "summarization", "specification"), 0.5)
    jsonschema.validate(good, schema)
    for bad in ({**good, "accuracy": 1.5}, {**good, "extra": 1}, {k: v for k, v in good.items() if k != "importance"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    assert json.loads(rubric_schema("task15"))["properties"]["readability"] == {"type": "integer", "minimum": 0,
                                                                              "maximum": 5}


def test_generation_cache_by_task_id_model_prompt(tmp_path):
    rows = [{"task": "task1", "id": "x", "query": "Q?", "answer": "A"}]
    stage = make_generate_stage(lambda: ScriptedEngine(["A"]), "m", str(tmp_path / "g.jsonl"), 4, 8)
    assert stage(rows)[0]["response"] == "A"
    cached = make_generate_stage(lambda: ScriptedEngine([]), "m", str(tmp_path / "g.jsonl"), 4, 8)
    assert cached(rows)[0]["response"] == "A"
    other_model = make_generate_stage(lambda: ScriptedEngine(["B"]), "m2", str(tmp_path / "g.jsonl"), 4, 8)
    assert other_model(rows)[0]["response"] == "B"


def test_load_release_folder(tmp_path):
    (tmp_path / "task2.jsonl").write_text(json.dumps({"id": 7, "query": "q", "answer": "B"}) + "\n\n")
    (tmp_path / "task11.jsonl").write_text(json.dumps(
        {"id": "p", "query": "Scientific Research Paper:\nThe paper.\n\n\nWrite the problem.", "answer": "x"}) + "\n")
    bench = load_bench(tmp_path)
    assert list(bench) == ["task2", "task11"]
    assert bench["task2"] == [{"id": "7", "query": "q", "answer": "B", "task": "task2"}]
    assert paper_of(bench["task11"][0]) == "The paper."
    (tmp_path / "task3.jsonl").write_text(json.dumps({"id": 1, "query": "q"}) + "\n")
    with pytest.raises(ValueError, match="task3.jsonl, line 1: missing field 'answer'"):
        load_bench(tmp_path)


TASK12_OK = '{"completeness": 1, "importance": 1, "accuracy": 0.5, "summarization": 0.5, "specification": 0}'


def test_tasks_11_to_14_find_the_paper_in_task16_by_id_else_use_the_whole_query(tmp_path):
    (tmp_path / "task16.jsonl").write_text(
        json.dumps({"id": "p1", "query": "Scientific Research Paper:\nPaper one.\n\n\nClaim: x", "answer": "True"})
        + "\n" + json.dumps({"id": "p2", "query": "A query without the paper block.", "answer": "False"}) + "\n")
    papers = release_papers(tmp_path)
    assert papers == {"p1": "Paper one.", "p2": "A query without the paper block."}  # Eval.py's fallback
    rows = [{"task": "task12", "id": "p1", "query": "Write the findings.", "answer": "", "response": "r1"},
            {"task": "task12", "id": "p2", "query": "Write the findings.", "answer": "", "response": "r2"},
            {"task": "task12", "id": "p3", "query": "No paper block here.", "answer": "", "response": "r3"}]
    engine = ScriptedEngine([TASK12_OK] * 3)
    judged = make_judge_stage(lambda: engine, "scripted", str(tmp_path / "j.jsonl"), 32, retries=0,
                              papers=papers)(rows)
    assert [r["score"] for r in judged] == [60.0] * 3  # (1 + 1 + 0.5 + 0.5 + 0) / 5: none rejected
    assert "Source material:\nPaper one.\n" in engine.prompts[0]
    assert "Source material:\nA query without the paper block.\n" in engine.prompts[1]
    assert "Source material:\nNo paper block here.\n" in engine.prompts[2]  # id not in task16: its own query
    report = score_tasks(judged, resamples=10)
    assert report["tasks"]["task12"]["n"] == 3 and report["tasks"]["task12"]["judged"] == 3
    assert paper_of({"task": "task12", "id": "p1", "query": "q", "paper": "Own."}, papers) == "Own."
    assert paper_of({"task": "task15", "id": "p1", "query": "Whole."}, papers) == "Whole."  # task 15: own query
    assert release_papers(tmp_path / "missing") == {}


def test_summary_judge_prompts_name_the_section_type_as_eval_py():
    expected = {"task7": "Policy Problem", "task8": "Scientific Research Findings",
                "task9": "Scientific Research Study Methods", "task10": "Policy Implications"}
    for task, section in expected.items():
        prompt = judge_prompt(task, source="A passage.", candidate="A summary.")
        assert f"restates the {section} described in the source material" in prompt
    assert "restates" not in judge_prompt("task12", source="A paper.", candidate="Findings.")


def test_long_prompts_lose_the_start_of_their_content_never_the_chat_template():
    from types import SimpleNamespace

    from data_pipelines.sci2pol.bench import _encode

    engine = ScriptedEngine([])
    engine.model = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=40))
    text = "0123456789" * 5 + "Answer now."  # 61 character tokens; the template adds <bos><|user|>, <|assistant|>
    ids, truncated = _encode(engine, text, None, 8)
    assert truncated and len(ids) == 40 - 8
    assert engine.tokenizer.decode(ids) == "<bos><|user|>" + text[-29:] + "<|assistant|>"
    ids, truncated = _encode(engine, text, '{"a":', 8)  # the prefill stays whole too
    assert truncated and engine.tokenizer.decode(ids) == "<bos><|user|>" + text[-24:] + '<|assistant|>{"a":'
    assert _encode(engine, "short", None, 8) == (engine.tokenizer("<bos><|user|>short<|assistant|>",
                                                                  add_special_tokens=False)["input_ids"], False)
    with pytest.raises(ValueError, match="nothing of the prompt fits the 40-token context"):
        _encode(engine, text, None, 38)
