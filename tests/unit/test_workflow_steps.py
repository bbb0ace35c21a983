"""The workflows' shared pieces (``examples/workflows/workflow_steps.py``): the flags every workflow takes (one
style: snake_case, kebab-case accepted), the remote-reward environment, reading first / last metrics, and a
served judge started again when another process took its port first."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "workflows"))
from workflow_steps import Workflow, first_and_last, remote_reward_env, workflow_parser

from posttrain.engines import worker


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


@pytest.mark.heavy  # starts `posttrain serve` twice
def test_served_starts_again_on_another_port_when_its_port_was_taken(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """CI once lost a workflow this way: ``free_port``'s port was bound by another job before the server bound it."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = iter([taken.getsockname()[1], worker.free_port()])
        monkeypatch.setattr(worker, "free_port", lambda: next(ports))
        flow = Workflow("demo", tmp_path)
        with flow.served("judge", ["--backend", "fake", "--threads", "1"], startup_timeout_s=120) as url:
            assert url != f"http://127.0.0.1:{taken.getsockname()[1]}"
            assert httpx.get(f"{url}/health", timeout=5).status_code == 200
    assert [c["step"] for c in flow.commands] == ["judge", "judge"]


@pytest.mark.heavy  # starts `posttrain serve`
def test_served_does_not_start_again_when_the_server_fails_for_another_reason(tmp_path: Path) -> None:
    flow = Workflow("demo", tmp_path)
    with pytest.raises(RuntimeError, match="exited with [1-9]"), flow.served("judge", ["--no_such_flag"],
                                                                           startup_timeout_s=120):
        pass
    assert len(flow.commands) == 1
