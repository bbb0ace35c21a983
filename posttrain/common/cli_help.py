"""The one style of every ``posttrain`` subcommand: its argparse help, and the JSON summary it ends with.

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
