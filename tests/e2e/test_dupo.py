"""DuPO end to end: ``posttrain/train.py --algo dupo`` on a dataset whose answers are removed, kill-and-resume
equivalence, and ``posttrain dupo-rerank`` through the real command."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from posttrain.tasks.word_arithmetic import WordArithmeticTask
from tests.e2e.conftest import REPO, run_entry
from tests.e2e.resume import assert_same_end, kill_and_resume
from tests.e2e.test_train import check_run


@pytest.fixture(scope="module")
def tiny_word_arithmetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The causal-word-arithmetic recipe with a very short warm start (tests need a model, not a good one)."""
    from posttrain.models.tiny import RECIPES, build_recipe

    recipe = dataclasses.replace(RECIPES.get("causal-word-arithmetic"), warm_start_steps=20, batch_size=16)
    return build_recipe(recipe, cache_dir=tmp_path_factory.mktemp("tiny-dupo-cache"))


def _answerless_dataset(folder: Path) -> Path:
    """train.jsonl without answers (plus a problem with no usable number), test.jsonl with them."""
    task = WordArithmeticTask()
    folder.mkdir()
    train = [{"prompt": e.prompt, "answer": ""} for e in task.split("train")[:7]]
    train.append({"prompt": "How many pens does Ann have?", "answer": ""})
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in train))
    test = [{"prompt": e.prompt, "answer": e.answer} for e in task.split("test")[:8]]
    (folder / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in test))
    return folder


SMALL = ["--steps", "2", "--prompts_per_step", "4", "--group_size", "4", "--micro_batch_size", "8", "--eval_every", "2",
         "--eval_examples", "8", "--pass_k", "2", "--max_new_tokens", "6", "--dual_max_new_tokens", "4",
         "--save_every", "2", "--dual_refresh_every", "2", "--progress", "false"]


def test_dupo_trains_without_the_dataset_answers(tiny_word_arithmetic: Path, tmp_path: Path) -> None:
    data = _answerless_dataset(tmp_path / "data")
    out = tmp_path / "run"
    result = run_entry(["--algo", "dupo", "--model", str(tiny_word_arithmetic), "--output_dir", str(out),
                        "--task", "dataset", "--dataset", str(data), *SMALL])
    rows = check_run(result, out)
    train_rows = [r for r in rows if r["step"] > 0]
    for key in ("dupo/selection_pass_rate", "dupo/filtered_fraction", "dupo/dual_accuracy", "dupo/no_number_fraction"):
        assert all(math.isfinite(r[key]) for r in train_rows), key
    # the problem without a usable number was seen once in the epoch of 2 x 4 prompts: counted, not dropped
    assert sum(r["dupo/no_number_fraction"] for r in train_rows) == pytest.approx(1 / 4)
    assert all(r["train/accuracy"] == 0.0 for r in train_rows)  # the train answers really are gone


def _resume_args(model: Path, out: Path) -> list[str]:
    # Unfiltered, sampled dual answers: a 20-step warm start's greedy dual rarely depends on the answer, and
    # sampled recoveries give the rewards enough spread for the weights to move.
    return ["--algo", "dupo", "--model", str(model), "--output_dir", str(out), "--steps", "4", "--save_every", "2",
            "--dual_refresh_every", "2", "--eval_every", "2", "--eval_examples", "8", "--pass_k", "2",
            "--prompts_per_step", "4", "--group_size", "4", "--micro_batch_size", "8", "--max_new_tokens", "6",
            "--dual_max_new_tokens", "4", "--dual_selection", "false", "--dual_samples", "2", "--dual_temperature", "1.0",
            "--progress", "false", "--keep_last", "3"]


def test_dupo_sigkill_and_resume_equals_uninterrupted(tiny_word_arithmetic: Path, tmp_path: Path) -> None:
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    kill_and_resume(lambda out: _resume_args(tiny_word_arithmetic, out), straight, killed, kill_after=2, final=4)
    rows = assert_same_end(tiny_word_arithmetic, straight, killed, final=4)
    assert [r["dupo/snapshot_step"] for r in rows if r["step"] > 0] == [1.0, 1.0, 3.0, 3.0]


def test_dupo_rerank_command(tiny_word_arithmetic: Path, tmp_path: Path) -> None:
    out = tmp_path / "rerank.json"
    result = subprocess.run([sys.executable, "-m", "posttrain.cli", "dupo-rerank", "--model", str(tiny_word_arithmetic),
                             "--examples", "6", "--n", "2", "4", "--k", "2", "--max_new_tokens", "4",
                             "--dual_max_new_tokens", "4", "--output", str(out)],
                            cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
                            env={"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PATH": str(Path(sys.executable).parent)})
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(out.read_text())
    assert summary == json.loads(result.stdout)
    assert sorted(summary["results"]) == ["N=2", "N=4"]
    for numbers in summary["results"].values():
        assert numbers["questions"] == 6.0
        for key in ("single_sample_accuracy", "majority_accuracy", "rerank_accuracy", "pass_at_n", "unscored_fraction"):
            assert 0.0 <= numbers[key] <= 1.0
        assert numbers["rerank_accuracy"] <= numbers["pass_at_n"]


def test_dupo_rerank_rejects_bad_options() -> None:
    result = subprocess.run([sys.executable, "-m", "posttrain.cli", "dupo-rerank", "--k", "4", "--dual_temperature", "0"],
                            cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 2 and "--dual_temperature" in result.stderr
