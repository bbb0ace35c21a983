"""Test-wide settings: nothing may reach a model hub, and GPU tests skip without a GPU."""

from __future__ import annotations

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
    """Every end-to-end test is ``heavy`` (the unit tier, ``-m "not heavy"``, leaves them out); GPU tests skip
    without a GPU."""
    for item in items:
        if E2E in item.path.parents:
            item.add_marker(pytest.mark.heavy)
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


@pytest.fixture(scope="session")
def smollm2() -> str:
    """The packaged SmolLM2-135M-Instruct as a Hugging Face folder (converted once into the user cache)."""
    from posttrain.models.pretrained import build_pretrained

    return str(build_pretrained("smollm2-135m"))
