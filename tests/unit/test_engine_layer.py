"""Importing every engine module loads none of the layers above the engines (the trainer, ``dist``, algorithms,
tasks, the config, rewards, data pipelines). That no engine module imports them is the import-linter contract's
(``tests/unit/test_import_layers.py``); this checks what actually gets loaded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import posttrain.engines

ENGINES = Path(posttrain.engines.__file__).parent
FORBIDDEN = ("posttrain.trainer", "posttrain.dist", "posttrain.algos", "posttrain.tasks", "posttrain.config",
             "posttrain.async_rollouts", "posttrain.weight_sync", "posttrain.train", "rewards", "data_pipelines")
NEED_VLLM = ("weight_transfer", "weight_receiver", "weight_sender", "weight_sources", "colocated",
             "nccl_sender")  # weight_sync's modules that import vLLM at the top


def test_importing_the_engines_loads_no_layer_above() -> None:
    modules = [".".join(("posttrain.engines", *p.relative_to(ENGINES).with_suffix("").parts))
               for p in sorted(ENGINES.rglob("*.py")) if p.stem not in ("__init__", *NEED_VLLM)]
    code = (f"import sys; import {', '.join(modules)}; "
            f"print(sorted(m for m in sys.modules if m.startswith({FORBIDDEN!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_importing_the_weight_sync_package_loads_no_vllm() -> None:
    """Its vLLM names load on first use (the trainer imports the package whatever its rollout engine)."""
    code = "import sys; import posttrain.engines.weight_sync; print(sorted(m for m in sys.modules if m == 'vllm'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
