"""``posttrain rollout-worker``: start a remote rollout worker, a vLLM OpenAI server a trainer can sync.

    posttrain rollout-worker --model PATH_OR_ALIAS --port 8100 [--host 0.0.0.0] [-- extra vllm serve args]

then train with ``--rollout vllm-remote:http://HOST:8100[,http://HOST2:8100]``. The
command runs ``python -m vllm.entrypoints.openai.api_server`` (the server behind ``vllm serve``) with:

- ``VLLM_SERVER_DEV_MODE=1``: vLLM's dev-mode RLHF routes (``/init_weight_transfer_engine``,
  ``/start_weight_update``, ``/update_weights``, ``/finish_weight_update``, ``/weight_info``), which the
  trainer's ``RemoteVLLMEngine`` drives. They accept new weights (and ``/collective_rpc`` runs code) for
  anyone who can reach the port, so with a shared secret in the environment (``worker_auth``:
  ``POSTTRAIN_WORKER_SECRET`` or ``POSTTRAIN_WORKER_SECRET_FILE``) every route but ``/health`` answers 401
  without it (``--middleware`` = ``worker_auth.SharedSecretMiddleware``), and a non-loopback ``--host``
  without a secret is refused.
- ``--worker-extension-cls`` = ``weight_receiver.WORKER_EXTENSION``: vLLM imports it in its worker
  process, which registers our gloo weight transport there; ``--weight-transfer-config`` selects it on
  CPU and vLLM's own ``nccl`` on CUDA (``remote_sync.default_transport``: the trainer decides the same way).
- ``--logprobs-mode processed_logprobs``: completions report the log-probs of the distribution actually
  sampled (after temperature / top-k / top-p), which the importance ratio needs.
- ``--served-model-name default``: the name ``RemoteVLLMEngine`` asks for.
- ``--generation-config vllm``: a request's unset sampling fields take vLLM's neutral defaults, not the
  checkpoint's ``generation_config.json`` (its top-k or repetition penalty), as in the colocated engine, which
  passes complete sampling parameters; the checkpoint's eos ids still end a completion on both.
- ``--structured-outputs-config``: xgrammar with ``disable_any_whitespace``, the grammar of the colocated
  engine and the HF engine for ``SamplingParams.json_schema`` (compact JSON).
- On CPU: ``--enforce-eager``, chunked prefill off (``vllm.cpu_scheduler_options``: a split seeded request
  crashes vLLM's CPU sampler) and ``VLLM_CPU_KVCACHE_SPACE`` (GiB of KV cache, default 1 here instead
  of vLLM's share of the machine's memory), set only where the user has not set them.

Anything after ``--`` goes to vLLM unchanged (e.g. ``-- --tensor-parallel-size 2``), except the options that
decide the bind or the middleware (``--host``, ``--uds``, ``--middleware``: ``REFUSED_PASSTHROUGH``), which are
refused; the non-loopback rule is checked again on the host vLLM's own parser reads from the final command.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from posttrain.common.cli_help import CommandParser
from posttrain.common.memory import MALLOC_ENV
from posttrain.engines.base import PROCESSED_LOGPROBS
from posttrain.engines.remote import SERVED_MODEL_NAME
from posttrain.engines.vllm_setup import INSTALL_HINT, cpu_scheduler_options, vllm_servable_problem
from posttrain.engines.weight_sync.rendezvous import free_port
from posttrain.engines.worker_auth import (
    SECRET_ENV,
    SECRET_FILE_ENV,
    SharedSecretMiddleware,
    is_loopback,
    worker_secret,
)
from posttrain.models.pretrained import resolve_model_name


def worker_command(model: str, port: int, host: str = "127.0.0.1", dtype: str = "auto", max_model_len: int = 0,
                   seed: int = 0, cuda: bool | None = None, extra: list[str] | None = None,
                   secret: bool = False) -> list[str]:
    """The vLLM server command line of a rollout worker (``model`` already resolved to a path); ``secret``:
    put its routes behind the shared secret of its environment (the secret itself is not on the line)."""
    from posttrain.engines.weight_sync import GLOO_BACKEND, WORKER_EXTENSION  # imports vLLM

    if cuda is None:
        import torch

        cuda = torch.cuda.is_available()
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--host", host,
               "--port", str(port), "--served-model-name", SERVED_MODEL_NAME, "--dtype", dtype, "--seed", str(seed),
               "--logprobs-mode", PROCESSED_LOGPROBS, "--generation-config", "vllm",
               "--worker-extension-cls", WORKER_EXTENSION,
               "--weight-transfer-config", json.dumps({"backend": "nccl" if cuda else GLOO_BACKEND}),
               "--structured-outputs-config", json.dumps({"backend": "xgrammar", "disable_any_whitespace": True})]
    if secret:
        command += ["--middleware", f"{SharedSecretMiddleware.__module__}.{SharedSecretMiddleware.__name__}"]
    if max_model_len:
        command += ["--max-model-len", str(max_model_len)]
    if not cuda:
        command.append("--enforce-eager")
        scheduler = cpu_scheduler_options(model, max_model_len or None)
        command += ["--no-enable-chunked-prefill", "--max-num-batched-tokens", str(scheduler["max_num_batched_tokens"])]
    return command + list(extra or [])


def worker_environment(base: dict[str, str] | None = None, cuda: bool | None = None) -> dict[str, str]:
    """The environment of a rollout worker: ``base`` (default ``os.environ``) plus dev mode, the CPU defaults
    and fixed malloc thresholds (``common.memory.MALLOC_ENV``); user settings win."""
    env = dict(os.environ if base is None else base)
    env["VLLM_SERVER_DEV_MODE"] = "1"
    # The colocated engine's in-process default (engines/vllm_setup.py) must not leak into a server, whose
    # engine runs in its own process.
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
    if cuda is None:
        import torch

        cuda = torch.cuda.is_available()
    if not cuda:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    for name, value in MALLOC_ENV.items():  # flat resident memory over many weight syncs
        env.setdefault(name, value)
    return env


def _parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="posttrain rollout-worker", description=__doc__.split("\n\n")[0],
                           epilog="Arguments after -- go to vLLM's OpenAI server unchanged.")
    parser.add_argument("--model", required=True, help="checkpoint folder, hub id or alias (e.g. smollm2-135m)")
    parser.add_argument("--port", type=int, default=8100, help="port to serve on (default 8100)")
    parser.add_argument("--host", default="127.0.0.1",
                        help=f"address to bind (default 127.0.0.1; a private interface for other machines, which "
                             f"needs the shared secret in ${SECRET_ENV} or a file named by ${SECRET_FILE_ENV})")
    parser.add_argument("--dtype", default="auto", help="weight dtype: auto, float32, bfloat16, float16")
    parser.add_argument("--max_model_len", type=int, default=0, help="prompt + completion tokens; 0 = the model's")
    parser.add_argument("--seed", type=int, default=0, help="the server's base seed (requests carry their own)")
    return parser


def rollout_worker_main(argv: list[str]) -> int:
    """Replace this process with the worker's vLLM server (so signals and the exit status are vLLM's)."""
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    args = _parser().parse_args(argv)
    if not 0 < args.port < 65536:
        print(f"error: --port {args.port} must be in 1..65535", file=sys.stderr)
        return 2
    try:
        secret = worker_secret()
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    problem = unsecured_bind_problem(f"--host {args.host}", args.host, secret is not None)  # before importing vLLM
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2

    if importlib.util.find_spec("vllm") is None:
        print(f"error: {INSTALL_HINT}", file=sys.stderr)
        return 2
    problem = refused_passthrough_problem(extra)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    model = resolve_model_name(args.model)
    problem = vllm_servable_problem(model)
    if problem:
        print(f"error: --model {args.model}: {problem}", file=sys.stderr)
        return 2
    command = worker_command(model, args.port, args.host, args.dtype, args.max_model_len, args.seed, extra=extra,
                             secret=secret is not None)
    problem = effective_bind_problem(command[VLLM_ARGUMENTS_START:], secret is not None)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    os.execve(command[0], command, worker_environment())


VLLM_ARGUMENTS_START = 3
"""Where vLLM's own arguments start in ``worker_command`` (after ``python -m vllm.entrypoints.openai.api_server``)."""

