"""The inference side of ``posttrain-gloo`` (``weight_transfer.py``): the vLLM weight-transfer engine that
receives each bucket and loads it, and the set-up every process serving vLLM on CPU with it needs.

A process registers the engine with vLLM by importing this module (``register_gloo_receiver`` runs at import):
vLLM engines in another process (vLLM's multiprocessing mode, ``vllm serve``) import it through
``WORKER_EXTENSION``, their ``worker_extension_cls``, before they build their worker; the colocated engine's
set-up (``vllm_setup.colocated_llm_options``) calls ``register_gloo_receiver`` in the trainer's process.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as torch_dist
from vllm.distributed.weight_transfer.base import WeightTransferEngine
from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory

from posttrain.engines.weight_sync.gloo_group import broadcast_bucket, open_gloo_group
from posttrain.engines.weight_sync.weight_transfer import (
    GLOO_BACKEND,
    GlooWeightTransferInitInfo,
    GlooWeightTransferUpdateInfo,
)

WORKER_EXTENSION = "posttrain.engines.weight_sync.weight_receiver.WorkerExtension"


class GlooWeightTransferEngine(WeightTransferEngine[GlooWeightTransferInitInfo, GlooWeightTransferUpdateInfo]):
    """vLLM worker side of ``posttrain-gloo``: receives each bucket and loads it with the model's
    ``load_weights`` inside vLLM's layerwise reload (the path vLLM's own NCCL engine takes)."""

    init_info_cls = GlooWeightTransferInitInfo
    update_info_cls = GlooWeightTransferUpdateInfo

    def __init__(self, config: Any, vllm_config: Any, device: torch.device, model: torch.nn.Module) -> None:
        super().__init__(config, vllm_config, device, model)
        self.group: torch_dist.ProcessGroupGloo | None = None

    def init_transfer_engine(self, init_info: GlooWeightTransferInitInfo) -> None:
        parallel = self.parallel_config
        worker_rank = parallel.data_parallel_index * parallel.world_size + parallel.rank
        self.group = open_gloo_group(init_info.master_address, init_info.master_port,
                                     init_info.rank_offset + worker_rank, init_info.world_size, init_info.timeout_s,
                                     init_info.group_token)

    def start_weight_update(self) -> None:
        from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

        initialize_layerwise_reload(self.model)

    def finish_weight_update(self) -> None:
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

        finalize_layerwise_reload(self.model, self.model_config)
        if self.device.type == "cpu":
            repack_cpu_heads(self.model)

    def receive_weights(self, update_info: GlooWeightTransferUpdateInfo) -> None:
        if self.group is None:
            raise RuntimeError("posttrain-gloo weight transfer is not initialised; call init_weight_transfer_engine")
        dtype = getattr(torch, update_info.dtype_name)
        start = 0
        for size in update_info.bucket_sizes:
            names = update_info.names[start : start + size]
            shapes = update_info.shapes[start : start + size]
            start += size
            flat = torch.empty(sum(math.prod(s) for s in shapes), dtype=dtype)
            broadcast_bucket(self.group, flat, f"the bucket starting at {names[0]!r}")
            views, offset = [], 0
            for name, shape in zip(names, shapes):
                views.append((name, flat[offset : offset + math.prod(shape)].view(shape).to(self.device)))
                offset += math.prod(shape)
            self.model.load_weights(views)

    def shutdown(self) -> None:
        self.group = None


def repack_cpu_heads(model: torch.nn.Module) -> None:
    """Re-pack the CPU GEMM kernels of the layers that keep their weight (embeddings, LM heads).

    vLLM's CPU build packs every linear weight into a kernel closure (``layer.cpu_linear``) when a
    layer's weights are processed, which a reload does only for layers that were sent a weight. An LM
    head tied to the embeddings is sent nothing (its weight travels under the embedding's name), so it
    would keep computing logits with the old packed copy; we measured exactly that (new embeddings,
    old logits). Re-packing from the current, shared weight fixes it.
    """
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    for layer in model.modules():
        weight = getattr(layer, "weight", None)
        if hasattr(layer, "cpu_linear") and isinstance(weight, torch.Tensor) and weight.ndim == 2 and weight.numel():
            dispatch_cpu_unquantized_gemm(layer, remove_weight=False)


class WorkerExtension:
    """``worker_extension_cls`` for vLLM engines in another process: importing it registers
    ``posttrain-gloo`` in that process and asks for its AMX tile state (``register_gloo_receiver``); its one method
    answers the trainer's dtype and log-probs questions (through vLLM's ``/collective_rpc``)."""

    model_config: Any  # the vLLM worker's, which this class is mixed into

    def posttrain_served_dtype(self) -> str:
        """The dtype this worker's model weights are in, e.g. ``"bfloat16"``."""
        return str(self.model_config.dtype).removeprefix("torch.")

    def posttrain_logprobs_mode(self) -> str:
        """Which log-probs this worker's completions report (vLLM's ``logprobs_mode``)."""
        return str(self.model_config.logprobs_mode)


def register_gloo_receiver() -> None:
    """Make ``posttrain-gloo`` a weight-transfer backend of this process's vLLM engines (idempotent), and ask for
    this process's AMX tile state (``allow_amx``), which vLLM's CPU attention needs."""
    if GLOO_BACKEND not in WeightTransferEngineFactory._registry:
        WeightTransferEngineFactory.register_engine(GLOO_BACKEND, GlooWeightTransferEngine)
    allow_amx()


def allow_amx() -> None:
    """Ask Linux for this process's AMX tile state (``arch_prctl(ARCH_REQ_XCOMP_PERM)``, through torch) on
    CPUs that have AMX.

    vLLM's CPU attention runs bf16 on AMX tiles there (``cpu_attn._get_attn_isa``) but never asks for the
    permission; oneDNN asks only when it happens to pick an AMX kernel for an earlier matmul. When it has
    not (small layers), the worker process dies with SIGILL at its first attention call: we saw every
    bf16 rollout worker of the tiny model die so on its first completion. Asking is idempotent and costs
    nothing, so every process that registers the receiver (vLLM's workers, through ``WORKER_EXTENSION``; the
    trainer, for a colocated engine) asks up front."""
    if torch.cpu._is_amx_tile_supported():
        torch.cpu._init_amx()


register_gloo_receiver()  # vLLM's worker processes import this module through WORKER_EXTENSION, nothing else
