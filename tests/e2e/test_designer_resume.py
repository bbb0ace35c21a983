"""DESIGNER killed mid-run (SIGKILL inside the generation stage, or inside the long-CoT answer stage after
every whole-dataset step is stored) and rerun writes exactly what an uninterrupted run writes, rejects,
the seed-ratio report and the run report included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from data_pipelines.common.embed import HashingEmbedder
from data_pipelines.designer.run import run_pipeline
from tests.unit.ray_session import (
    kill_when_parts,
    ray_session_fixture,  # noqa: F401 - the `ray_session` fixture
)
from tests.unit.test_designer_scripted import ScriptedDesignerEngine, designer_args

REPO = Path(__file__).resolve().parents[2]

SMALL = "--chunk_size 2 --max-questions 12 --max-segments 6"
"""3 generation blocks and 3 answer blocks (of 6 and 5 records), so either kill lands mid-stage (each block is a
Ray task: blocks of one record cost time and no coverage)."""
_RUN = f"""
import sys
from data_pipelines.common.embed import HashingEmbedder
from data_pipelines.designer.run import run_pipeline
from tests.unit.test_designer_scripted import ScriptedDesignerEngine, designer_args
SMALL = {SMALL!r}
out, delay, delay_on, address = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
args = designer_args(out, *SMALL.split(), "--ray_address", address)
run_pipeline(args, ScriptedDesignerEngine(bad_first=1, delay=delay, delay_on=delay_on), HashingEmbedder())
"""
SAME = ("designer.jsonl", "8-filtered.jsonl", "8-filter.rejects.jsonl", "4-logics.jsonl", "2-seeds.jsonl",
        "2-seeds.shortfalls.jsonl", "5-segments.info.json")
"""Files a resumed run must write byte for byte as the uninterrupted one."""


@pytest.fixture(scope="module")
def clean(tmp_path_factory, ray_session) -> Path:
    out = tmp_path_factory.mktemp("designer") / "clean"
    run_pipeline(designer_args(out, *SMALL.split()), ScriptedDesignerEngine(bad_first=1), HashingEmbedder())
    assert (out / "designer.jsonl").read_text().count("\n") > 0
    return out


def _report(out: Path) -> dict:
    report = json.loads((out / "report.json").read_text())
    report.pop("seconds")
    return report


@pytest.mark.parametrize(("stage", "delay_on"), [
    pytest.param("7-generate", "Source text:", marks=pytest.mark.long),  # the second kill point: `make test-long`
    ("9-respond", "Think step by step")])
def test_kill_and_resume_equals_a_clean_run(tmp_path, ray_session, clean, stage, delay_on) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    killed = tmp_path / "killed"
    cmd = [sys.executable, "-c", _RUN, str(killed)]
    done = kill_when_parts(cmd + ["0.5", delay_on, ray_session], killed / stage, 1, env, timeout=600)
    assert done < len(list((clean / stage).glob("part-*[0-9].jsonl")))  # really stopped mid-stage
    assert not (killed / "designer.jsonl").exists()
    subprocess.run(cmd + ["0", delay_on, ray_session], check=True, env=env)
    for name in SAME:
        assert (killed / name).read_bytes() == (clean / name).read_bytes(), name
    assert _report(killed) == _report(clean)
