"""Every config file in examples/ names its algorithm and builds and validates as that algorithm's config."""

from __future__ import annotations

from pathlib import Path

import pytest

from posttrain.algos import get_algorithm
from posttrain.config import build_config, load_config_file, requested_algo

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


def test_there_are_examples() -> None:
    assert EXAMPLES


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_builds_as_its_algorithm(path: Path) -> None:
    declared = load_config_file(str(path)).get("algo")
    assert declared, f"{path.name} has no 'algo:' key"
    argv = ["--config", str(path)]
    assert requested_algo(argv) == declared
    config = build_config(get_algorithm(declared).config_class, argv)
    config.validate(world_size=2)  # the files are written for 1 or 2 ranks
    assert config.algo == declared
    for key, value in load_config_file(str(path)).items():
        assert getattr(config, key) == value, key
