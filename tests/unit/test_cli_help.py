"""The shared help formatter states each default once: never ``(default: None)``, never twice."""

from __future__ import annotations

import argparse

import pytest

from posttrain.common.cli_help import HelpFormatter


def _help(parser_main, argv: list[str]) -> str:
    from contextlib import redirect_stdout
    from io import StringIO

    out = StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit):
        parser_main([*argv, "--help"])
    return " ".join(out.getvalue().split())


def test_defaults_are_stated_once() -> None:
    p = argparse.ArgumentParser(formatter_class=HelpFormatter)
    p.add_argument("--port", type=int, default=8000, help="TCP port.")
    p.add_argument("--name", default="x", help="Name.")
    p.add_argument("--model", default=None, help="Model (unset: the tiny one).")
    p.add_argument("--key", default="env", help="Key. Default: $KEY.")
    p.add_argument("--quiet", action="store_true", help="Quiet.")
    text = " ".join(p.format_help().split())
    assert "TCP port. (default: 8000)" in text
    assert "Name. (default: 'x')" in text
    assert "(default: None)" not in text
    assert text.lower().count("default") == 3  # port, name, and the key's own sentence
    assert "Quiet. (default" not in text


@pytest.mark.parametrize(("main", "argv"), [("rewards.server.cli:serve_main", []),
                                           ("data_pipelines.cli:data_main", ["entropylong"]),
                                           ("data_pipelines.cli:data_main", ["dmap"]),
                                           ("posttrain.standalone.gpo_control.cli:gpo_control_main", [])])
def test_commands_never_print_a_default_twice(main: str, argv: list[str]) -> None:
    import importlib

    module, name = main.split(":")
    text = _help(getattr(importlib.import_module(module), name), argv)
    assert "(default: None)" not in text
    assert "(default: " in text  # defaults are shown
