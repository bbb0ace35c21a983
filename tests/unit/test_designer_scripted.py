"""DESIGNER's LLM stages and whole pipeline with a scripted engine: structured-output validation and retry
counting, the JSON steps' schemas (and the free-text ablation), retrieval top-5, and the output loading in
the dataset task."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from data_pipelines.common.embed import HashingEmbedder
from data_pipelines.common.runner import Reject, StaleOutput
from data_pipelines.designer.options import DesignerConfig, add_designer_args
from data_pipelines.designer.run import run_pipeline
from data_pipelines.designer.stages import CallSettings, make_annotate_stage, make_generate_stage
from data_pipelines.designer.steps import retrieve_step
from posttrain.common.cli_help import CommandParser
from posttrain.engines.base import GenerationEngine, Rollouts, SamplingParams
from posttrain.models.tiny import build_tokenizer
from tests.unit.ray_session import ray_session_fixture  # noqa: F401 - the `ray_session` fixture

pytestmark = pytest.mark.heavy  # its whole-pipeline tests start Ray

KEYWORDS = {"Physics": ("force", "mass", "orbit", "capacitor", "wire", "ball", "skater"),
            "Chemistry": ("mole", "buffer", "equilibrium constant", "bond", "product", "reaction"),
            "Biology": ("offspring", "mutation", "population", "organelle", "plants", "bacteria")}


class ScriptedDesignerEngine:
    """A generation engine (protocol only) answering each DESIGNER prompt by rule. ``bad_first``: the
    first ``bad_first`` calls of every prompt get an unparsable reply (to exercise retries); ``pick``: the
    id every generation reply selects (default: the first candidate); ``delay``: seconds every call of the
    stage whose prompts hold ``delay_on`` sleeps (default: the generation stage; to be killed inside it). JSON replies are whole documents when the call asks
    for a schema, else what follows the prompt's prefilled ``{"<first key>": "``; ``schemas`` records the
    schema of every call."""

    def __init__(self, bad_first: int = 0, delay: float = 0.0, pick: str | None = None,
                 delay_on: str = "Source text:") -> None:
        self.tokenizer = build_tokenizer()
        self.bad_first = bad_first
        self.delay = delay
        self.delay_on = delay_on
        self.pick = pick
        self.seen: dict[str, int] = {}
        self.schemas: list[str | None] = []

    def reply(self, prompt: str) -> str:
        if "Label this exam question." in prompt:
            question = prompt.rsplit("Question: ", 1)[1].split("\n")[0].lower()
            discipline = next((d for d, words in KEYWORDS.items() if any(w in question for w in words)),
                              "Economics")
            level = "Very Hard" if len(question) > 110 else "Hard" if len(question) > 70 else "Medium"
            qtype = "multiple-choice" if " A) " in question.upper() else "calculation"
            return f'{{"discipline": "{discipline}", "difficulty": "{level}", "question_type": "{qtype}"}}'
        if "Mermaid flowchart" in prompt:
            topic = re.findall(r"Question: (\w+ \w+)", prompt)[-1]
            return f"Set goal: {topic}] --> B[Pick a law] --> C[Ask for a quantity]\n```\nDone."
        if "Source text:" in prompt:
            last_turn = prompt.rsplit("Source text:\n", 1)[1]
            first_id = self.pick or re.search(r"\[([LE]-q\d+)\]", last_turn).group(1)
            segment = last_turn.split("\n\n")[0]
            words = " ".join(segment.split()[:12])
            return (f'{{"selected_id": "{first_id}", "question": "Using the passage ({words}), A) derive B) compute '
                    'the result?", "reference_answer": "A"}')
        return "Step one. Step two gives 4.\nFinal answer: 4"

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts:
        import time

        texts = []
        self.schemas.append(params.json_schema)
        for ids in prompt_ids:
            prompt = self.tokenizer.decode(ids, skip_special_tokens=True)
            if self.delay_on in prompt:
                time.sleep(self.delay)
            count = self.seen[prompt] = self.seen.get(prompt, 0) + 1
            reply = self.reply(prompt)
            if reply.startswith("{") and params.json_schema is None:
                reply = reply.split('": "', 1)[1]  # the prompt ends with '{"<first key>": "'
            texts.append("not json at all" if count <= self.bad_first else reply)
        ids = [self.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        return Rollouts(prompt_ids=prompt_ids, completion_ids=ids, texts=texts,
                        logprobs=[[0.0] * len(i) for i in ids], finish_reasons=["stop"] * len(ids))


class ScriptedAnswerEngine(ScriptedDesignerEngine):
    """A separate long-CoT answer model: the scripted replies, but every response ends with 5."""

    def reply(self, prompt: str) -> str:
        return super().reply(prompt).replace("Final answer: 4", "Final answer: 5")


def designer_args(out, *extra: str) -> DesignerConfig:
    parser = CommandParser()
    add_designer_args(parser)
    return DesignerConfig.from_args(parser.parse_args(["--output", str(out), "--no_progress", "--embedder",
                                                       "hashing", *extra]))


def test_scripted_engine_meets_the_protocol() -> None:
    assert isinstance(ScriptedDesignerEngine(), GenerationEngine)


def test_retries_are_counted_and_bounded() -> None:
    batch = [{"question": "A cart of mass 3 kg accelerates. What force acts?"}]
    disciplines = ("Physics", "Economics")
    once_bad = make_annotate_stage(ScriptedDesignerEngine(bad_first=1), CallSettings(40, retries=2), disciplines)
    [record] = once_bad(batch)
    assert record["attempts"] == 2 and record["discipline"] == "Physics"
    always_bad = make_annotate_stage(ScriptedDesignerEngine(bad_first=3), CallSettings(40, retries=2), disciplines)
    [reject] = always_bad(batch)
    assert isinstance(reject, Reject) and "after 3 attempts" in reject.reason and "JSON" in reject.reason


def test_generation_rejects_a_logic_id_outside_the_candidates() -> None:
    record = {"segment_id": "s#0", "source_id": "s", "discipline": "Physics", "segment": "Forces move carts.",
              "candidates": [{"id": "L-q999", "text": "flowchart TD\n A[x] --> B[y]",
                              "question_type": "calculation", "difficulty": "Hard"}]}
    engine = ScriptedDesignerEngine(pick="L-q001")
    [reject] = make_generate_stage(engine, CallSettings(100, retries=0), "logic")([record])
    assert isinstance(reject, Reject) and "not one of the candidates" in reject.reason
    record["candidates"][0]["id"] = "L-q001"
    [out] = make_generate_stage(engine, CallSettings(100, retries=0), "logic")([record])
    assert out["logic_id"] == "L-q001" and out["candidate_ids"] == ["L-q001"]


def test_json_steps_ask_for_their_schemas_and_the_ablation_prefills() -> None:
    from data_pipelines.designer.prompts import annotate_schema

    batch = [{"question": "A cart of mass 3 kg accelerates. What force acts?"}]
    disciplines = ("Physics", "Economics")
    for structured in (True, False):
        engine = ScriptedDesignerEngine()
        [record] = make_annotate_stage(engine, CallSettings(40, structured=structured), disciplines)(batch)
        assert record["discipline"] == "Physics" and record["attempts"] == 1
        assert engine.schemas == [annotate_schema(disciplines) if structured else None]
    records = [{"segment_id": f"s#{n}", "source_id": "s", "discipline": "Physics", "segment": "Forces move carts.",
                "candidates": [{"id": cid, "text": "flowchart TD\n A[x] --> B[y]", "question_type": "calculation",
                                "difficulty": "Hard"}]} for n, cid in enumerate(("L-q001", "L-q002"))]
    engine = ScriptedDesignerEngine()
    outs = make_generate_stage(engine, CallSettings(100, retries=0), "logic")(records)
    assert [o["logic_id"] for o in outs] == ["L-q001", "L-q002"]
    # one call per distinct schema: each record's selected id is constrained to its own candidates
    assert [json.loads(s)["properties"]["selected_id"] for s in engine.schemas] == [{"enum": ["L-q001"]},
                                                                                    {"enum": ["L-q002"]}]


def test_retrieval_returns_top5_of_the_segment_discipline() -> None:
    pool = [{"id": f"L{i}", "text": f"flowchart TD\n A[{w} step] --> B[{w}]", "discipline": d,
             "question_type": "calculation", "difficulty": "Hard"}
            for i, (w, d) in enumerate([("energy", "Physics")] * 7 + [("energy", "Economics")] * 3)]
    pool[3]["text"] = "momentum and kinetic energy of the cart"
    segments = [{"segment_id": "s#0", "source_id": "s", "discipline": "Physics",
                 "segment": "momentum and kinetic energy of the cart"}]
    [hit] = retrieve_step(segments, pool, HashingEmbedder(), top_k=5)
    ids = [c["id"] for c in hit["candidates"]]
    assert len(ids) == 5 and ids[0] == "L3" and all(int(i[1:]) < 7 for i in ids)
    assert hit["candidates"][0]["score"] >= hit["candidates"][-1]["score"]


def test_pipeline_output_loads_in_the_dataset_task(tmp_path, ray_session, caplog) -> None:
    """Also: the long-CoT answers come from their own model, and clusters that miss 3:2:1 are reported."""
    from posttrain.tasks.dataset import DatasetTask

    generator = ScriptedDesignerEngine()
    engines = {"annotate": generator, "extract": generator, "generate": generator, "answer": ScriptedAnswerEngine()}
    report = run_pipeline(designer_args(tmp_path / "out", "--max-questions", "12", "--chunk_size", "6",
                                        "--per-cluster", "6"), engines, HashingEmbedder())
    assert report["records"] > 0
    assert report["stages"]["annotate"]["out"] == 12
    assert report["models"] == {"annotate": "ScriptedDesignerEngine", "extract": "ScriptedDesignerEngine",
                                "generate": "ScriptedDesignerEngine", "answer": "ScriptedAnswerEngine"}
    seeds = [json.loads(line) for line in (tmp_path / "out" / "2-seeds.jsonl").read_text().splitlines()]
    assert seeds and all(s["difficulty"] != "Easy" for s in seeds)
    # 12 questions in clusters of at most 6: no cluster holds the 3 Very Hard a draw of 6 asks for
    shortfalls = report["stages"]["seeds"]["ratio_shortfalls"]
    assert shortfalls and all(sum(s["short"].values()) > 0 for s in shortfalls)
    assert any("cannot honour 3:2:1" in r.getMessage() for r in caplog.records)
    task = DatasetTask(str(tmp_path / "out" / "designer.jsonl"), prompt_column="question",
                       answer_column="reference_answer")
    examples = task.split("train") + task.split("test")
    assert len(examples) == report["records"]
    assert all(e.columns["target"].endswith("Final answer: 5") for e in examples)
    assert {(e.columns["generator_model"], e.columns["answer_model"]) for e in examples} == {
        ("ScriptedDesignerEngine", "ScriptedAnswerEngine")}
    assert all(e.columns["logic_mermaid"].startswith("flowchart TD") for e in examples)


def test_exemplar_mode_retrieves_questions_instead_of_logics(tmp_path, ray_session) -> None:
    report = run_pipeline(designer_args(tmp_path / "ex", "--mode", "exemplar"), ScriptedDesignerEngine(),
                          HashingEmbedder())
    records = [json.loads(line) for line in (tmp_path / "ex" / "designer.jsonl").read_text().splitlines()]
    assert report["records"] == len(records) > 0
    assert all(r["logic_id"].startswith("E-") and r["logic_mermaid"] is None for r in records)
    assert not (tmp_path / "ex" / "3-extract").exists()
    # --decontaminate added on a rerun: the stored 8-filtered.jsonl was made without it, so it is never reused
    bench = tmp_path / "bench.jsonl"
    bench.write_text(json.dumps({"question": records[0]["question"]}) + "\n")
    with pytest.raises(StaleOutput, match=r"8-filtered.jsonl was made with other settings \(config.decontaminate"):
        run_pipeline(designer_args(tmp_path / "ex", "--mode", "exemplar", "--decontaminate", str(bench)),
                     ScriptedDesignerEngine(), HashingEmbedder())
    redone = run_pipeline(designer_args(tmp_path / "ex", "--mode", "exemplar", "--decontaminate", str(bench),
                                        "--overwrite"), ScriptedDesignerEngine(), HashingEmbedder())
    assert redone["stages"]["filter"]["out"] < report["stages"]["filter"]["out"]  # the benchmark's twin is gone


def test_cli_bodies_register_as_subcommands_with_help_for_every_flag() -> None:
    from data_pipelines.common.diversity import add_diversity_args
    from posttrain.common.cli_help import HelpFormatter

    parser = argparse.ArgumentParser(prog="posttrain data", formatter_class=HelpFormatter)
    sub = parser.add_subparsers(dest="pipeline", required=True)
    designer = sub.add_parser("designer", formatter_class=HelpFormatter)
    add_designer_args(designer)
    diversity = sub.add_parser("diversity", formatter_class=HelpFormatter)
    add_diversity_args(diversity)
    for sub_parser in (designer, diversity):
        assert all(action.help for action in sub_parser._actions)
        assert "--help" in sub_parser.format_help()
    args = parser.parse_args(["designer", "--mode", "exemplar", "--decontaminate", "bench.jsonl", "--top_k", "3"])
    assert (args.mode, args.decontaminate, args.top_k, args.model) == ("exemplar", "bench.jsonl", 3, "smollm2-135m")
    assert parser.parse_args(["diversity", "q.jsonl", "--field", "prompt"]).field == "prompt"


def test_filter_step_drops_near_duplicates_and_benchmark_overlap(tmp_path) -> None:
    from data_pipelines.designer.filtering import Decontaminator, benchmark_texts
    from data_pipelines.designer.prompts import demonstration_questions
    from data_pipelines.designer.steps import filter_step

    leaked = "a cart of mass three kilograms accelerates at two metres per second squared on a flat road"
    bench = tmp_path / "bench.jsonl"
    bench.write_text(json.dumps({"prompt": "Q: " + leaked + ". Find the force.", "answer": 6}) + "\n")
    long_text = "explain how a tariff on imported steel changes consumer surplus producer surplus and revenue"
    questions = [{"segment_id": "s#0", "question": long_text}, {"segment_id": "s#1", "question": long_text + "."},
                 {"segment_id": "s#2", "question": "Given that " + leaked + ", what is the net force?"},
                 {"segment_id": "s#3", "question": "Why is the sky blue at noon but red at sunset?"},
                {"segment_id": "s#4", "question": demonstration_questions()[1]}]
    kept, rejects = filter_step(questions, 0.8, Decontaminator(benchmark_texts(str(bench))),
                                Decontaminator(demonstration_questions()))
    assert [q["segment_id"] for q in kept] == ["s#0", "s#3"]
    reasons = sorted(r["reason"] for r in rejects)
    assert reasons[0].startswith("benchmark 13-gram") and reasons[1].startswith("copies the prompt's worked")
    assert reasons[2] == "near-duplicate of question s#0"
