"""The four data-to-trainer workflows (``examples/workflows/``) run end to end in miniature: each script as a user
runs it, made small by its pass-through flags and run on tiny models (the session's warm-started arithmetic model,
a small corpus LM, the fake or tiny judge), so each takes a few steps of every command.

DESIGNER's LLM stages need a model that writes its formats (a question of at least 5 words in a JSON document, a
Mermaid flowchart), which the tiny character-level models do not, and smollm2-135m makes the run minutes long: in
the DESIGNER -> GRPO miniature they are served by ``scripted_completions``, an OpenAI-compatible stand-in answering
with the pipeline's own test double (``ScriptedDesignerEngine``) through the real HTTP engine
(``--model http://HOST:PORT/v1#TOKENIZER``)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from posttrain.engines.base import SamplingParams
from tests.e2e.conftest import REPO
from tests.unit.test_designer_scripted import ScriptedDesignerEngine

WORKFLOWS = REPO / "examples" / "workflows"
SMALL_GRPO = "--steps 2 --prompts_per_step 2 --group_size 2 --micro_batch_size 4 --max_new_tokens 8"


@pytest.fixture(scope="module")
def corpus_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small, briefly warm-started corpus LM: the EntropyLong scorer and the model the text workflows train."""
    from posttrain.models.tiny import RECIPES, build_recipe

    recipe = dataclasses.replace(RECIPES.get("corpus-lm"), hidden_size=32, num_layers=1, num_heads=2,
                                 num_kv_heads=1, intermediate_size=64, warm_start_steps=3, batch_size=4)
    return build_recipe(recipe, cache_dir=tmp_path_factory.mktemp("corpus-lm"))


