"""mR3 SFT data from the builder (``python -m rewards.mr3.data``) trained with ``--algo sft`` through
``posttrain/train.py``: the dataset task's ``--raw_prompts`` feeds the builder's rendered prompts as they are."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

from rewards.mr3.data import main as build_main
from rewards.mr3.tiny import arithmetic_problems, judge_trace, wrong_answer
from tests.e2e.conftest import run_entry


def _records(n: int) -> list[dict]:
    """Binary correctness records on arithmetic problems, with the tiny judge's checking trace as the
    teacher reasoning and a difficulty that the easy-to-hard curriculum orders by."""
    rng = random.Random(0)
    records = []
    for i, (problem, answer) in enumerate(arithmetic_problems("train")[:n]):
        candidate = answer if i % 2 else wrong_answer(answer, rng)
        records.append({"id": f"r{i}", "prompt": problem, "response": str(candidate), "label": candidate == answer,
                        "reasoning": judge_trace(problem, answer, [str(candidate)], with_reference=False),
                        "teacher_consistency": rng.random()})
    return records


def test_sft_on_builder_output(tmp_path: Path) -> None:
    from posttrain.models.tiny import RECIPES, build_model, build_tokenizer

    source = tmp_path / "records.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in _records(40)))
    data = tmp_path / "mr3_sft.jsonl"
    assert build_main([str(source), str(data), "--style", "compact", "--tokenizer", "tiny"]) == 0
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    assert len(rows) == 40 and rows[0]["prompt"].startswith("C|") and rows[0]["prompt"].endswith("<think>")
    assert [r["difficulty"] for r in rows] == sorted(r["difficulty"] for r in rows)  # easy to hard
    model = tmp_path / "model"
    tokenizer = build_tokenizer()
    build_model(RECIPES.get("reward-mr3"), tokenizer).save_pretrained(model)  # random weights: fast
    tokenizer.save_pretrained(model)
    out = tmp_path / "run"
    result = run_entry(["--algo", "sft", "--task", "dataset", "--dataset", str(data), "--raw_prompts", "true",
                        "--shuffle", "false",
                        "--model", str(model), "--output_dir", str(out), "--steps", "4", "--prompts_per_step", "8",
                        "--micro_batch_size", "8", "--lr", "3e-3", "--eval_every", "4", "--eval_examples", "4",
                        "--pass_k", "1", "--max_new_tokens", "8", "--save_every", "0", "--progress", "false",
                        "--report_to", "jsonl"])
    assert result.returncode == 0, result.stderr[-3000:]
    train = [r for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if "train/loss" in r]
    assert len(train) == 4 and all(math.isfinite(r["train/loss"]) for r in train)
    assert train[-1]["train/loss"] < train[0]["train/loss"]
