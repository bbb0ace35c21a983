"""Every example in examples/ is complete and valid: each config file names its algorithm and builds and
validates as that algorithm's config, and so does every command its header gives (the run and the real-model
variant); each pipeline script's command parses with the data CLI's parser; every algorithm and every data
pipeline has an example; every header names its paper, what it shows and its measured time.

Running them is ``tests/e2e/test_examples_run.py`` (training) and the pipelines' own end-to-end tests."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from data_pipelines.cli import build_parser
from posttrain.algos import algorithm_names, get_algorithm
from posttrain.config import build_config, load_config_file, requested_algo

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.yaml"))
PIPELINE_SCRIPTS = sorted(EXAMPLES_DIR.glob("data_*.sh"))
PIPELINES = {"designer", "entropylong", "sci2pol", "dmap"}
HEADER_FIELDS = ("Paper", "Shows:", "Time on 2 CPU cores, one thread:", "Real model")


def header(path: Path) -> str:
    """The comment block at the top of an example (its lines without the leading '#')."""
    lines = []
    for line in path.read_text().splitlines():
        if line.startswith("#!"):
            continue
        if not line.startswith("#"):
            break
        lines.append(line[1:].strip())
    return "\n".join(lines)


def header_commands(path: Path) -> list[list[str]]:
    """The argv (after ``posttrain/train.py``) of every training command in ``path``'s header, with the world
    size its launcher asks for: ``[world_size, *argv]``."""
    commands = []
    for line in header(path).splitlines():
        match = re.search(r"(deepspeed(?: --num_gpus (\d+))? )?posttrain/train\.py (--config examples/\S+.*)", line)
        if match:
            commands.append([match.group(2) or "1", *shlex.split(match.group(3))])
    return commands


def pipeline_command(path: Path) -> list[str]:
    """The argv after ``posttrain data`` of the script's command (its one line starting ``posttrain data``)."""
    lines = [line for line in path.read_text().splitlines() if line.startswith("posttrain data ")]
    assert len(lines) == 1, f"{path.name}: expected one 'posttrain data' line, found {len(lines)}"
    argv = shlex.split(lines[0])[2:]
    assert argv[-1] == "$@", f"{path.name}: the command should end with \"$@\" (extra arguments)"
    return argv[:-1]


def test_there_are_examples() -> None:
    assert EXAMPLES and PIPELINE_SCRIPTS


def test_every_algorithm_has_an_example() -> None:
    covered = {load_config_file(str(path)).get("algo") for path in EXAMPLES}
    assert set(algorithm_names()) <= covered, sorted(set(algorithm_names()) - covered)


def test_every_pipeline_has_an_example() -> None:
    covered = {pipeline_command(path)[0] for path in PIPELINE_SCRIPTS}
    assert PIPELINES <= covered, sorted(PIPELINES - covered)


@pytest.mark.parametrize("path", EXAMPLES + PIPELINE_SCRIPTS, ids=lambda p: p.name)
def test_header_names_paper_purpose_time_and_real_model(path: Path) -> None:
    text = header(path)
    for field in HEADER_FIELDS:
        assert field in text, f"{path.name}: its header has no {field!r}"
    assert "arXiv" in text or "OpenReview" in text, f"{path.name}: name the paper's arXiv id (or OpenReview id)"
    assert "TIME_" not in text, f"{path.name}: the measured time is missing"


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


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_header_commands_build_and_validate(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The header's run command and its real-model variant (``--model smollm2-135m`` ...) are valid configs."""
    monkeypatch.chdir(EXAMPLES_DIR.parent)
    commands = header_commands(path)
    assert len(commands) >= 2, f"{path.name}: its header should give the run command and the real-model variant"
    for world_size, *argv in commands:
        assert argv[1] == f"examples/{path.name}", argv
        algo = requested_algo(argv)
        config = build_config(get_algorithm(algo).config_class, argv)
        config.validate(world_size=int(world_size))


@pytest.mark.parametrize("path", PIPELINE_SCRIPTS, ids=lambda p: p.name)
def test_pipeline_command_parses(path: Path) -> None:
    """Parsing only: the pipelines' own tests run these commands in miniature (EntropyLong and DMAP:
    tests/e2e/test_data_cli.py; Sci2Pol bench and corpus: tests/e2e/test_sci2pol_cli.py; DESIGNER, on a scripted
    engine: tests/unit/test_designer_scripted.py and tests/e2e/test_designer_resume.py)."""
    args = build_parser().parse_args(pipeline_command(path))
    assert args.pipeline in PIPELINES and args.output.startswith("outputs/")
