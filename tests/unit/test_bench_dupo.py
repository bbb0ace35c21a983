"""bench_dupo.py measures what a user runs: its math DuPO arms are ``--algo dupo``'s shipped defaults (budgets,
batch, learning rate, snapshot refresh), and the gold-label oracle gets the same budgets. Issue 29: the default
run was a configuration no benchmark had measured, and it ended near its start."""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks.bench_dupo import ARMS, COMMON
from posttrain.algos.dupo.algo import DuPOConfig
from posttrain.algos.pg import GRPOConfig
from posttrain.config import build_config

NOT_THE_METHOD = {"eval_every", "pass_k", "save_every", "progress", "num_threads"}
"""Fields the benchmark may set to its own values: how often it evaluates and saves, and how it runs."""


@pytest.mark.parametrize("arm", ["dupo", "dupo-no-filter", "dupo-offline-selection"])
def test_math_dupo_arms_run_the_shipped_defaults(arm: str) -> None:
    measured = build_config(DuPOConfig, [*ARMS[arm], *COMMON])
    shipped = DuPOConfig(algo="dupo")
    differ = {f.name for f in dataclasses.fields(DuPOConfig)
              if getattr(measured, f.name) != getattr(shipped, f.name)} - NOT_THE_METHOD
    assert differ <= {"dual_selection"}, f"{arm} measures a configuration the defaults do not ship: {sorted(differ)}"


def test_the_oracle_gets_dupos_budget_and_batch() -> None:
    oracle = build_config(GRPOConfig, [*ARMS["grpo-oracle"], *COMMON])
    dupo = DuPOConfig(algo="dupo")
    for name in ("task", "steps", "prompts_per_step", "group_size", "lr", "max_new_tokens", "temperature"):
        assert getattr(oracle, name) == getattr(dupo, name), name


def test_the_defaults_are_the_measured_budget() -> None:
    """The values bench_dupo.py's committed curves were measured with (benchmarks/dupo.md)."""
    config = DuPOConfig(algo="dupo")
    assert (config.steps, config.prompts_per_step, config.group_size, config.lr) == (120, 8, 8, 1e-4)
    assert (config.max_new_tokens, config.dual_max_new_tokens, config.dual_refresh_every) == (6, 4, 5)
