"""The engines are the bottom layer: no module of ``posttrain/engines`` imports (at the top or inside a
function) the trainer, ``dist``, algorithms, tasks, the config, rewards or data pipelines; and importing every
engine module loads none of them."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import posttrain.engines

ENGINES = Path(posttrain.engines.__file__).parent
FORBIDDEN = ("posttrain.trainer", "posttrain.dist", "posttrain.algos", "posttrain.tasks", "posttrain.config",
             "posttrain.async_rollouts", "posttrain.weight_sync", "posttrain.train", "rewards", "data_pipelines")


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return names


def test_no_engine_module_imports_upward() -> None:
    upward = [(path.name, name) for path in sorted(ENGINES.glob("*.py")) for name in _imports(path)
              if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)]
    assert upward == []


def test_importing_the_engines_loads_no_layer_above() -> None:
    modules = [f"posttrain.engines.{p.stem}" for p in sorted(ENGINES.glob("*.py"))
               if p.stem not in ("__init__", "weight_transfer")]  # weight_transfer needs vLLM installed
    code = (f"import sys; import {', '.join(modules)}; "
            f"print(sorted(m for m in sys.modules if m.startswith({FORBIDDEN!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
