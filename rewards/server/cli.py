"""``posttrain serve``: run the reward server (mR3 rubric scoring + OpenAI-compatible API) with uvicorn.

Access (``access``): loopback by default; another ``--host`` needs an API key, read from
``$POSTTRAIN_REWARD_API_KEY`` or ``--api_key_file``, never from the command line. Limits: ``--max_connections``
(uvicorn's ``limit_concurrency``, 503 beyond), ``--keep_alive_timeout`` and ``--body_timeout`` (408 for a body
slower than that), besides the request size, queue and per-request time.
"""

from __future__ import annotations

import argparse
import logging
import sys

from posttrain.common.cli_help import CommandParser
from posttrain.engines.spec import parse_engine_spec
from posttrain.models.loading import DTYPES
from posttrain.models.tiny import RECIPES, recipe_dir
from rewards.server.access import API_KEY_ENV, bind_problem, read_api_key
from rewards.server.app import ServerSettings, create_app
from rewards.server.backends import EMBEDDED_RECIPE, load_served_model


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(
        prog="posttrain serve",
        description="Serve a generative reward model (mR3-style rubric scoring: pointwise / pairwise / binary) "
                    "and an OpenAI-compatible /v1/completions + /v1/chat/completions API. With no --model, "
                    "serves the embedded tiny reward model (built and warm-started on first use).")
    p.add_argument("--host", default="127.0.0.1",
                   help=f"Interface to bind (default 127.0.0.1). Any non-loopback address needs an API key "
                        f"(${API_KEY_ENV} or --api_key_file); without one it is refused.")
    p.add_argument("--port", type=int, default=8000, help="TCP port (0 = any free port).")
    p.add_argument("--model", default=None, help="Model path, hub id or packaged alias (smollm2-135m); "
                                                 "unset = the embedded tiny reward model.")
    p.add_argument("--backend", default="hf",
                   help="Generation engine, an engine spec: hf[:PATH] (the project's HF engine, CPU/GPU; "
                        "'transformers' is another name for it), vllm[:PATH] (the project's vLLM engine: GPU, or "
                        "vLLM's CPU build), fake (no model; tests and benchmarks). Without a path it serves --model.")
    p.add_argument("--device", default="cpu", help="transformers backend device (cpu, cuda, cuda:1).")
    p.add_argument("--dtype", default="auto", choices=list(DTYPES), help="Model dtype (auto = the checkpoint's).")
    p.add_argument("--max_model_len", type=int, default=None, help="vllm: context length.")
    p.add_argument("--api_key_file", default=None,
                   help=f"A file holding the API key every request but /health must send as 'Authorization: "
                        f"Bearer KEY' (whitespace stripped). Or set ${API_KEY_ENV}; the key itself is never a "
                        "flag, which ps would show to every user. Unset and no variable: no key (loopback only).")
    p.add_argument("--api_key", default=None, help=argparse.SUPPRESS)  # refused (``serve_main``), not abbreviated
    p.add_argument("--batch_size", "--max_batch_size", dest="max_batch_size", type=int, default=16,
                   help="Most prompts per generate call, as every command's --batch_size (1 = no batching).")
    p.add_argument("--no_batching", action="store_true", help="One prompt per generate call.")
    p.add_argument("--batch_wait_ms", type=float, default=2.0, help="Wait for a batch to fill when idle.")
    p.add_argument("--max_queue", type=int, default=256, help="Generations waiting; beyond this requests get 429.")
    p.add_argument("--timeout", type=float, default=60.0, help="Seconds per request (queue + generation); then 504.")
    p.add_argument("--max_request_bytes", type=int, default=1_000_000, help="Largest request body; larger gets 413.")
    p.add_argument("--body_timeout", type=float, default=30.0,
                   help="Seconds a request body may take to arrive after its headers; then 408 and the connection "
                        "is closed (a slow client cannot hold a connection).")
    p.add_argument("--max_connections", type=int, default=128,
                   help="Open connections at once, idle keep-alive ones included; beyond, requests get 503.")
    p.add_argument("--keep_alive_timeout", type=float, default=30.0,
                   help="Seconds an idle keep-alive connection stays open.")
    p.add_argument("--max_tokens_cap", type=int, default=None,
                   help="Largest max_tokens a request may ask for (unset: only the model's context limits it).")
    p.add_argument("--rubric_max_tokens", type=int, default=None,
                   help="Cap on a verdict's default budget (unset: what the model's context leaves after the "
                        "prompt; mR3 reasons for thousands of tokens; the tiny judge uses its own small budget).")
    p.add_argument("--template", default="auto", choices=["auto", "mr3", "compact"],
                   help="Rubric prompt style: mr3 = mR3's official prompts, byte for byte; compact = the embedded "
                        "tiny judge's layout; auto = compact for the embedded tiny model, mr3 otherwise. (A "
                        "request's own 'template' field picks the mR3 format: pairwise-general, safety-response...)")
    p.add_argument("--served_model_name", default=None, help="Name in /v1/models (default: --model).")
    p.add_argument("--fake_base_latency_ms", type=float, default=0.0,
                   help="fake backend: simulated fixed cost of one generate call.")
    p.add_argument("--fake_per_item_ms", type=float, default=0.0,
                   help="fake backend: simulated extra cost per prompt in a generate call.")
    p.add_argument("--threads", type=int, default=0,
                   help="torch intra-op threads (0 = torch's default; 1 is fastest on a busy small CPU).")
    p.add_argument("--log_level", default="info", choices=["debug", "info", "warning", "error"])
    return p


