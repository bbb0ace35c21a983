"""Kill -9 and resume of the real pipelines on the Ray backbone: EntropyLong (with ``--max-reuse``, whose
chunk-use counts run in input order over the whole run; killed in its verification step and in its
assembly step) and DMAP scoring, each SIGKILLed mid-run in a subprocess joined to the session's Ray, then
rerun: the merged outputs equal an uninterrupted run's; a rerun with other chunking flags is refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from data_pipelines.cli import data_main
from tests.unit.ray_session import (
    kill_when_parts,
    ray_session_fixture,  # noqa: F401 - the `ray_session` fixture
)

pytestmark = pytest.mark.heavy  # starts Ray and kills pipeline processes

REPO = Path(__file__).resolve().parents[2]


EL_CHUNK = 3
"""Root documents per EntropyLong block: the built-in corpus's 24 documents in 8 blocks per step (each block a
Ray task: more, smaller blocks cost time and no coverage)."""


def _el_argv(out: Path) -> list[str]:
    return ["entropylong", "--model", "cachelm", "--output", str(out), "--num_entities", "10", "--num_misc", "4",
            "--corpus_style", "chars", "--retriever", "bm25", "--chunk_size", str(EL_CHUNK), "--max-reuse", "1",
            "--no_progress"]


def _cli(argv: list[str], ray_address: str) -> list[str]:
    return [sys.executable, "-m", "data_pipelines.cli", *argv, "--ray_address", ray_address]


def _kill_and_resume(argv: list[str], out: Path, ray_address: str, parts: str = "parts") -> int:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = kill_when_parts(_cli(argv, ray_address), out / parts, 2, env)
    subprocess.run(_cli(argv, ray_address), check=True, env=env, stdout=subprocess.DEVNULL)
    return done


@pytest.fixture(scope="module")
def entropylong_run(tmp_path_factory, ray_session) -> Path:
    """The output folder of an uninterrupted run."""
    out = tmp_path_factory.mktemp("whole")
    assert data_main(_el_argv(out)) == 0
    return out


@pytest.fixture(scope="module")
def entropylong_whole(entropylong_run) -> bytes:
    """The uninterrupted run's merged output."""
    whole = (entropylong_run / "sequences.jsonl").read_bytes()
    rows = [json.loads(line) for line in whole.splitlines()]
    assert any(c["dropped"] == "max_reuse" for r in rows for c in r["candidates"])  # the cap binds
    return whole


@pytest.mark.parametrize("flag, value, change", [("--chunk_chars", "64", "config.chunk_chars: 2048 -> 64"),
                                                 pytest.param("--corpus_seed", "1", "config.builtin_corpus.seed: 0 -> 1",
                                                              marks=pytest.mark.long)])  # `make test-long`
def test_entropylong_rerun_with_other_chunk_flags_is_refused(entropylong_run, entropylong_whole, capsys, monkeypatch,
                                                             flag, value, change):
    """Contexts are looked up by chunk index: a rerun that would chunk the corpus differently never reuses. It
    is refused before any index work (the new chunks' index is never built)."""
    from data_pipelines.entropylong import run

    def no_index(*args, **kwargs):
        raise AssertionError("a refused rerun built an index")

    monkeypatch.setattr(run, "build_index", no_index)
    indexes = sorted((entropylong_run / "index").iterdir())
    assert data_main([*_el_argv(entropylong_run), flag, value]) == 1
    assert change in capsys.readouterr().err
    assert (entropylong_run / "sequences.jsonl").read_bytes() == entropylong_whole  # nothing overwritten
    assert sorted((entropylong_run / "index").iterdir()) == indexes


@pytest.mark.parametrize("step", [pytest.param("verified", marks=pytest.mark.long), "parts"])  # `make test-long`
def test_entropylong_killed_with_max_reuse_resumes_to_the_uninterrupted_output(tmp_path, ray_session, entropylong_run,
                                                                                entropylong_whole, step):
    """Killed in verification, or in assembly; the run killed in assembly starts from the uninterrupted run's
    index and verified parts (the steps before, which the verification kill covers), so it selects and assembles
    at once."""
    killed = tmp_path / "killed"
    if step == "parts":
        for name in ("index", "verified"):
            shutil.copytree(entropylong_run / name, killed / name)
    num_blocks = -(-len(entropylong_whole.splitlines()) // EL_CHUNK)
    done = _kill_and_resume(_el_argv(killed), killed, ray_session, parts=step)
    assert 2 <= done < num_blocks, done  # really interrupted mid-way through that step
    assert (killed / "sequences.jsonl").read_bytes() == entropylong_whole


@pytest.mark.long  # a kill point of the shared backbone that EntropyLong's [parts] kill covers in CI: `make test-long`
def test_dmap_scoring_killed_resumes_to_the_uninterrupted_output(tmp_path, ray_session):
    from data_pipelines.common.corpus import make_corpus

    src = tmp_path / "texts.jsonl"
    docs = make_corpus(num_entities=10, num_misc=6, seed=3).documents
    src.write_text("".join(json.dumps({"text": d["text"]}) + "\n" for d in docs) + "{bad\n")
    argv = ["dmap", "--input", str(src), "--chunk_size", "2", "--batch_size", "2", "--no_progress"]
    assert data_main([*argv, "--output", str(tmp_path / "whole")]) == 0
    killed = tmp_path / "killed"
    done = _kill_and_resume([*argv, "--output", str(killed)], killed, ray_session)
    num_blocks = -(-(len(docs) + 1) // 2)  # the texts and a malformed line, two per block
    assert 2 <= done < num_blocks, done
    for name in ("scores.jsonl", "dmap_report.json"):
        assert (killed / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name
    rejects = [json.loads(line) for line in (killed / "parts" / f"part-{num_blocks - 1:05d}.rejects.jsonl").open()]
    assert [r["_index"] for r in rejects] == [len(docs)] and "invalid JSON" in rejects[0]["reason"]
