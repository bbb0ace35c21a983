"""One flag style on every command: snake_case declared and shown, kebab-case accepted as an alias."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from posttrain.common.cli_help import CommandParser, snake_option

ROOT = Path(__file__).resolve().parents[2]


def _parser() -> CommandParser:
    parser = CommandParser(prog="demo")
    parser.add_argument("--batch-size", type=int, default=4, help="rows")
    parser.add_argument("--no_progress", action="store_true")
    parser.add_argument("--model", default=None)
    parser.add_argument("-n", type=int, default=1)
    return parser


def test_snake_option_converts_long_options_only() -> None:
    assert snake_option("--batch-size") == "--batch_size"
    assert snake_option("--rollout.max-tokens") == "--rollout.max_tokens"
    assert snake_option("-n") == "-n"
    assert snake_option("input-file") == "input-file"


def test_both_spellings_parse_to_the_same_option() -> None:
    parser = _parser()
    for argv in (["--batch_size", "8"], ["--batch-size", "8"], ["--batch-size=8"], ["--batch_size=8"]):
        assert parser.parse_args(argv).batch_size == 8
    assert parser.parse_args(["--no-progress"]).no_progress is True


def test_values_and_tokens_after_double_dash_are_never_rewritten() -> None:
    parser = _parser()
    parser.add_argument("rest", nargs="*")
    args = parser.parse_args(["--model", "my-model--x", "-n", "2", "--", "--batch-size"])
    assert args.model == "my-model--x" and args.n == 2 and args.rest == ["--batch-size"]


def test_help_shows_the_snake_case_spelling_only() -> None:
    text = _parser().format_help()
    assert "--batch_size" in text and "--batch-size" not in text
    assert "(default: 4)" in text


def test_an_unknown_option_is_still_an_error_in_either_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(["--batch-sise", "8"])
    assert "--batch-sise" in capsys.readouterr().err


def test_subcommands_accept_both_spellings() -> None:
    parser = CommandParser(prog="demo")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("--max-questions", type=int, default=1)
    assert parser.parse_args(["run", "--max-questions", "3"]).max_questions == 3
    assert parser.parse_args(["run", "--max_questions", "3"]).max_questions == 3


def _declared_options(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            found += [(node.lineno, arg.value) for arg in node.args
                      if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--")]
    return found


def test_every_command_declares_its_flags_in_snake_case() -> None:
    """The one style in the source too (CommandParser would convert a kebab-case declaration, but the code and
    the --help a reader compares it with must say the same)."""
    kebab = [f"{path.relative_to(ROOT)}:{line} {name}"
             for package in ("posttrain", "rewards", "data_pipelines", "benchmarks", "scripts", "examples")
             for path in sorted((ROOT / package).rglob("*.py"))
             for line, name in _declared_options(path) if "-" in name[2:]]
    assert not kebab, "declare flags in snake_case:\n" + "\n".join(kebab)


def test_every_command_builds_its_parser_with_command_parser() -> None:
    plain = [str(path.relative_to(ROOT))
             for package in ("posttrain", "rewards", "data_pipelines", "benchmarks", "scripts", "examples")
             for path in sorted((ROOT / package).rglob("*.py"))
             if "argparse.ArgumentParser(" in path.read_text()]
    assert not plain, "use posttrain.common.cli_help.CommandParser in: " + ", ".join(plain)
