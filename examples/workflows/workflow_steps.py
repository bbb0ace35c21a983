"""The steps the workflows in this folder share: their flags, run one CLI command, serve a judge, train, read
a training run.

Every workflow drives the toolkit through its command lines (``posttrain data ...``, ``posttrain train ...``,
``posttrain serve ...``), exactly as a user would type them, so what a workflow shows is what the commands
do. Each command's output goes to ``OUT/logs/NAME.log``; a failing command stops the workflow with the
log's tail. ``summary.json`` records every command with its wall time.

Flags (``workflow_parser``): every workflow takes ``--out`` and, for each command it runs, ``--<name>_args``:
more flags of that command in one quoted string, placed after the workflow's own, so they override its
defaults (``--train_args "--steps 2"``). The tests run each workflow in miniature that way.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from posttrain.common.cli_help import CommandParser
from posttrain.engines.worker import start_on_a_free_port

REPO = Path(__file__).resolve().parents[2]
POSTTRAIN = [sys.executable, "-m", "posttrain.cli"]
"""The ``posttrain`` command, run by this interpreter (so a virtual environment's scripts need not be on PATH)."""
PASS_THROUGH = {"train": "posttrain train", "serve": "posttrain serve", "designer": "posttrain data designer",
                "data": "posttrain data entropylong", "corpus": "posttrain data sci2pol corpus",
                "bench": "posttrain data sci2pol bench"}
"""The commands whose flags a workflow passes through, by the name of their ``--<name>_args`` flag."""


def workflow_parser(description: str, name: str, *passes: str) -> CommandParser:
    """The flags every workflow shares: ``--out`` (default ``outputs/workflow-NAME``) and, for each of
    ``passes`` (keys of ``PASS_THROUGH``), ``--<pass>_args`` parsed into a list of flags."""
    parser = CommandParser(description=description)
    parser.add_argument("--out", type=Path, default=Path(f"outputs/workflow-{name}"),
                        help="output folder: each command's outputs, logs/ and summary.json")
    for key in passes:
        if key not in PASS_THROUGH:
            raise ValueError(f"workflow_parser: no pass-through command {key!r} (known: {sorted(PASS_THROUGH)})")
        parser.add_argument(f"--{key}_args", type=shlex.split, default="",
                            help=f"more `{PASS_THROUGH[key]}` flags, one quoted string (they override the workflow's; default: none)")
    return parser


class Workflow:
    """One workflow run in ``out``: runs its commands, logs them, writes ``summary.json``."""

    def __init__(self, name: str, out: Path) -> None:
        self.name, self.out = name, out
        self.logs = out / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.commands: list[dict[str, Any]] = []
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}

    def run(self, step: str, argv: list[str], env: dict[str, str] | None = None) -> float:
        """Run ``argv`` (a ``posttrain`` command when it starts with "posttrain") to completion; its wall time."""
        command = POSTTRAIN + argv[1:] if argv[0] == "posttrain" else argv
        log_path = self.logs / f"{step}.log"
        print(f"[{self.name}] {step}: {' '.join(argv)}", flush=True)
        start = time.monotonic()
        with open(log_path, "w") as log:
            code = subprocess.run(command, cwd=REPO, env={**self.env, **(env or {})}, stdout=log,
                                  stderr=subprocess.STDOUT, check=False).returncode
        seconds = round(time.monotonic() - start, 1)
        self.commands.append({"step": step, "command": " ".join(argv), "seconds": seconds, "returncode": code})
        if code:
            raise RuntimeError(f"{step} failed with exit code {code}: {' '.join(argv)}\n{log_tail(log_path)}")
        return seconds

    @contextmanager
    def served(self, step: str, argv: list[str], startup_timeout_s: float = 900.0) -> Iterator[str]:
        """``posttrain serve ARGV`` on a free loopback port until the block ends; yields its URL once
        ``/health`` answers (the first start may build the embedded judge; a port taken before the server bound it
        is replaced by another, ``start_on_a_free_port``). Every start is recorded in ``summary.json``."""

        def start(port: int, log_path: Path) -> subprocess.Popen:
            full = ["posttrain", "serve", "--host", "127.0.0.1", "--port", str(port), *argv]
            print(f"[{self.name}] {step}: {' '.join(full)}", flush=True)
            self.commands.append({"step": step, "command": " ".join(full), "seconds": None, "returncode": None})
            with open(log_path, "w") as log:
                return subprocess.Popen(POSTTRAIN + full[1:], cwd=REPO, env=self.env, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)

        url, server = start_on_a_free_port(start, self.logs / f"{step}.log", startup_timeout_s)
        try:
            yield url
        finally:
            _stop(server)

    def train(self, step: str, flags: list[str], output_dir: Path, extra: list[str],
              env: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """``posttrain train FLAGS`` writing to ``output_dir`` (metrics to ``metrics.jsonl``, no progress bar),
        then ``extra`` (a user's ``--train_args``, overriding); the run's metric rows."""
        self.run(step, ["posttrain", "train", *flags, "--output_dir", str(output_dir), "--report_to", "jsonl",
                        "--progress", "false", *extra], env=env)
        return training_metrics(output_dir)

    def write_summary(self, results: dict[str, Any]) -> Path:
        """``OUT/summary.json``: the workflow's results and every command it ran."""
        path = self.out / "summary.json"
        path.write_text(json.dumps({"workflow": self.name, "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
                                    **results, "commands": self.commands}, indent=2) + "\n")
        print(f"[{self.name}] -> {path}", flush=True)
        return path


def _stop(server: subprocess.Popen) -> None:
    """Stop a server started by ``Workflow.served`` and every process it started: SIGTERM, then SIGKILL
    after 30 s."""
    if server.poll() is not None:
        return
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=30)