BIND_OR_MIDDLEWARE = "it changes what the worker binds or what stands in front of its weight-sync routes"
REFUSED_PASSTHROUGH = {
    "host": ("--host", f"{BIND_OR_MIDDLEWARE}; give the worker's own --host (before --)"),
    "uds": ("--uds", (f"{BIND_OR_MIDDLEWARE}; the trainer reaches a worker over TCP: give the worker's --host and "
                     "--port")),
    "middleware": ("--middleware", (f"{BIND_OR_MIDDLEWARE}; the worker installs its own (the shared-secret check "
                                   "when a secret is set)")),
    "logprobs_mode": ("--logprobs-mode", ("the worker reports processed log-probs (after temperature, top-k, top-p): "
                                         "the trainer's importance weights need the distribution it sampled from")),
}
"""The vLLM server options the worker sets itself, by their parser destination, each with why it is refused after
``--`` however it is spelled there (``--host=...``, an abbreviation such as ``--hos``, a ``--config`` file): vLLM's
parser lets the last of two options win, and pass-through arguments come last."""


@functools.cache
def _vllm_server_parser() -> argparse.ArgumentParser:
    """The parser of vLLM's OpenAI server (``make_arg_parser`` on vLLM's ``FlexibleArgumentParser``, as its entry
    point builds it): what it returns for an argument list is what the server will run with."""
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser(prog="vllm.entrypoints.openai.api_server"))


