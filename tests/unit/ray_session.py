"""One local Ray per test session for the data-backbone tests: import ``ray_session`` into a test module.

The fixture starts Ray through the runner's own ``init_ray`` (once: later runners in the same process
reuse it) and returns the cluster's GCS address, so a test's subprocess joins the same Ray instead of
paying for a second start-up.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_session() -> str:
    import ray

    from data_pipelines.common.ray_exec import init_ray

    init_ray(None, num_cpus=2)
    return ray.get_runtime_context().gcs_address
