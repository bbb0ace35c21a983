"""Algorithms: pure math in core.py, one file per algorithm, all registered by name in ALGORITHMS."""

from __future__ import annotations

import importlib

from posttrain.algos.base import ALGORITHMS, Algorithm

# Modules that register algorithms when imported; a new algorithm adds its module here.
ALGORITHM_MODULES = (
    "posttrain.algos.pg",
    "posttrain.algos.sft",
    "posttrain.algos.gpo.llm",
    "posttrain.algos.espo",
    "posttrain.algos.dupo.algo",
    "posttrain.algos.prefix_rl.algo",
    "posttrain.algos.ppo.algo",
    "posttrain.algos.ppo.text2grad",
    "posttrain.algos.prefix_rl.ppo",
)


def get_algorithm(name: str) -> type[Algorithm]:
    """The algorithm class registered under ``name`` (importing every algorithm module first)."""
    for module in ALGORITHM_MODULES:
        importlib.import_module(module)
    return ALGORITHMS.get(name)


def algorithm_names() -> list[str]:
    for module in ALGORITHM_MODULES:
        importlib.import_module(module)
    return ALGORITHMS.names()
