"""Sci2Pol commands end to end on the embedded inputs with the tiny model (fast settings): ``bench``
(uninterrupted, and SIGKILLed mid-run then rerun: identical results) and ``corpus`` (filters and rejects;
SIGKILLed mid-run then rerun: identical bytes); a rerun with other tasks refused, and a server that is not there
failing the run with its cause."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from data_pipelines.common.runner import StaleOutput
from data_pipelines.sci2pol.options import add_sci2pol_args
from data_pipelines.sci2pol.run import run_sci2pol
from posttrain.common.cli_help import CommandParser
from tests.unit.ray_session import (
    kill_when_parts,
    ray_session_fixture,  # noqa: F401 - the `ray_session` fixture
)

REPO = Path(__file__).resolve().parents[2]
CLI = ("import sys\nfrom posttrain.common.cli_help import CommandParser\n"
       "from data_pipelines.sci2pol.options import add_sci2pol_args\nfrom data_pipelines.sci2pol.run import run_sci2pol\n"
       "p = CommandParser(); add_sci2pol_args(p); sys.exit(run_sci2pol(p.parse_args(sys.argv[1:])))")


def _run(argv: list[str]) -> int:
    parser = CommandParser()
    add_sci2pol_args(parser)
    return run_sci2pol(parser.parse_args(argv))


def _bench_argv(out: Path, ray_address: str) -> list[str]:
    return ["bench", "--model", "tiny", "--judge", "tiny", "--tasks", "task1,task7,task11,task18",
            "--per_task", "2", "--open_tokens", "8", "--judge_tokens", "8", "--judge_retries", "1",
            "--bootstrap", "50", "--chunk_size", "1", "--output", str(out), "--no_progress",
            "--ray_address", ray_address]


def _results(out: Path) -> dict:
    report = json.loads((out / "results.json").read_text())
    report.pop("seconds")
    return report


@pytest.mark.long  # the corpus builder's kill test covers the backbone in CI: `make test-long`
def test_bench_killed_then_rerun_equals_uninterrupted(tmp_path, ray_session):
    assert _run(_bench_argv(tmp_path / "whole", ray_session)) == 0
    whole = _results(tmp_path / "whole")
    assert set(whole["tasks"]) == {"task1", "task7", "task11", "task18"}
    t7 = whole["tasks"]["task7"]
    assert t7["n"] == 2 and t7["judged"] + t7["judge_failures"] == 2 and t7["judge_attempts"] >= 2
    assert {"strict", "robust", "strict_se", "robust_se"} <= set(whole["tasks"]["task18"])
    assert len((tmp_path / "whole" / "responses.jsonl").read_text().splitlines()) == 8

    killed = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-c", CLI, *_bench_argv(killed, ray_session)]
    done = kill_when_parts(cmd, killed / "generate", 2, env, timeout=120)
    assert 2 <= done < 8 and not (killed / "results.json").exists()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert _results(killed) == whole


def _corpus_argv(out: Path, ray_address: str) -> list[str]:
    return ["corpus", "--judge", "tiny", "--polish_tokens", "8", "--judge_retries", "0", "--chunk_size", "1",
            "--output", str(out), "--no_progress", "--ray_address", ray_address]


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory, ray_session) -> Path:
    """One uninterrupted ``corpus`` run (one pair per block)."""
    out = tmp_path_factory.mktemp("sci2pol") / "corpus"
    assert _run(_corpus_argv(out, ray_session)) == 0
    return out


def test_corpus_filters_and_rejects(corpus_run):
    out = corpus_run
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    reasons = {r.get("policy_id") or r["record"]["policy_id"]: r["reason"] for r in rejects}
    assert reasons["D2"] == "cites 4 papers > max 3"
    assert reasons["D3"] == "none of the cited papers ['P404'] is in the paper table"
    pairs = [json.loads(line) for line in (out / "pairs.jsonl").read_text().splitlines()]
    # every candidate pair (D0, D1, D4, D5) ends as an output pair or a reject with a reason
    assert len(pairs) + len(rejects) == 6
    # verdicts decoded under the relevance schema always parse, even from the tiny model
    assert not any("unparsable" in r["reason"] for r in rejects)
    for pair in pairs:
        assert pair["prompt"].endswith(pair["paper_text"]) and pair["answer"] == pair["brief_polished"]


def test_bench_rerun_with_other_tasks_is_refused(tmp_path, ray_session):
    """``--tasks task1`` then ``--tasks task2`` (the same item count) never returns task1's results (that
    ``--overwrite`` then redoes the stage is the runner's own test)."""
    argv = ["bench", "--model", "tiny", "--judge", "tiny", "--per_task", "1", "--max_new_tokens", "2",
            "--bootstrap", "2", "--output", str(tmp_path), "--no_progress", "--ray_address", ray_session]
    assert _run([*argv, "--tasks", "task1"]) == 0
    with pytest.raises(StaleOutput, match=r"config.tasks: \['task1'\] -> \['task2'\]"):
        _run([*argv, "--tasks", "task2"])
    assert set(_results(tmp_path)["tasks"]) == {"task1"}  # nothing of the refused run written


def test_bench_against_a_server_that_is_not_there_fails_naming_the_cause(tmp_path, ray_session, capsys):
    """Nothing listens on port 9: an infrastructure failure, not two rejected items and exit 0."""
    from data_pipelines.cli import data_main
    from posttrain.models.tiny import build_tiny

    argv = ["sci2pol", "bench", "--model", "http://127.0.0.1:9/v1#m", "--tokenizer", str(build_tiny("corpus-lm")),
            "--judge", "tiny", "--tasks", "task1", "--failure_retries", "0", "--output", str(tmp_path), "--no_progress",
            "--ray_address", ray_session]
    assert data_main(argv) == 1
    error = capsys.readouterr().err
    assert "generate: block 0 failed after 1 attempts" in error and "127.0.0.1:9" in error, error
    assert not list((tmp_path / "generate").glob("part-*")) and not (tmp_path / "results.json").exists()


def test_corpus_killed_then_rerun_writes_the_same_bytes(tmp_path, ray_session, corpus_run):
    killed = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-c", CLI, *_corpus_argv(killed, ray_session)]
    done = kill_when_parts(cmd, killed / "coarse", 1, env, timeout=600)
    assert done < len(list((corpus_run / "coarse").glob("part-*[0-9].jsonl")))  # stopped mid-stage
    assert not (killed / "pairs.jsonl").exists()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for name in ("pairs.jsonl", "rejects.jsonl"):
        assert (killed / name).read_bytes() == (corpus_run / name).read_bytes(), name
