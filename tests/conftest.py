"""Test-wide settings: nothing may reach a model hub, and GPU tests skip without a GPU."""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Tiny models on a shared 2-core machine: one thread avoids thread-pool contention (each op is ~us).
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest

E2E = Path(__file__).parent / "e2e"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every end-to-end test is ``heavy`` (the unit tier, ``-m "not heavy"``, leaves them out); modules run
    heaviest first; GPU tests skip without a GPU."""
    for item in items:
        if E2E in item.path.parents:
            item.add_marker(pytest.mark.heavy)
    items[:] = heaviest_modules_first(items)
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if has_gpu:
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


MODULE_SECONDS = Path(__file__).parent / "module_seconds.json"
UNMEASURED_HEAVY_TEST_SECONDS = 20.0


def heaviest_modules_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The items grouped by module, longest module first, the order within a module kept. A module's length is
    its measured seconds in ``module_seconds.json`` (``scripts/module_seconds.py`` writes it), or for a module
    not measured yet 20 s per ``heavy`` test. The parallel run (``--dist loadscope --no-loadscope-reorder``)
    hands whole modules to workers in this order, so a long module never starts last while the other worker
    idles."""
    measured = json.loads(MODULE_SECONDS.read_text()) if MODULE_SECONDS.exists() else {}
    root = Path(__file__).parent.parent
    estimate: dict[Path, float] = {}
    for item in items:
        estimate[item.path] = estimate.get(item.path, 0.0) + UNMEASURED_HEAVY_TEST_SECONDS * ("heavy" in item.keywords)
    for path, heavy_estimate in estimate.items():
        relative = path.relative_to(root).as_posix() if root in path.parents else path.as_posix()
        estimate[path] = measured.get(relative, heavy_estimate)
    first_seen = {path: rank for rank, path in enumerate(estimate)}
    return sorted(items, key=lambda item: (-estimate[item.path], first_seen[item.path]))


@pytest.fixture(scope="session")
def smollm2() -> str:
    """The packaged SmolLM2-135M-Instruct as a Hugging Face folder (converted once into the user cache)."""
    from posttrain.models.pretrained import build_pretrained

    return str(build_pretrained("smollm2-135m"))
