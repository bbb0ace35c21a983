"""The tiny reward model's data (checkable verdicts) and warm start plumbing (a few steps only)."""

from __future__ import annotations

import dataclasses
import random

import torch

from rewards.mr3.parser import parse_verdict
from rewards.mr3.scoring import verdict_reward
from rewards.mr3.templates import compact_prompt
from rewards.mr3.tiny import (
    arithmetic_problems,
    check_trace,
    eval_items,
    judge_trace,
    make_example,
    warm_start,
    worked_solution,
    wrong_answer,
)


def test_check_trace_marks_each_character():
    assert check_trace(58, "56") == "+=0=5=6!"
    assert check_trace(-7, "-7") == "-=0=0=7="
    assert check_trace(30, "3O") == "3!O!_!_!"  # not a number: nothing matches, missing places marked
    assert check_trace(30, "") == "_!_!_!_!"


def test_worked_solution_is_right_for_every_problem():
    from posttrain.tasks.arithmetic import ArithmeticTask

    for example in ArithmeticTask().split("train") + ArithmeticTask().split("test"):
        work = worked_solution(example.prompt)
        sign, x, op, y, flag, ones = work[0], int(work[1:3]), work[3], int(work[4:6]), int(work[7]), int(work[8])
        assert (-1 if sign == "-" else 1) * (x + y if op == "+" else x - y) == int(example.answer)
        assert ones == abs(int(example.answer)) % 10 and flag in (0, 1)
    assert worked_solution("7-13=") == "-13-07,16,"
    assert judge_trace("7-13=", -6, ["-6", "6"], with_reference=False) == "-13-07,16,-006;A-=0=0=6=B+!0=0=6="
    assert judge_trace("7-13=", -6, ["6"], with_reference=True) == "-006;+!0=0=6="


def test_examples_are_checkable_and_parse_to_their_label():
    rng = random.Random(0)
    for mode in ("pairwise", "binary", "pointwise"):
        for _ in range(30):
            item, target, label = make_example("23+7=", 30, mode, rng)
            verdict = parse_verdict(target, item.score_values())
            assert verdict.parse_ok, target
            if mode == "pairwise":
                assert item.responses[label] == "30" and item.responses[1 - label] != "30"
                assert verdict_reward(mode, verdict.score, item.score_values()) == (1.0 if label == 0 else 0.0)
            elif mode == "binary":
                assert (verdict.score == "true") == label == (item.responses[0] == "30")
            assert len(compact_prompt(item)) + len(target) < 100  # fits the tiny model's context easily


def test_reference_guided_examples():
    item, _, _ = make_example("23+7=", 30, "binary", random.Random(3), with_reference=True)
    assert item.reference == "30" and "|ref:+030|" in compact_prompt(item)


def test_wrong_answers_are_wrong_and_eval_items_are_held_out():
    rng = random.Random(1)
    assert all(wrong_answer(a, rng) != a for a in range(-49, 99))
    train = {p for p, _ in arithmetic_problems("train")}
    assert all(item.instruction not in train for item, _ in eval_items(64))


def test_warm_start_runs_and_learns_the_format():
    from posttrain.models.tiny import RECIPES, build_model, build_tokenizer

    recipe = dataclasses.replace(RECIPES.get("reward-mr3"), warm_start_steps=4, batch_size=8)
    tokenizer = build_tokenizer()
    model = build_model(recipe, tokenizer)
    before = [p.detach().clone() for p in model.parameters()]
    threads = torch.get_num_threads()
    warm_start(model, tokenizer, recipe, torch.Generator().manual_seed(0))
    assert torch.get_num_threads() == threads  # restored
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_warm_start_progress_logs_lines_when_not_on_a_terminal(capsys):
    """A first build writes to a log file (no terminal): it logs a line every 5% of the steps."""
    from posttrain.models.tiny import WarmStartProgress

    progress = WarmStartProgress("reward-mr3", 40)
    for step in range(40):
        progress.update(1.0 / (step + 1))
    progress.close()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 20 and lines[0].startswith("warm start reward-mr3: step 2/40 (5%), loss 0.500")
    assert lines[-1].startswith("warm start reward-mr3: step 40/40 (100%), loss 0.025")
