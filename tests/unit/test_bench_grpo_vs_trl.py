"""bench_grpo_vs_trl.py's argument building: the server sides' core placement, the vLLM CPU settings every vLLM
side gets alike, the server command lines, and how a server's memory is read (no engine, trainer or vLLM server
is started; the memory test starts two sleeping Python processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.bench_grpo_vs_trl import build_parser, worker_command
from benchmarks.grpo_vs_trl_ours import rollout_worker_args
from benchmarks.grpo_vs_trl_server import VLLMServer, session_members
from benchmarks.grpo_vs_trl_sides import (
    VLLMCPUSettings,
    parse_cpus,
    server_placement,
    worker_server_cpus,
)
from benchmarks.grpo_vs_trl_trl import trl_vllm_serve_command


def test_parse_cpus_reads_ids_lists_and_ranges() -> None:
    assert parse_cpus("1", "--server_cpus") == [1]
    assert parse_cpus("0,2", "--server_cpus") == [0, 2]
    assert parse_cpus("2-4,3", "--server_cpus") == [2, 3, 4]


@pytest.mark.parametrize("text", ["", "a", "1,", "3-1", "-1"])
def test_parse_cpus_rejects_a_malformed_list_naming_the_flag(text: str) -> None:
    with pytest.raises(ValueError, match="--trainer_cpus"):
        parse_cpus(text, "--trainer_cpus")


def test_server_placement_keeps_trainer_and_server_apart() -> None:
    assert server_placement("0", "1", {0, 1}) == ([0], [1])
    assert server_placement("0-1", "2-3", {0, 1, 2, 3}) == ([0, 1], [2, 3])
    with pytest.raises(ValueError, match=r"share CPUs \[1\]"):
        server_placement("0-1", "1", {0, 1})
    with pytest.raises(ValueError, match=r"--server_cpus: CPUs \[2\] are not available"):
        server_placement("0", "2", {0, 1})


def test_vllm_settings_reach_the_environment_and_survive_the_worker_round_trip() -> None:
    settings = VLLMCPUSettings(kv_cache_gib=3, threads_bind="1", eager=False)
    assert settings.environment() == {"VLLM_CPU_KVCACHE_SPACE": "3", "VLLM_CPU_OMP_THREADS_BIND": "1"}
    parsed = build_parser().parse_args(["--worker", "ours", *settings.worker_args()])
    assert VLLMCPUSettings.from_args(parsed) == settings
    assert VLLMCPUSettings.from_args(build_parser().parse_args([])).eager is True  # eager unless asked


def test_vllm_settings_reject_bad_values_naming_the_flag() -> None:
    with pytest.raises(ValueError, match="vllm_kv_cache_gib"):
        VLLMCPUSettings(kv_cache_gib=0)
    with pytest.raises(ValueError, match="vllm_threads_bind"):
        VLLMCPUSettings(threads_bind=" ")


def _args(*argv: str):
    args = build_parser().parse_args(list(argv))
    args.model_dir = "/models/m"
    return args


def test_a_server_side_worker_runs_on_the_trainer_cpus_and_names_the_server_cpus() -> None:
    args = _args("--vllm_kv_cache_gib", "2", "--vllm_compiled")
    settings = VLLMCPUSettings.from_args(args)
    command = worker_command(args, "trl-server", Path("/tmp/o.json"), 0, settings, ([0], [1]))
    assert command[:3] == ["taskset", "-c", "0"]
    assert command[3:5] == [sys.executable, str(Path("benchmarks/bench_grpo_vs_trl.py").resolve())]
    worker = build_parser().parse_args(command[5:])
    assert (worker.worker, worker.server_cpus, worker.vllm_kv_cache_gib, worker.vllm_compiled) == (
        "trl-server", "1", 2, True)


def test_on_cuda_a_server_side_is_placed_by_gpu_not_pinned() -> None:
    args = _args("--device", "cuda", "--server_gpu", "3")
    command = worker_command(args, "ours-server", Path("/tmp/o.json"), 0, VLLMCPUSettings(), ([], []))
    worker = build_parser().parse_args(command[2:])
    assert command[0] == sys.executable and worker.server_gpu == 3
    assert worker_server_cpus(worker) is None
    assert worker_server_cpus(build_parser().parse_args(["--server_cpus", "1-2"])) == [1, 2]


def test_a_side_without_a_server_is_not_pinned() -> None:
    args = _args()
    command = worker_command(args, "ours-async", Path("/tmp/o.json"), 1, VLLMCPUSettings(), ([], []))
    assert command[0] == sys.executable and "--server_cpus" not in command


def test_trl_vllm_serve_gets_our_cpu_settings_on_cpu_only() -> None:
    cpu = trl_vllm_serve_command("/models/m", 8123, "float32", VLLMCPUSettings(eager=True), 8192)
    assert cpu[:5] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "/models/m"]
    assert cpu[cpu.index("--port") + 1] == "8123" and cpu[cpu.index("--dtype") + 1] == "float32"
    assert cpu[cpu.index("--weight-transfer-config") + 1] == '{"backend": "nccl"}'  # TRL's own flags
    assert "--enforce-eager" in cpu
    assert "--no-enable-chunked-prefill" in cpu and cpu[cpu.index("--max-num-batched-tokens") + 1] == "8192"
    compiled = trl_vllm_serve_command("/models/m", 8123, "float32", VLLMCPUSettings(eager=False), 8192)
    assert "--enforce-eager" not in compiled
    cuda = trl_vllm_serve_command("/models/m", 8123, "bfloat16", VLLMCPUSettings(), None)
    assert "--enforce-eager" not in cuda and "--no-enable-chunked-prefill" not in cuda


def test_our_rollout_worker_turns_eager_off_only_when_compiled() -> None:
    assert rollout_worker_args("fp32", VLLMCPUSettings()) == ["--dtype", "float32", "--"]
    assert rollout_worker_args("bf16", VLLMCPUSettings(eager=False)) == ["--dtype", "bfloat16", "--",
                                                                         "--no-enforce-eager"]


def test_a_server_sides_memory_is_its_whole_session() -> None:
    """The server's peak RSS sums its session (API server and engine processes), and only it."""
    script = ("import subprocess, sys, time; "
              "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
              "print(flush=True); time.sleep(60)")
    leader = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        leader.stdout.readline()  # the child has been started
        members = session_members(leader.pid)
        assert leader.pid in members and len(members) == 2
        assert VLLMServer("http://127.0.0.1:1", leader).peak_rss_mb() > 0
        assert session_members(leader.pid + 10**7) == []
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()