def remote_reward_env(url: str, reference: bool, timeout_s: int) -> dict[str, str]:
    """The environment of ``--reward rewards.remote:reward`` asking the judge at ``url`` for binary verdicts
    ("is this answer correct?"), shown the gold answer when ``reference``; ``timeout_s`` per request."""
    return {"POSTTRAIN_REWARD_URL": url, "POSTTRAIN_REWARD_MODE": "binary",
            "POSTTRAIN_REWARD_REFERENCE": "1" if reference else "0", "POSTTRAIN_REWARD_TIMEOUT": str(timeout_s)}


def first_and_last(rows: list[dict[str, Any]], key: str) -> tuple[Any, Any]:
    """The first and last value of metric ``key`` over the rows that have it (None, None if none do)."""
    values = [r[key] for r in rows if key in r]
    return (values[0], values[-1]) if values else (None, None)


def log_tail(path: Path, chars: int = 3000) -> str:
    return path.read_text(errors="replace")[-chars:]


def training_metrics(output_dir: Path) -> list[dict[str, Any]]:
    """The rows of a training run's ``metrics.jsonl`` (``--report_to jsonl``)."""
    path = output_dir / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the training run wrote no metrics (was --report_to jsonl given?)")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def curve(rows: list[dict[str, Any]], *prefixes: str) -> list[dict[str, Any]]:
    """Each row's step and the metrics whose names start with one of ``prefixes``."""
    return [{"step": r["step"], **{k: v for k, v in r.items() if k.startswith(prefixes)}}
            for r in rows if any(k.startswith(prefixes) for k in r)]


def final_checkpoint(output_dir: Path) -> Path:
    """The Hugging Face export of a training run's last checkpoint (``checkpoints/step_N/hf``)."""
    steps = sorted((output_dir / "checkpoints").glob("step_*/hf"), key=lambda p: int(p.parent.name.split("_")[1]))
    if not steps:
        raise FileNotFoundError(f"{output_dir}/checkpoints: no finished checkpoint with a Hugging Face export")
    return steps[-1]
