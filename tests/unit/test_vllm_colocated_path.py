"""The colocated vLLM engine's two placements, checked on CPU: CUDA runs vLLM under ``external_launcher`` in the
trainer's process and loads the gathered tensors with the model's ``load_weights`` (no transport); CPU keeps the
gloo transport and its CPU settings. The CUDA run itself is in ``scripts/gpu_checks.sh``. A completion vLLM ends
with a reason other than stop / length (an aborted request's partial output) raises, never passes as "length"."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch

from posttrain.engines import vllm as vllm_engine
from posttrain.engines.base import SamplingParams
from posttrain.engines.vllm import VLLMRolloutEngine, rollout_finish_reason
from posttrain.engines.vllm_setup import (
    DIRECT_LOAD,
    GLOO_TRANSFER,
    colocated_llm_options,
    colocated_weight_path,
)

pytest.importorskip("vllm")

OPTIONS = {"dtype": "bfloat16", "seed": 3, "max_model_len": 256, "max_num_seqs": 64, "trust_remote_code": False,
           "gpu_memory_utilization": 0.3, "sleep_mode": True}


def test_cuda_loads_directly_and_cpu_keeps_the_gloo_transport() -> None:
    assert colocated_weight_path(cuda=True) == DIRECT_LOAD
    assert colocated_weight_path(cuda=False) == GLOO_TRANSFER


def test_cuda_options_run_vllm_in_process_under_the_external_launcher() -> None:
    options = colocated_llm_options(DIRECT_LOAD, "/ckpt", **OPTIONS)
    assert options["distributed_executor_backend"] == "external_launcher" and options["tensor_parallel_size"] == 1
    assert options["gpu_memory_utilization"] == 0.3 and options["enable_sleep_mode"] is True
    assert options["max_num_batched_tokens"] == 4096  # bounds vLLM's start-up memory profile (TRL sets it too)
    assert "weight_transfer_config" not in options and "enforce_eager" not in options  # CUDA graphs stay on
    assert options["logprobs_mode"] == "processed_logprobs" and options["seed"] == 3


def test_cpu_options_keep_the_gloo_transport_eager_mode_and_whole_prompts() -> None:
    options = colocated_llm_options(GLOO_TRANSFER, "/ckpt", **OPTIONS)
    assert options["weight_transfer_config"].backend == "posttrain-gloo"
    assert options["enforce_eager"] is True and options["enable_chunked_prefill"] is False
    assert options["max_num_batched_tokens"] == 4096  # the 256-token sequences fit vLLM's default budget
    assert "distributed_executor_backend" not in options and "gpu_memory_utilization" not in options
    with pytest.raises(ValueError, match="weight_path 'nccl'"):
        colocated_llm_options("nccl", "/ckpt", **OPTIONS)


class _RecordingModel:
    def __init__(self) -> None:
        self.loaded: list[list[tuple[str, torch.Tensor]]] = []

    def load_weights(self, weights: list[tuple[str, torch.Tensor]]) -> None:
        self.loaded.append(weights)


def test_a_cuda_sync_loads_each_layer_into_the_in_process_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The direct path's logic with a stand-in for vLLM's in-process model: one ``load_weights`` per decoder
    layer, in the engine's dtype, then the prefix cache reset and the version recorded; no transport opened."""
    model = _RecordingModel()
    resets: list[Any] = []
    llm = SimpleNamespace(llm_engine=SimpleNamespace(model_executor=SimpleNamespace(
        driver_worker=SimpleNamespace(model_runner=SimpleNamespace(model=model)))),
        reset_prefix_cache=lambda: resets.append(True))
    monkeypatch.setattr(vllm_engine, "on_cuda", lambda: True)
    engine = VLLMRolloutEngine(llm, tokenizer=None, dtype=torch.bfloat16, sleep_mode=False, sync_timeout_s=5.0)
    tensors = [("model.embed_tokens.weight", torch.ones(4, 2)), ("model.layers.0.mlp.up_proj.weight", torch.ones(2, 2)),
               ("model.layers.0.mlp.down_proj.weight", torch.ones(2, 2)), ("model.layers.1.mlp.up_proj.weight",
                                                                          torch.ones(2, 2))]
    engine.update_weights(tensors, version=7)
    names = [[name for name, _ in bucket] for bucket in model.loaded]
    assert sorted(map(sorted, names)) == sorted([["model.embed_tokens.weight"], ["model.layers.1.mlp.up_proj.weight"],
                                                 ["model.layers.0.mlp.down_proj.weight",
                                                  "model.layers.0.mlp.up_proj.weight"]])
    assert all(t.dtype == torch.bfloat16 for bucket in model.loaded for _, t in bucket)
    assert resets == [True] and engine.weight_version == 7 and engine._sender is None


def test_only_stop_and_length_finish_a_rollout() -> None:
    assert rollout_finish_reason("stop", 0) == "stop" and rollout_finish_reason("length", 1) == "length"
    for reason in ("abort", "error", "repetition", None):
        with pytest.raises(RuntimeError, match=f"prompt 3: vLLM ended its completion with finish_reason {reason!r}"):
            rollout_finish_reason(reason, 3)


class _SleepingLLM:
    """A stand-in for ``vllm.LLM``'s sleep mode: records each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def sleep(self, level: int) -> None:
        self.calls.append(("sleep", level))

    def wake_up(self, tags: list[str] | None = None) -> None:
        self.calls.append(("wake_up", tags))

    def reset_prefix_cache(self) -> None:
        self.calls.append(("reset_prefix_cache", None))


def test_sleep_levels_and_waking_the_weights_alone_before_a_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    """TRL's colocate pattern: level 2 when a sync replaces the weights next, the weights woken alone for the
    push, the KV cache when the engine is next used; level 1 (weights kept) when no sync comes next; an engine
    whose weights were discarded refuses to wake fully before a sync loaded new ones."""
    llm = _SleepingLLM()
    engine = VLLMRolloutEngine(llm, tokenizer=None, dtype=torch.bfloat16, sleep_mode=True, sync_timeout_s=5.0)
    monkeypatch.setattr(engine, "_load_directly", lambda source: llm.calls.append(("load", None)))
    monkeypatch.setattr(vllm_engine, "on_cuda", lambda: True)
    engine.sleep(discard_weights=True)
    with pytest.raises(RuntimeError, match="level 2"):
        engine.wake_up()
    with pytest.raises(RuntimeError, match="asleep"):
        engine.generate([[1, 2]], SamplingParams(max_new_tokens=1))
    engine.wake_weights()
    engine.update_weights([("model.embed_tokens.weight", torch.ones(2, 2))], version=1)
    engine.wake_up()
    assert llm.calls == [("sleep", 2), ("wake_up", ["weights"]), ("load", None), ("reset_prefix_cache", None),
                         ("wake_up", ["kv_cache"])]
    llm.calls.clear()
    engine.sleep(discard_weights=False)
    engine.wake_up()
    engine.wake_up()  # awake: nothing to do
    assert llm.calls == [("sleep", 1), ("wake_up", None)]
    llm.calls.clear()
    quiet = VLLMRolloutEngine(llm, tokenizer=None, dtype=torch.bfloat16, sleep_mode=False, sync_timeout_s=5.0)
    quiet.sleep(discard_weights=True)  # sleep mode off (CPU): nothing happens
    quiet.wake_weights()
    quiet.wake_up()
    assert llm.calls == []
