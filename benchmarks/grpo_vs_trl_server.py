"""The vLLM server of a server side of ``bench_grpo_vs_trl.py`` (``ours-server``, ``trl-server``): started by the
side's worker, waited for, read (peak memory of all its processes, eager or compiled) and killed with its engine
processes when the run ends."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posttrain.engines.worker import start_on_a_free_port, stop_rollout_worker

SERVER_START_TIMEOUT_S = 900.0
"""Seconds a server side's vLLM server may take to answer ``/health`` (vLLM's CPU build under load is slow)."""


@dataclass(frozen=True)
class VLLMServer:
    """A server side's running vLLM server: its URL and its process (the leader of its own session)."""

    url: str
    process: subprocess.Popen

    def peak_rss_mb(self) -> float:
        """The summed peak resident memory (``VmHWM``) of the server's processes so far (its session: the API
        server and vLLM's engine processes), MiB: the memory a server side holds beside its trainer's."""
        return sum(_peak_rss_kib(pid) for pid in session_members(self.process.pid)) / 1024

    def enforce_eager(self) -> bool:
        """The server's own record of eager vs compiled mode (``/server_info``, a route of vLLM's dev mode, which
        both server sides run in)."""
        import httpx

        response = httpx.get(f"{self.url}/server_info", params={"config_format": "json"}, timeout=60.0)
        response.raise_for_status()
        return bool(response.json()["vllm_config"]["model_config"]["enforce_eager"])


def session_members(session_id: int) -> list[int]:
    """The ids of the running processes in session ``session_id`` (from ``/proc``)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended while we looked
            continue
        if int(fields[3]) == session_id:  # after the command: state, ppid, pgrp, session
            members.append(int(entry.name))
    return members


def _peak_rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


@contextmanager
def vllm_server(start: Callable[[int, Path], subprocess.Popen], log_dir: str) -> Iterator[VLLMServer]:
    """Run the vLLM server that ``start(port, log_path)`` launches (in a session of its own) until the block ends,
    yielding it once it answers ``/health``; if the block fails, the server log's tail goes to stderr (the driver
    records it with the side's failure). The server and its engine processes are killed at the end."""
    log = Path(log_dir) / "vllm-server.log"
    process = None
    try:
        url, process = start_on_a_free_port(start, log, SERVER_START_TIMEOUT_S)
        yield VLLMServer(url, process)
    except BaseException:
        sys.stderr.write(f"--- vLLM server log (tail) ---\n{log.read_text(errors='replace')[-4000:]}\n")
        raise
    finally:
        if process is not None:
            stop_rollout_worker(process)


def run_with_server(start: Callable[[int, Path], subprocess.Popen],
                    run: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """A server side's run: ``run(url)`` against the server ``start`` launches (``vllm_server``), with the server's
    peak RSS and eager or compiled mode added to its result (``server_peak_rss_mb``, ``server_enforce_eager``)."""
    log_dir = tempfile.mkdtemp(prefix="bench-grpo-server-")
    try:
        with vllm_server(start, log_dir) as server:
            result = run(server.url)
            result["server_peak_rss_mb"] = server.peak_rss_mb()
            result["server_enforce_eager"] = server.enforce_eager()
            return result
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
