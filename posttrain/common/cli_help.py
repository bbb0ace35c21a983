"""The one style of every ``posttrain`` subcommand: its flags, its argparse help, and the JSON summary it ends with.

Flags are spelled in snake_case everywhere (``--batch_size``, as the trainer's config fields and DeepSpeed's
launcher spell them); ``CommandParser`` also accepts the kebab-case spelling (``--batch_size``) as an alias,
so either works on every command while ``--help`` shows one.

Descriptions keep their line breaks, and each option's default is appended as ``(default: X)`` unless
there is none to show (``None``, a store-true flag) or the help text already says what the default is:
a help line never states its default twice. A command that reports a summary prints it as indented JSON
and, given an output path, also writes it there atomically (``emit_summary``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from posttrain.common.files import atomic_write_text


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """``RawDescriptionHelpFormatter`` plus the defaults, each stated once."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if default is None or default is argparse.SUPPRESS or action.nargs == 0:  # nargs 0: a flag
            return text
        if "default" in text.lower() or action.option_strings == []:
            return text
        return f"{text} (default: {default!r})" if isinstance(default, str) else f"{text} (default: {default})"


def snake_option(name: str) -> str:
    """``--foo-bar`` -> ``--foo_bar``; a positional name or a short option (``-n``) is left as it is."""
    return "--" + name[2:].replace("-", "_") if name.startswith("--") else name


class CommandParser(argparse.ArgumentParser):
    """The parser of every command: ``HelpFormatter`` by default, options declared in snake_case (a kebab-case
    declaration is converted), and on the command line each option's kebab-case spelling accepted as an alias.

    Only a token that names one of this parser's options is rewritten (``--batch_size 8`` and ``--batch_size=8``),
    never a value and nothing after ``--``; a subcommand's parser (``add_subparsers`` makes it a
    ``CommandParser`` too) rewrites its own options."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def add_argument(self, *names: str, **kwargs: Any) -> argparse.Action:  # type: ignore[override]
        return super().add_argument(*(snake_option(n) for n in names), **kwargs)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> tuple[argparse.Namespace, list[str]]:  # type: ignore[override]
        tokens = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(self._with_snake_options(tokens), namespace)

    def _with_snake_options(self, tokens: list[str]) -> list[str]:
        rewritten: list[str] = []
        for i, token in enumerate(tokens):
            if token == "--":
                return rewritten + tokens[i:]
            name, eq, value = token.partition("=")
            snake = snake_option(name)
            if snake != name and snake in self._option_string_actions:
                token = snake + eq + value
            rewritten.append(token)
        return rewritten


def emit_summary(summary: dict[str, Any], output: Path | None) -> None:
    """Print ``summary`` as indented JSON and, when ``output`` is given, write the same text there atomically."""
    text = json.dumps(summary, indent=2)
    print(text)
    if output is not None:
        atomic_write_text(output, text + "\n")


def summary_command(argv: list[str] | None, parser: argparse.ArgumentParser,
                    check: Callable[[argparse.Namespace], None],
                    run: Callable[[argparse.Namespace], dict[str, Any]]) -> int:
    """A subcommand that ends with a JSON summary: parse ``argv``, ``check`` the options (a ``ValueError``
    prints ``error: ...`` and returns 2), then ``emit_summary(run(args), args.output)`` and return 0."""
    args = parser.parse_args(argv)
    try:
        check(args)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    emit_summary(run(args), args.output)
    return 0
