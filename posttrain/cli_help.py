"""The one help style of every ``posttrain`` subcommand's argparse parser.

Descriptions keep their line breaks, and each option's default is appended as ``(default: X)`` unless
there is none to show (``None``, a store-true flag) or the help text already says what the default is:
a help line never states its default twice.
"""

from __future__ import annotations

import argparse


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
