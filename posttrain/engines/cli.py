"""The ``--engine`` option of the subcommands that generate (``dupo-rerank``, ``prefix-cluster``): its arguments,
its check and the engine it builds, on the command's own model or the task's embedded tiny one."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from posttrain.engines.build import build_engine
from posttrain.engines.spec import HTTPSpec, parse_engine_spec
from posttrain.models.loading import load_tokenizer, resolve_cli_model


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
    kind = parse_engine_spec(engine).kind
    if kind not in kinds:
        raise ValueError(f"--engine {engine}: this command runs on {', '.join(kinds)} engines, not {kind}")


def command_engine(args: argparse.Namespace, model: str | None, task: str) -> Any:
    """The engine of a subcommand's ``--engine`` (``add_engine_arguments``): on its own path, else on ``model``
    (a path, hub id or alias) or ``task``'s embedded tiny causal model; an HTTP engine sends the token ids of
    that model's tokenizer unless the spec names the served model (``#MODEL``). ``args.seed`` seeds vLLM's engine."""
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
