"""``posttrain data sci2pol bench`` token budgets: the demo's on the built-in items, real ones with --bench_dir,
a flag always winning."""

import pytest

from data_pipelines.sci2pol.options import BenchConfig, add_sci2pol_args
from posttrain.common.cli_help import CommandParser


def _bench_args(*argv: str) -> BenchConfig:
    parser = CommandParser()
    add_sci2pol_args(parser)
    return BenchConfig.from_args(parser.parse_args(["bench", *argv]))


def _budgets(config: BenchConfig) -> tuple[int, int, int]:
    return config.max_new_tokens, config.open_tokens, config.judge_tokens


def test_built_in_items_keep_the_demo_budgets_and_bench_data_gets_real_ones(tmp_path):
    assert _budgets(_bench_args()) == (16, 96, 96)
    assert _budgets(_bench_args("--bench_dir", str(tmp_path))) == (256, 2048, 256)
    assert _budgets(_bench_args("--bench_dir", str(tmp_path), "--open_tokens", "512")) == (256, 512, 256)
    assert _budgets(_bench_args("--judge-tokens", "48")) == (16, 96, 48)
    with pytest.raises(SystemExit, match="--max_new_tokens must be >= 1, got 0"):
        _bench_args("--max_new_tokens", "0")
