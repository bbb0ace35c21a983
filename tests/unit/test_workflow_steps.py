"""The workflows' shared pieces (``examples/workflows/workflow_steps.py``): the flags every workflow takes (one
style: snake_case, kebab-case accepted), the remote-reward environment, and reading first / last metrics."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "workflows"))
from workflow_steps import first_and_last, remote_reward_env, workflow_parser


def test_workflow_parser_gives_out_and_one_list_of_flags_per_command() -> None:
    parser = workflow_parser("doc", "demo", "designer", "train")
    args = parser.parse_args(["--train_args", "--steps 2 --reward 'rewards.remote:reward'",
                              "--designer-args", "--max_questions 4"])
    assert args.out == Path("outputs/workflow-demo")
    assert args.train_args == ["--steps", "2", "--reward", "rewards.remote:reward"]
    assert args.designer_args == ["--max_questions", "4"]
    assert parser.parse_args([]).train_args == []
    with pytest.raises(SystemExit):
        parser.parse_args(["--bench_args", "--tasks task1"])  # not a command this workflow runs
    with pytest.raises(ValueError, match="'sft'"):
        workflow_parser("doc", "demo", "sft")


def test_remote_reward_env_and_first_and_last() -> None:
    assert remote_reward_env("http://127.0.0.1:9", reference=False, timeout_s=30) == {
        "POSTTRAIN_REWARD_URL": "http://127.0.0.1:9", "POSTTRAIN_REWARD_MODE": "binary",
        "POSTTRAIN_REWARD_REFERENCE": "0", "POSTTRAIN_REWARD_TIMEOUT": "30"}
    rows = [{"step": 1, "loss": 2.0}, {"step": 2, "eval/accuracy": 0.25}, {"step": 4, "eval/accuracy": 0.5}]
    assert first_and_last(rows, "eval/accuracy") == (0.25, 0.5)
    assert first_and_last(rows, "reward/mean") == (None, None)