def refused_passthrough_problem(extra: list[str]) -> str | None:
    """Why the arguments passed through to vLLM (after ``--``) are refused (``REFUSED_PASSTHROUGH``), naming the
    option and the worker flag to use instead; None when they are not. Arguments vLLM's parser rejects exit
    with its usage message, as the server would."""
    if not extra:
        return None
    # argparse fills a default only where the namespace has no value yet, so a plain option still holding the
    # sentinel after parsing was not given (one given with its default value, e.g. raw_logprobs, is caught too);
    # an appending option (--middleware) starts from its empty default instead.
    parser = _vllm_server_parser()
    unset = object()
    plain = {action.dest for action in parser._actions if type(action) is argparse._StoreAction}
    given = parser.parse_args(list(extra), namespace=argparse.Namespace(
        **{dest: unset for dest in REFUSED_PASSTHROUGH if dest in plain}))
    for dest, (option, why) in REFUSED_PASSTHROUGH.items():
        value = getattr(given, dest)
        if (value is not unset) if dest in plain else (value != parser.get_default(dest)):
            return f"`-- {option}` is refused: {why}"
    return None


def effective_bind_problem(vllm_arguments: list[str], secret: bool) -> str | None:
    """The non-loopback rule (``unsecured_bind_problem``) applied to the host vLLM will bind with
    ``vllm_arguments`` (its own parser: the last ``--host`` wins; none binds every interface)."""
    host = _vllm_server_parser().parse_args(list(vllm_arguments)).host
    return unsecured_bind_problem(f"vLLM's effective --host {host or '(none: every interface)'}", host or "", secret)


def unsecured_bind_problem(what: str, host: str, secret: bool) -> str | None:
    """Why binding ``host`` (described as ``what``) is refused: a non-loopback address without the shared
    secret opens the weight-sync routes to the network; None when it is allowed."""
    if secret or is_loopback(host):
        return None
    return (f"{what} is not a loopback address: set the shared secret (${SECRET_ENV}, or ${SECRET_FILE_ENV} naming "
            "a file) here and in the trainer's environment, or the worker's weight-sync routes are open to the network")


def spawn_rollout_worker(model: str, port: int, log_path: str | os.PathLike, host: str = "127.0.0.1",
                         extra_args: list[str] | None = None, env: dict[str, str] | None = None,
                         cpus: list[int] | None = None) -> subprocess.Popen:
    """Start ``posttrain rollout-worker`` as a child process in a session of its own (so that
    ``os.killpg(process.pid, ...)`` reaches vLLM's engine processes too), logging to ``log_path``;
    ``cpus`` confines it and every process it starts to those CPUs (``taskset``)."""
    command = [*cpu_affinity_prefix(cpus), sys.executable, "-m", "posttrain.cli", "rollout-worker", "--model", model,
               "--port", str(port),
               "--host", host, *(extra_args or [])]
    with open(log_path, "w") as log:
        return subprocess.Popen(command, env={**os.environ, **(env or {})}, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)


def cpu_affinity_prefix(cpus: list[int] | None) -> list[str]:
    """The command prefix that runs a command on ``cpus`` only (``taskset -c``); none for None."""
    return [] if cpus is None else ["taskset", "-c", ",".join(str(c) for c in cpus)]


def wait_until_ready(url: str, process: subprocess.Popen, timeout_s: float, log_path: str | os.PathLike) -> None:
    """Poll ``url/health`` until the worker answers; raises with the log's tail if the process exits or
    ``timeout_s`` passes first."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"rollout worker {url} exited with {process.returncode}:\n{_tail(log_path)}")
        try:
            if httpx.get(f"{url}/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1.0)
    raise TimeoutError(f"rollout worker {url} did not become ready within {timeout_s:.0f} s:\n{_tail(log_path)}")


def start_on_a_free_port(start: Callable[[int, Path], subprocess.Popen], log_path: Path, timeout_s: float,
                         attempts: int = 3) -> tuple[str, subprocess.Popen]:
    """Start a server on a free loopback port, ``start(port, log_path)`` launching it in a session of its own, and
    wait until it answers (``wait_until_ready``); its URL and process. ``free_port``'s port can be taken by another
    process before the server binds it: a start that fails with "address already in use" is made again on another
    port, up to ``attempts`` starts in all. Any other failure kills the server's processes and raises with the log's
    tail."""
    for attempt in range(1, attempts + 1):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        process = start(port, log_path)
        try:
            wait_until_ready(url, process, timeout_s, log_path)
            return url, process
        except RuntimeError as err:
            stop_rollout_worker(process)
            if "address already in use" not in str(err).lower() or attempt == attempts:
                raise
            print(f"{url} was taken before the server bound it; starting again on another port", file=sys.stderr,
                  flush=True)
    raise ValueError(f"start_on_a_free_port: attempts must be at least 1, got {attempts}")


def stop_rollout_worker(process: subprocess.Popen) -> None:
    """Kill a worker started by ``spawn_rollout_worker`` and its vLLM engine processes."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)


def _tail(path: str | os.PathLike, chars: int = 3000) -> str:
    with open(path, errors="replace") as log:
        return log.read()[-chars:]
