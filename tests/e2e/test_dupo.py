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
import torch
from safetensors.torch import load_file

from posttrain.tasks.base import TASKS, Example
from posttrain.tasks.dual_questions import dual_prompt, masked_problems
from posttrain.tasks.word_arithmetic import WordArithmeticTask, WordProblem
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


# -- label-free training improves: a model whose dual solver is strong on a few problems ---------------------
FEW_PROBLEMS = [p for p in WordArithmeticTask().problems("train") if p.template in ("add_sub", "bags")][:8]
"""Eight three-operand problems, whose primal distractor (the forgotten last step) differs from the answer."""
MARGIN_GAIN = 0.5
"""Nats the mean right-over-distractor margin must gain: under a third of the smallest gain measured (the warm
start's 0.03 -> 1.65, 3.36, 2.82 at seeds 0, 1, 2 on one machine)."""


def _few_problem_sft(problem: WordProblem) -> list[Example]:
    """The primal question (ten copies, so the warm start learns it as often as its duals; the recipe's label
    noise puts the distractor on half of its visits) and every dual question with the stated answer 0-2 away
    from the true one (clean targets: the operand each stated answer implies)."""
    value = problem.value()
    examples = [Example(problem.text(), str(value), {"distractor": str(problem.forgotten_last_step())})] * 10
    for index, masked in enumerate(masked_problems(problem.text())):
        for offset in (-2, -1, 0, 1, 2):
            operand = problem.implied_operand(index, value + offset)
            if operand is not None:
                examples.append(Example(dual_prompt(masked, str(value + offset)), str(operand),
                                        {"distractor": str(operand)}))
    return examples


@TASKS.register("test-dupo-few-sft")
class FewProblemSFT:
    """The strong-dual fixture's warm-start data (registered for this module's warm start only)."""

    name = "test-dupo-few-sft"
    reward = WordArithmeticTask.reward
    is_correct = WordArithmeticTask.is_correct

    def split(self, name: str) -> list[Example]:
        return [e for p in FEW_PROBLEMS for e in _few_problem_sft(p)]

    def distractor(self, example: Example) -> str:
        return example.columns["distractor"]


@pytest.fixture(scope="module")
def strong_dual_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small model (width 64, 2 layers) warm-started for 500 steps on ``FewProblemSFT``: its greedy primal
    answers are right on 3 of the 8 problems, its dual answers recover hidden operands far more often."""
    from posttrain.models.tiny import RECIPES, build_recipe

    recipe = dataclasses.replace(RECIPES.get("causal-word-arithmetic"), task="test-dupo-few", warm_start_steps=500,
                                 batch_size=32, hidden_size=64, num_layers=2, intermediate_size=128)
    return build_recipe(recipe, cache_dir=tmp_path_factory.mktemp("tiny-dupo-strong-dual"))


def _answer_margin(model_dir: Path) -> float:
    """Mean over ``FEW_PROBLEMS`` of log p(right answer) - log p(distractor) under the model at ``model_dir``,
    each answer teacher-forced after its chat-rendered prompt and ended by eos, as the warm start wrote it."""
    from posttrain.algos.sequences import pack_sequences
    from posttrain.models.likelihood import causal_token_logprobs
    from posttrain.models.loading import load_causal_lm, load_tokenizer
    from posttrain.tasks.prompts import encode_prompts

    tokenizer, model = load_tokenizer(str(model_dir)), load_causal_lm(str(model_dir)).eval()
    prompts = encode_prompts(tokenizer, [Example(p.text(), "") for p in FEW_PROBLEMS], None, 256)

    def answer_logprob(answers: list[str]) -> torch.Tensor:
        ids = [tokenizer(a, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for a in answers]
        tensors = pack_sequences(prompts, ids, tokenizer.pad_token_id)
        with torch.no_grad():
            logprobs, _ = causal_token_logprobs(model, tensors["input_ids"], tensors["attention_mask"],
                                                last=tensors["completion_mask"].shape[1])
        return (logprobs * tensors["completion_mask"]).sum(-1)

    right = answer_logprob([str(p.value()) for p in FEW_PROBLEMS])
    wrong = answer_logprob([str(p.forgotten_last_step()) for p in FEW_PROBLEMS])
    return float((right - wrong).mean())


def test_dupo_moves_probability_to_the_right_answers_without_any_answer(strong_dual_model: Path,
                                                                        tmp_path: Path) -> None:
    """DuPO trains on the eight problems with their answers removed; its only signal is whether a dual question
    recovers a hidden operand from the primal answer. It must move probability from each problem's distractor
    (the forgotten last step, which the warm start learned on half its visits) to the right answer: the
    log-prob margin of right over distractor grows (``MARGIN_GAIN``). The mechanism is measured in log-probs, not
    greedy accuracy over 8 problems, whose steps of 1/8 two CPUs' kernels decide differently (0.5 -> 0.625 on one
    machine, 0.375 -> 0.875 on another).

    It is measured on the trained problems, whose duals the warm start learned: on 8 held-out problems the
    margin fell at every seed (-0.10 -> -0.23, -0.84, -0.55; benchmarks/results/dupo_held_out_margin.json): this
    model memorises per problem and nothing transfers. It is a mechanism test (the label-free reward moves the
    policy toward right answers), not a generalisation claim; benchmarks/dupo.md measures held-out accuracy."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.jsonl").write_text("".join(json.dumps({"prompt": p.text(), "answer": ""}) + "\n"
                                              for p in FEW_PROBLEMS))
    (data / "test.jsonl").write_text("".join(json.dumps({"prompt": p.text(), "answer": str(p.value())}) + "\n"
                                             for p in FEW_PROBLEMS))
    out = tmp_path / "run"
    result = run_entry(["--algo", "dupo", "--model", str(strong_dual_model), "--output_dir", str(out),
                        "--task", "dataset", "--dataset", str(data), "--steps", "8", "--prompts_per_step", "8",
                        "--group_size", "8", "--micro_batch_size", "64", "--eval_every", "8", "--eval_examples", "0",
                        "--pass_k", "1", "--max_new_tokens", "6", "--dual_max_new_tokens", "4", "--save_every", "0",
                        "--lr", "1e-3", "--dual_refresh_every", "4", "--progress", "false"],
                       env={"OMP_NUM_THREADS": "1"})
    rows = check_run(result, out, steps=8)
    assert all(r["train/accuracy"] == 0.0 for r in rows if r["step"] > 0)  # no answer was ever read
    before, after = _answer_margin(strong_dual_model), _answer_margin(out / "checkpoints" / "step_8" / "hf")
    assert after > before + MARGIN_GAIN, (before, after)