def run_workflow(script: str, out: Path, *args: str, timeout: float = 1800) -> dict:
    """Run ``examples/workflows/SCRIPT --out OUT ARGS`` and return its ``summary.json``."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, str(WORKFLOWS / script), "--out", str(out), *args], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=timeout, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    summary = json.loads((out / "summary.json").read_text())
    assert all(c["returncode"] in (0, None) for c in summary["commands"]), summary["commands"]
    return summary


@contextmanager
def scripted_completions() -> Iterator[str]:
    """A ``/v1/completions`` server on a free loopback port whose completions are ``ScriptedDesignerEngine``'s
    (whole JSON documents when the request asks for a schema); yields its ``/v1`` URL."""
    engine = ScriptedDesignerEngine()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            schema = body.get("response_format")
            params = SamplingParams(max_new_tokens=body["max_tokens"],
                                    json_schema=schema and json.dumps(schema["json_schema"]["schema"]))
            with lock:
                out = engine.generate([body["prompt"]], params)
            choice = {"text": out.texts[0], "token_ids": out.completion_ids[0],
                      "logprobs": {"token_logprobs": out.logprobs[0]}, "finish_reason": "stop"}
            data = json.dumps({"choices": [{"index": j, **choice} for j in range(body.get("n", 1))]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:  # no line per request on stderr
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.long  # 5 minutes at load 40-70 (DESIGNER's eight stages, each a Ray job: 167 s): `make test-long`
def test_designer_grpo(tiny_arithmetic: Path, tmp_path: Path) -> None:
    """DESIGNER's every stage (scripted LLM replies through the HTTP engine, hashing embedder) writes questions
    with reference answers; GRPO trains the tiny model on them for two steps, rewarded by a served judge."""
    with scripted_completions() as url:
        summary = run_workflow(
            "designer_grpo.py", tmp_path, "--reward", "judge", "--judge", "", "--serve_args", "--backend fake",
            "--designer_args", f"--model {url}#{tiny_arithmetic} --embedder hashing --max_questions 12 "
                               "--max_segments 4 --chunk_size 12",
            "--train_args", f"--model {tiny_arithmetic} {SMALL_GRPO} --max_prompt_tokens 200 --eval_every 2")
    assert [c["step"] for c in summary["commands"]] == ["designer", "judge", "train"]
    rows = [json.loads(line) for line in (tmp_path / "data" / "designer.jsonl").read_text().splitlines()]
    assert summary["questions"] == len(rows) >= 2
    assert all(r["question"] and r["reference_answer"] and r["logic_id"].startswith("L-") for r in rows)
    assert summary["designer_stages"]["annotate"]["out"] == 12
    steps = [r for r in summary["curve"] if "reward/mean" in r]
    assert [r["step"] for r in steps] == [1, 2] and all(0 <= r["reward/mean"] <= 1 for r in steps)
    assert summary["eval_accuracy_last"] is not None


def test_mr3_judge_grpo(tiny_arithmetic: Path, tmp_path: Path) -> None:
    summary = run_workflow("mr3_grpo.py", tmp_path, "--serve_args", "--backend fake",
                           "--train_args", f"--model {tiny_arithmetic} {SMALL_GRPO} --eval_every 2 --eval_examples 4")
    assert [c["step"] for c in summary["commands"]] == ["judge", "train"]
    steps = [r for r in summary["curve"] if "reward/mean" in r]
    assert [r["step"] for r in steps] == [1, 2] and all(0 <= r["reward/mean"] <= 1 for r in steps)
    assert summary["eval_accuracy_first"] is not None and summary["eval_accuracy_last"] is not None


@pytest.mark.long  # 70-130 s on 2 cores (a Ray pipeline, two trainings, three probes): `make test-long`
def test_entropylong_lm(corpus_lm: Path, tmp_path: Path) -> None:
    data = (f"--model {corpus_lm} --num_entities 2 --num_misc 1 --retriever bm25 --top_k 2 --chunk_size 5 "
            "--target-length 300")
    summary = run_workflow("entropylong_lm.py", tmp_path, "--model", str(corpus_lm), "--data_args", data,
                           "--train_args", "--steps 1", "--probe_entities", "2")
    rows = [json.loads(line) for line in (tmp_path / "data" / "sequences.jsonl").read_text().splitlines()]
    documents = [json.loads(line) for line in (tmp_path / "data" / "documents.jsonl").read_text().splitlines()]
    assert summary["sequences"] == len(rows) == len(documents) == 5
    assert [d["text"] for d in documents] == [r["text"][r["d_offset_chars"]:] for r in rows]
    probe = summary["probe"]
    assert set(probe) == {"held_out_seed", "pairs", "before", "after_entropylong", "after_documents_only"}
    for name in ("before", "after_entropylong", "after_documents_only"):
        # one token per character: the codes' characters 2..5 of the two planted pairs
        assert probe[name]["dependent_tokens"] == 8 and math.isfinite(probe[name]["context_gain"])
    for run in summary["runs"].values():
        assert math.isfinite(run["curve"][-1]["train/loss"])


@pytest.mark.long  # about 2.5 minutes on 2 cores: out of CI's time budget, `make test-long` runs it
def test_sci2pol_sft(corpus_lm: Path, tmp_path: Path) -> None:
    summary = run_workflow(
        "sci2pol_sft.py", tmp_path, "--model", str(corpus_lm), "--judge", "tiny",
        "--corpus_args", "--polish_tokens 8 --judge_retries 0",
        "--bench_args", "--tasks task1,task7 --per_task 1 --open-tokens 8 --judge-tokens 8 --judge_retries 1 "
                        "--bootstrap 20",
        "--train_args", "--steps 1 --max_prompt_tokens 100000 --max_target_tokens 100000")
    assert [c["step"] for c in summary["commands"]] == ["corpus", "bench-before", "train", "bench-after"]
    assert summary["pairs"] >= 2
    for bench in (summary["bench_before"], summary["bench_after"]):
        assert set(bench["tasks"]) == {"task1", "task7"}
    assert Path(summary["fine_tuned"]).name == "hf"
