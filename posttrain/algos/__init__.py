"""Algorithms: pure math in core.py, one file per algorithm, all registered by name in ALGORITHMS.

An algorithm module registers itself with ``@ALGORITHMS.register("name")``; that decorator is the only
registration. ``get_algorithm`` and ``algorithm_names`` import every module of this package once, on first
use (not when the package is imported: importing ``posttrain.algos`` stays cheap and loads no algorithm).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from posttrain.algos.base import ALGORITHMS, Algorithm


def algorithm_module_names() -> list[str]:
    """Every module of the ``posttrain.algos`` package, subpackages included (found by walking it, not listed)."""
    return [info.name for info in pkgutil.walk_packages(__path__, prefix=f"{__name__}.")]


@functools.cache
def _import_algorithm_modules() -> None:
    """Import every module of the package once, so each ``@ALGORITHMS.register`` has run."""
    for module in algorithm_module_names():
        importlib.import_module(module)


def get_algorithm(name: str) -> type[Algorithm]:
    """The algorithm class registered under ``name``; an unknown name raises ``KeyError`` listing the known ones."""
    _import_algorithm_modules()
    return ALGORITHMS.get(name)


def algorithm_names() -> list[str]:
    """The registered algorithm names, sorted."""
    _import_algorithm_modules()
    return ALGORITHMS.names()