def _resume_args(model: Path, out: Path, refresh_every: int) -> list[str]:
    # Unfiltered, sampled dual answers: a 20-step warm start's greedy dual rarely depends on the answer, and
    # sampled recoveries give the rewards enough spread for the weights to move.
    return ["--algo", "dupo", "--model", str(model), "--output_dir", str(out), "--steps", "4", "--save_every", "2",
            "--dual_refresh_every", str(refresh_every), "--eval_every", "2", "--eval_examples", "8", "--pass_k", "2",
            "--prompts_per_step", "4", "--group_size", "4", "--micro_batch_size", "8", "--max_new_tokens", "6",
            "--dual_max_new_tokens", "4", "--dual_selection", "none", "--dual_samples", "2", "--dual_temperature", "1.0",
            "--progress", "false", "--keep_last", "3"]


@pytest.mark.parametrize("refresh_every,snapshot_steps", [(2, [1, 1, 3, 3]), (3, [1, 1, 1, 4])])
def test_dupo_sigkill_and_resume_equals_uninterrupted(tiny_word_arithmetic: Path, tmp_path: Path, refresh_every: int,
                                                      snapshot_steps: list[int]) -> None:
    """Killed after step 2 and resumed; with refresh_every 3 the resumed step 3 answers with the step-1 snapshot,
    which only the checkpoint still holds (the policy has moved on)."""
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    kill_and_resume(lambda out: _resume_args(tiny_word_arithmetic, out, refresh_every), straight, killed, kill_after=2,
                    final=4)
    rows = assert_same_end(tiny_word_arithmetic, straight, killed, final=4)
    assert [r["dupo/snapshot_step"] for r in rows if r["step"] > 0] == snapshot_steps
    saved = torch.load(killed / "checkpoints" / "step_2" / "role_solver.pt")
    initial = load_file(tiny_word_arithmetic / "model.safetensors")
    assert all(torch.equal(saved[k], v) for k, v in initial.items() if k in saved)  # the step-1 snapshot
    final_a, final_b = (torch.load(out / "checkpoints" / "step_4" / "role_solver.pt") for out in (straight, killed))
    assert final_a.keys() == final_b.keys() and all(torch.equal(final_a[k], final_b[k]) for k in final_a)


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