def announce_judge_build() -> None:
    """Say so when the embedded judge is about to be built (minutes of CPU, once), and how to do it ahead."""
    if not recipe_dir(RECIPES.get(EMBEDDED_RECIPE)).is_dir():
        logging.getLogger(__name__).warning(
            "building the embedded judge (tiny recipe %s): about 7 minutes on one CPU core, once; progress is "
            "logged below. Build it ahead with `make judge` (or `posttrain tiny --recipe %s`).",
            EMBEDDED_RECIPE, EMBEDDED_RECIPE)


def serve_main(argv: list[str]) -> int:
    """Entry point of ``posttrain serve``; returns the exit status."""
    args = build_parser().parse_args(argv)
    for name in ("max_batch_size", "max_queue", "max_request_bytes", "max_tokens_cap", "rubric_max_tokens",
                 "max_connections"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            flag = "batch_size" if name == "max_batch_size" else name
            print(f"posttrain serve: --{flag} must be >= 1, got {getattr(args, name)}",
                  file=sys.stderr)
            return 2
    for name in ("timeout", "body_timeout", "keep_alive_timeout"):
        if getattr(args, name) <= 0:
            print(f"posttrain serve: --{name} must be > 0, got {getattr(args, name)}", file=sys.stderr)
            return 2
    if args.api_key is not None:
        print(f"posttrain serve: --api_key is refused: a key on the command line is visible to every user in ps. "
              f"Set ${API_KEY_ENV}, or put it in a file and pass --api_key_file", file=sys.stderr)
        return 2
    try:
        api_key = read_api_key(args.api_key_file)
    except ValueError as err:
        print(f"posttrain serve: {err}", file=sys.stderr)
        return 2
    problem = bind_problem(args.host, api_key)
    if problem:
        print(f"posttrain serve: {problem}", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    import uvicorn

    if args.threads > 0:
        import torch

        torch.set_num_threads(args.threads)
    try:
        if args.model is None and parse_engine_spec(args.backend) == parse_engine_spec("hf"):
            announce_judge_build()
        served = load_served_model(args.backend, args.model, device=args.device, dtype=args.dtype,
                                   max_batch_size=args.max_batch_size, max_model_len=args.max_model_len,
                                   base_latency_s=args.fake_base_latency_ms / 1000.0,
                                   per_item_latency_s=args.fake_per_item_ms / 1000.0)
    except (ValueError, FileNotFoundError) as err:
        print(f"posttrain serve: {err}", file=sys.stderr)
        return 2
    settings = ServerSettings(
        api_key=api_key, max_batch_size=args.max_batch_size, max_queue=args.max_queue,
        batching=not args.no_batching, batch_wait_ms=args.batch_wait_ms, timeout_s=args.timeout,
        max_request_bytes=args.max_request_bytes, max_tokens_cap=args.max_tokens_cap,
        rubric_max_tokens=args.rubric_max_tokens, style=None if args.template == "auto" else args.template,
        model_name=args.served_model_name, body_timeout_s=args.body_timeout, max_connections=args.max_connections,
        keep_alive_s=args.keep_alive_timeout)
    app = create_app(served, settings)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, **settings.uvicorn_options())
    return 0


if __name__ == "__main__":
    raise SystemExit(serve_main(sys.argv[1:]))
