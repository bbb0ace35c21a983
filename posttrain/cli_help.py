"""The one style of every ``posttrain`` subcommand: its argparse help, and the JSON summary it ends with.

Descriptions keep their line breaks, and each option's default is appended as ``(default: X)`` unless
there is none to show (``None``, a store-true flag) or the help text already says what the default is:
a help line never states its default twice. A command that reports a summary prints it as indented JSON
and, given an output path, also writes it there atomically (``emit_summary``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


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


def add_engine_arguments(parser: argparse.ArgumentParser, kinds: tuple[str, ...], help_text: str) -> None:
    """The options every subcommand that generates shares: ``--engine`` (an engine spec of one of ``kinds``,
    ``posttrain.engines.spec``), ``--batch_size``, ``--device`` and ``--trust_remote_code``
    (``command_engine`` takes them)."""
    forms = {"hf": "hf[:PATH]", "vllm": "vllm[:PATH]", "http": "http://HOST:PORT[/v1][#MODEL]"}
    parser.add_argument("--engine", default="hf", help=f"{help_text} An engine spec: "
                        f"{', '.join(forms.get(k, k) for k in kinds)}; without a path the engine serves the "
                        "command's model.")
    parser.add_argument("--batch_size", type=int, default=256, help="Most sequences per generate batch (hf, vllm).")
    parser.add_argument("--device", default=None, help="hf: torch device; default cuda if available, else cpu.")
    parser.add_argument("--trust_remote_code", action="store_true", help="Run the checkpoint's own modeling code.")


def check_engine_argument(engine: str, kinds: tuple[str, ...]) -> None:
    """``--engine`` parses as an engine spec of one of ``kinds``; a ``ValueError`` names what is wrong."""
    from posttrain.engines.spec import parse_engine_spec

    kind = parse_engine_spec(engine).kind
    if kind not in kinds:
        raise ValueError(f"--engine {engine}: this command runs on {', '.join(kinds)} engines, not {kind}")


def command_engine(args: argparse.Namespace, model: str | None, task: str) -> Any:
    """The engine of a subcommand's ``--engine`` (``add_engine_arguments``): on its own path, else on ``model``
    (a path, hub id or alias) or ``task``'s embedded tiny causal model; an HTTP engine sends the token ids of
    that model's tokenizer unless the spec names the served model (``#MODEL``). ``args.seed`` seeds vLLM's engine."""
    from posttrain.engines.build import build_engine
    from posttrain.engines.spec import HTTPSpec, parse_engine_spec
    from posttrain.models.loading import load_tokenizer, resolve_cli_model

    spec = parse_engine_spec(args.engine)
    tokenizer = None
    if isinstance(spec, HTTPSpec):
        if not spec.model or model:
            path = resolve_cli_model(model, task, "hf")
            tokenizer = load_tokenizer(path, trust_remote_code=args.trust_remote_code)
    elif spec.location is None:
        spec = dataclasses.replace(spec, path=resolve_cli_model(model, task, spec.kind))
    elif model:
        raise ValueError(f"--engine {spec} names its own checkpoint; drop the model option or the engine's path")
    return build_engine(spec, tokenizer=tokenizer, device=args.device, max_batch_size=args.batch_size,
                        trust_remote_code=args.trust_remote_code, seed=args.seed)


def emit_summary(summary: dict[str, Any], output: Path | None) -> None:
    """Print ``summary`` as indented JSON and, when ``output`` is given, write the same text there atomically."""
    text = json.dumps(summary, indent=2)
    print(text)
    if output is not None:
        from data_pipelines.common.io import atomic_write_text

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
