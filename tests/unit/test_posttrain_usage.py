"""``posttrain --help`` names every data pipeline, read from the data CLI's own list (it cannot go stale)."""

from __future__ import annotations

import pytest

from data_pipelines import cli as data_cli
from posttrain import cli


def test_the_data_line_names_every_pipeline_of_the_data_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("data ")]
    assert line.split(None, 1)[1] == f"run a data pipeline ({', '.join(data_cli.SUBCOMMANDS)})"
    for name in ("entropylong", "designer", "sci2pol", "dmap", "diversity", "text2grad-sft"):
        assert name in line


def test_the_data_line_follows_the_data_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(data_cli.SUBCOMMANDS, "new-pipeline", ("a pipeline added later", None))
    assert cli.describe("data").endswith(", new-pipeline)")
    assert cli.describe("tiny") == cli.SUBCOMMANDS["tiny"][1]  # a description without subcommands, as written


def test_the_data_cli_parses_every_pipeline_it_lists() -> None:
    parser = data_cli.build_parser()
    for name in data_cli.SUBCOMMANDS:
        assert parser.parse_known_args([name, *(["bench"] if name == "sci2pol" else []),
                                        *(["questions.jsonl"] if name == "diversity" else [])])[0].pipeline == name
