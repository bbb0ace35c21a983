"""``@ALGORITHMS.register`` is the only registration: walking ``posttrain.algos`` finds every module that
registers an algorithm, and an unknown name fails listing the known ones."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import posttrain.algos
from posttrain.algos import algorithm_module_names, algorithm_names, get_algorithm

ALGOS_DIR = Path(posttrain.algos.__file__).parent
REGISTERS = re.compile(r'^@ALGORITHMS\.register\("([^"]+)"\)', re.MULTILINE)


def _registering_sources() -> dict[str, list[str]]:
    """Module name -> the names it registers, read from every .py file under posttrain/algos (no import)."""
    found = {}
    for path in sorted(ALGOS_DIR.rglob("*.py")):
        names = REGISTERS.findall(path.read_text())
        if names:
            parts = path.relative_to(ALGOS_DIR.parent.parent).with_suffix("").parts
            found[".".join(parts)] = names
    return found


def test_every_registering_module_is_found() -> None:
    sources = _registering_sources()
    assert len(sources) >= 8  # the scan itself works: pg, sft, espo, gpo, dupo, ppo, text2grad, prefix-rl
    missing = set(sources) - set(algorithm_module_names())
    assert not missing, f"modules under posttrain/algos that the package walk does not reach: {sorted(missing)}"


def test_the_registry_holds_exactly_the_registered_names() -> None:
    declared = sorted(name for names in _registering_sources().values() for name in names)
    assert algorithm_names() == declared


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(KeyError) as err:
        get_algorithm("no-such-algo")
    message = str(err.value)
    assert "'no-such-algo'" in message
    assert all(name in message for name in algorithm_names())


def test_importing_the_package_loads_no_algorithm() -> None:
    """The walk runs on first use, not at ``import posttrain.algos`` (a fresh interpreter)."""
    code = ("import sys, posttrain.algos; "
            "print(sorted(m for m in sys.modules if m.startswith('posttrain.algos.') and m != 'posttrain.algos.base'))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    loaded = [m for m in ast.literal_eval(result.stdout.strip()) if m in _registering_sources()]
    assert loaded == []
