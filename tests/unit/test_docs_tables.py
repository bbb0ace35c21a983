"""README.md and docs/ARCHITECTURE.md name the algorithms and the ``posttrain`` subcommands the code registers:
every registered one is listed, and no listed name is unknown, so the documents cannot go stale."""

from __future__ import annotations

import re
from pathlib import Path

import posttrain.cli
from posttrain.algos import algorithm_names
from posttrain.cli import SUBCOMMANDS

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
ARCHITECTURE = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
COMMAND = re.compile(r"`posttrain ([a-z0-9-]+)")
ALGO_FLAG = re.compile(r"--algo ([a-z0-9-]+)")


def _table(text: str, header: str) -> list[list[str]]:
    """The body rows of the Markdown table whose header row starts with the cell ``header``, split into cells
    (``\\|`` inside a cell is text, not a separator)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if re.match(rf"\|\s*{re.escape(header)}\s*\|", line)), None)
    assert start is not None, f"no table with the header cell {header!r}"
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip("|"))])
    return rows


def _table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|")]


def test_the_readme_lists_every_algorithm() -> None:
    (listed,) = re.findall(r"--algo \{([a-z0-9,-]+)\}", "\n".join(_table_rows(README)))
    assert sorted(listed.split(",")) == algorithm_names()


def test_the_architecture_lists_every_algorithm() -> None:
    (listed,) = re.findall(r"\(`--algo ([a-z0-9 |\n-]+)`\)", ARCHITECTURE)
    assert sorted(name.strip() for name in listed.split("|")) == algorithm_names()


def test_the_architecture_layout_places_every_algorithm() -> None:
    """The layout's ``algos/`` block names each algorithm beside the file or package that holds it."""
    block = re.search(r"\n  algos/\n(.*?)\n  standalone/", ARCHITECTURE, re.DOTALL).group(1)
    missing = [name for name in algorithm_names() if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", block)]
    assert not missing, f"docs/ARCHITECTURE.md's layout does not place {missing}"


def test_every_algorithm_the_documents_name_is_registered() -> None:
    names = set(algorithm_names())
    named = set(ALGO_FLAG.findall(README + ARCHITECTURE)) - {"NAME"}
    assert named <= names, sorted(named - names)
    composed = {re.sub(r"`", "", name).strip() for row in _table(ARCHITECTURE, "algorithm") for name in row[0].split(",")}
    assert composed <= names, sorted(composed - names)


def test_the_architecture_maps_every_subcommand_to_its_function() -> None:
    rows = _table(ARCHITECTURE, "command")
    documented = {}
    for command_cell, function_cell in rows:
        (command,) = set(COMMAND.findall(command_cell))
        documented[command] = function_cell.strip("`")
    assert documented == {name: target for name, (target, _) in SUBCOMMANDS.items()}


def test_every_subcommand_the_readme_and_cli_docstring_name_exists() -> None:
    named = set(COMMAND.findall("\n".join(_table_rows(README))))
    assert named <= set(SUBCOMMANDS), sorted(named - set(SUBCOMMANDS))
    listed = re.search(r"train \|[a-z0-9 |\n-]+", posttrain.cli.__doc__).group(0)
    assert sorted(name.strip() for name in listed.split("|")) == sorted(SUBCOMMANDS)
