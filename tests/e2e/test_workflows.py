"""Three of the four data-to-trainer workflows (``examples/workflows/``) run end to end in miniature: each script
as a user runs it, made small by its pass-through flags and run on tiny models (the session's warm-started
arithmetic model, a small corpus LM, the fake or tiny judge), so each takes a few steps of every command.

DESIGNER -> GRPO has no miniature here: DESIGNER's JSON steps need a model that can write them, and the tiny
character-level models cannot (the generation step's JSON, after a long prompt, did not parse 3 times in 3), while
smollm2-135m makes the run minutes long."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO

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


def test_mr3_judge_grpo(tiny_arithmetic: Path, tmp_path: Path) -> None:
    summary = run_workflow("mr3_grpo.py", tmp_path, "--serve_args", "--backend fake",
                           "--train_args", f"--model {tiny_arithmetic} {SMALL_GRPO} --eval_every 2 --eval_examples 4")
    assert [c["step"] for c in summary["commands"]] == ["judge", "train"]
    steps = [r for r in summary["curve"] if "reward/mean" in r]
    assert [r["step"] for r in steps] == [1, 2] and all(0 <= r["reward/mean"] <= 1 for r in steps)
    assert summary["eval_accuracy_first"] is not None and summary["eval_accuracy_last"] is not None


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


@pytest.mark.workflow  # about 2.5 minutes on 2 cores: out of CI's time budget, `make test-workflows` runs it
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
