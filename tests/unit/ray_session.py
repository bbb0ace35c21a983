"""One local Ray per test session for the data-backbone tests: import ``ray_session_fixture`` into a
test module and ask for ``ray_session``.

The fixture starts Ray through the runner's own ``init_ray`` (once: later runners in the same process
reuse it) and returns the cluster's GCS address, so a test's subprocess joins the same Ray instead of
paying for a second start-up; ``kill_when_parts`` SIGKILLs such a subprocess mid-run.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest


@pytest.fixture(scope="session", name="ray_session")
def ray_session_fixture() -> str:
    import ray

    from data_pipelines.common.ray_exec import init_ray

    init_ray(None, num_cpus=2)
    return ray.get_runtime_context().gcs_address


def kill_when_parts(cmd: list[str], parts_dir: Path, at_least: int, env: dict, timeout: float = 300) -> int:
    """Start ``cmd``, SIGKILL it once ``parts_dir`` holds ``at_least`` finished parts; the parts done then."""
    proc = subprocess.Popen(cmd, env=env)
    deadline = time.time() + timeout
    while time.time() < deadline and len(list(parts_dir.glob("part-*[0-9].jsonl"))) < at_least:
        if proc.poll() is not None:
            raise AssertionError(f"{cmd[:4]} ended (rc={proc.returncode}) before {at_least} parts were done")
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return len(list(parts_dir.glob("part-*[0-9].jsonl")))
