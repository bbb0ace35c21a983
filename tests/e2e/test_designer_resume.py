"""DESIGNER killed mid-run (SIGKILL inside the generation stage) and rerun writes exactly what an
uninterrupted run writes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from data_pipelines.common.embed import HashingEmbedder
from data_pipelines.designer.run import run_pipeline
from tests.unit.ray_session import (
    kill_when_parts,
    ray_session_fixture,  # noqa: F401 - the `ray_session` fixture
)
from tests.unit.test_designer_scripted import ScriptedDesignerEngine, designer_args

REPO = Path(__file__).resolve().parents[2]

SMALL = "--chunk_size 1 --max-questions 12 --max-segments 6"  # 6 generation blocks: the kill lands mid-stage
_RUN = f"""
import sys
from data_pipelines.common.embed import HashingEmbedder
from data_pipelines.designer.run import run_pipeline
from tests.unit.test_designer_scripted import ScriptedDesignerEngine, designer_args
SMALL = {SMALL!r}
out, delay, address = sys.argv[1], float(sys.argv[2]), sys.argv[3]
args = designer_args(out, *SMALL.split(), "--ray_address", address)
run_pipeline(args, ScriptedDesignerEngine(bad_first=1, delay=delay), HashingEmbedder())
"""


def test_kill_and_resume_equals_a_clean_run(tmp_path, ray_session) -> None:
    clean = tmp_path / "clean"
    run_pipeline(designer_args(clean, *SMALL.split()), ScriptedDesignerEngine(bad_first=1), HashingEmbedder())
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    killed = tmp_path / "killed"
    cmd = [sys.executable, "-c", _RUN, str(killed)]
    done = kill_when_parts(cmd + ["0.5", ray_session], killed / "7-generate", 1, env, timeout=120)
    assert done < len(list((clean / "7-generate").glob("part-*[0-9].jsonl")))  # really stopped mid-stage
    assert not (killed / "designer.jsonl").exists()
    subprocess.run(cmd + ["0", ray_session], check=True, env=env)
    for name in ("designer.jsonl", "8-filtered.jsonl", "4-logics.jsonl", "2-seeds.jsonl"):
        assert (killed / name).read_bytes() == (clean / name).read_bytes(), name
    assert (clean / "designer.jsonl").read_text().count("\n") > 0
