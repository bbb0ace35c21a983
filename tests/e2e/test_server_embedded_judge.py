"""The embedded tiny judge (recipe ``reward-mr3``, built once into the cache, ~7 CPU-minutes: ``make judge``)
rewarding the built-in tasks' prompts in TRL's forms through ``rewards.remote`` (issue 43: TRL's GRPOTrainer got
every verdict unreadable, so every reward was the neutral 0.5 and every advantage 0)."""

from __future__ import annotations

import logging

import pytest

from posttrain.models.tiny import build_tokenizer
from posttrain.tasks.prompts import render_prompt
from rewards.remote import remote_reward
from rewards.server.app import ServerSettings, create_app
from rewards.server.backends import load_served_model
from rewards.server.local import serve_in_thread

PROBLEMS = ["12+7=", "3-15=", "19+19=", "0-4="]
ANSWERS = ["19", "-12", "38", "-4"]
COMPLETIONS = ["19", "-12", "37", "4"]
READABLE = {"reward/parse_fail_rate": 0.0}


@pytest.fixture(scope="module")
def judge_url():
    with serve_in_thread(create_app(load_served_model("hf", None, max_batch_size=16), ServerSettings())) as url:
        yield url


def judged(url: str, prompts: list, completions: list, mode: str = "binary") -> tuple[list, dict]:
    fn = remote_reward(url, mode, batch_size=16)
    rewards = fn(prompts, completions, answer=ANSWERS[: len(prompts)])
    return rewards, fn.pop_metrics()


def test_trl_plain_prompts_rendered_through_the_chat_template(judge_url):
    """TRL's plain form with the prompts rendered beforehand (as ``benchmarks/grpo_vs_trl_trl.py`` does): every
    verdict readable, each the one the bare problem gets (the judge's accuracy is ``rewards.mr3.tiny``'s
    benchmark, not this test's)."""
    tokenizer = build_tokenizer()
    prompts = [render_prompt(tokenizer, p, None) for p in PROBLEMS]
    assert prompts[0] == "<bos><|user|>12+7=<|assistant|>"
    for mode in ("binary", "pointwise"):
        bare, bare_metrics = judged(judge_url, PROBLEMS, COMPLETIONS, mode)
        assert bare_metrics == READABLE and set(bare) <= {0.0, 1.0} and bare[:2] == [1.0, 1.0]
        assert judged(judge_url, prompts, COMPLETIONS, mode) == (bare, READABLE)


def test_trl_conversational_prompts_and_wordy_completions(judge_url):
    prompts = [[{"role": "system", "content": "Answer with a number."}, {"role": "user", "content": p}]
               for p in PROBLEMS]
    completions = [[{"role": "assistant", "content": f"The answer is {c}."}] for c in COMPLETIONS]
    assert judged(judge_url, prompts, completions) == judged(judge_url, PROBLEMS, COMPLETIONS)
    assert judged(judge_url, prompts, completions)[1] == READABLE


def test_a_prompt_the_tiny_judge_cannot_judge_is_refused_by_name(judge_url, caplog):
    """word-arithmetic: the tiny judge was trained on two-operand arithmetic only; the server says so (400)
    rather than answer neutral rewards from verdicts it cannot write."""
    with caplog.at_level(logging.WARNING):
        rewards, metrics = judged(judge_url, ["Ann has 7 pens, gets 4. How many?"], ["11"])
    assert rewards == [None] and metrics == {}
    assert "HTTP 400" in caplog.text and "two-operand" in caplog.text and "posttrain serve --model" in caplog.text
