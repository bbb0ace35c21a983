"""Everything a vLLM engine needs decided before it starts, for the colocated engine (``engines/vllm.py``), the
rollout workers (``engines/worker.py``), the engine specs' start-up checks and the benchmarks.

- Whether vLLM can run at all: ``import_vllm`` (a missing install names the extra to install) and
  ``vllm_config_problem`` / ``vllm_servable_problem`` (a run's config, a checkpoint: masked-diffusion and
  remote-code models are not causal LMs vLLM serves; vLLM's CPU attention serves some head sizes only).
- CPU defaults (set before vLLM is imported, only where the user has not set them, ``set_cpu_defaults``): the
  colocated engine runs in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) so it shares the trainer rank's
  process and our weight transport; its KV cache takes ``VLLM_CPU_KVCACHE_SPACE=1`` GiB of RAM instead of
  vLLM's default share of the machine. Chunked prefill is off on CPU (``cpu_scheduler_options``: a split
  seeded request crashes vLLM's CPU sampler).
- How a colocated engine runs and takes the trainer's weights (``colocated_weight_path``: in process under
  ``external_launcher`` with direct ``load_weights`` on CUDA, our gloo transport on CPU) and the ``vllm.LLM``
  arguments of each (``colocated_llm_options``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from posttrain.engines.base import PROCESSED_LOGPROBS
from posttrain.models.pretrained import is_pretrained_alias
from posttrain.models.tiny import RECIPES

INSTALL_HINT = ('vLLM is not installed: pip install -e ".[gpu]" on a CUDA machine, '
                'or pip install -e ".[cpu-vllm]" for its CPU build')
# vLLM 0.30's CPU attention kernels (vllm/v1/attention/backends/cpu_attn.py).
CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
DEFAULT_STEP_TOKENS = 4096  # vLLM's default max_num_batched_tokens (its SchedulerConfig)


def on_cuda() -> bool:
    """Whether this process runs vLLM on CUDA (else on its CPU build)."""
    return torch.cuda.is_available()


def set_cpu_defaults() -> None:
    """The CPU environment defaults described in the module docstring (user settings win)."""
    if not on_cuda():
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


def import_vllm() -> Any:
    """``vllm`` itself, after the CPU defaults; a missing install names the extra to install."""
    set_cpu_defaults()
    try:
        import vllm
    except ImportError as err:
        raise ImportError(INSTALL_HINT) from err
    return vllm


def vllm_servable_problem(model_path: str) -> str | None:
    """Why vLLM cannot serve the checkpoint at ``model_path`` (None when it can, or when the path is a
    hub id we cannot inspect offline): masked-diffusion models are bidirectional (they keep the
    diffusion sampler, ``--rollout diffusion``), and on CPU the head size must be one vLLM's CPU
    attention implements."""
    config_file = Path(model_path) / "config.json"
    if not config_file.is_file():
        return None
    config = json.loads(config_file.read_text())
    if config.get("posttrain_kind") == "diffusion" or "auto_map" in config:
        return (f"{model_path} is a masked-diffusion (bidirectional) or remote-code model, which vLLM cannot "
                "serve as a causal LM; sample it with the diffusion sampler (--algo espo --rollout diffusion)")
    heads = config.get("num_attention_heads")
    head_dim = config.get("head_dim") or (config.get("hidden_size", 0) // heads if heads else None)
    return _cpu_head_size_problem(model_path, head_dim)


def _cpu_head_size_problem(where: str, head_dim: int | None) -> str | None:
    if on_cuda() or not head_dim or head_dim in CPU_HEAD_SIZES:
        return None
    return (f"{where} has attention head size {head_dim} (hidden_size / num_attention_heads); vLLM's CPU build "
            f"serves head sizes {list(CPU_HEAD_SIZES)} only (use --rollout hf)")


def vllm_config_problem(config: Any) -> str | None:
    """Why a run's config cannot use ``--rollout vllm``, checked at start-up without starting vLLM (or
    converting a packaged model): vLLM missing, or a model it cannot serve (``vllm_servable_problem``;
    for the embedded default, the head size of its recipe, ``config.embedded_recipe``: the vLLM-servable twin)."""
    import importlib.util


    if importlib.util.find_spec("vllm") is None:
        return INSTALL_HINT
    if config.model:
        return None if is_pretrained_alias(config.model) else vllm_servable_problem(config.model)

    recipe = RECIPES.get(config.embedded_recipe(config.model_kind))
    return _cpu_head_size_problem(f"the embedded default model (tiny recipe {recipe.name!r})",
                                  recipe.hidden_size // recipe.num_heads)


def model_max_length(model_path: str, max_model_len: int | None) -> int:
    """The longest sequence an engine on ``model_path`` serves: ``max_model_len`` if given, else the model's
    own ``max_position_embeddings`` (the limit vLLM takes from the same config)."""
    if max_model_len:
        return int(max_model_len)
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_path).get_text_config()
    length = getattr(config, "max_position_embeddings", None)
    if not length:
        raise ValueError(f"{model_path}: its config names no max_position_embeddings; pass max_model_len")
    return int(length)


def cpu_scheduler_options(model_path: str, max_model_len: int | None) -> dict[str, int | bool]:
    """vLLM scheduler options for its CPU build: chunked prefill off, and a step token budget that holds the
    longest sequence (vLLM's own default budget, 4096, when that is larger).

    Why: with chunked prefill, a prompt that does not fit a scheduler step's token budget is split, and vLLM's
    model runner rewinds the split request's random generator over the token it discards
    (``gen.set_offset(gen.get_offset() - 4)``), which a CPU ``torch.Generator`` does not support: every seeded
    batch whose prompts exceeded 4096 tokens (16 prompts x 8 samples of SmolLM2's chat prompts) crashed with
    ``CPU Generator does not use offset``. Without chunking, vLLM schedules whole prompts and lets the rest
    wait for the next step. vLLM's CPU platform makes the same choice for its MLA models."""
    return {"enable_chunked_prefill": False,
            "max_num_batched_tokens": max(model_max_length(model_path, max_model_len), DEFAULT_STEP_TOKENS)}


DIRECT_LOAD = "direct-load"
"""CUDA: vLLM in the trainer rank's process under its ``external_launcher`` executor (TRL's colocate mode);
a sync hands the gathered tensors to the model's ``load_weights``, GPU memory to GPU memory."""
GLOO_TRANSFER = "gloo-transfer"
"""CPU: vLLM in process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``); a sync goes through vLLM's weight-transfer
protocol over our gloo transport (``weight_transfer.py``)."""


def colocated_weight_path(cuda: bool) -> str:
    """How a colocated engine runs and takes the trainer's weights: ``DIRECT_LOAD`` on CUDA, ``GLOO_TRANSFER``
    on CPU.

    Why not one path: on CUDA vLLM's default executor runs the engine core in a spawned process, where our gloo
    transport is not registered, and each sync would go GPU -> CPU -> gloo -> GPU. Under ``external_launcher``
    the model lives in this process (vLLM then turns multiprocessing off itself), so the trainer's gathered
    tensors load straight into it, which is what TRL does for an engine that shares the trainer's GPU. On CPU
    the gloo transport runs vLLM's own reload protocol (``start_weight_update`` ... ``finish``), which also
    re-packs the CPU GEMM kernels (``weight_receiver.repack_cpu_heads``); a direct ``load_weights`` would not."""
    return DIRECT_LOAD if cuda else GLOO_TRANSFER


def colocated_llm_options(weight_path: str, model_path: str, *, dtype: str, seed: int, max_model_len: int | None,
                          max_num_seqs: int, trust_remote_code: bool, gpu_memory_utilization: float,
                          sleep_mode: bool) -> dict[str, Any]:
    """The ``vllm.LLM`` arguments of a colocated engine on ``weight_path`` (``colocated_weight_path``):
    CUDA: ``external_launcher`` (one engine per trainer rank, tensor parallel 1), its share of GPU memory,
    sleep mode and CUDA graphs; CPU: our gloo transport, eager mode and ``cpu_scheduler_options``."""
    if weight_path not in (DIRECT_LOAD, GLOO_TRANSFER):
        raise ValueError(f"weight_path {weight_path!r}: expected {DIRECT_LOAD!r} or {GLOO_TRANSFER!r}")
    options: dict[str, Any] = {
        "model": model_path, "skip_tokenizer_init": False, "dtype": dtype, "seed": seed, "max_model_len": max_model_len,
        "max_num_seqs": max_num_seqs, "logprobs_mode": PROCESSED_LOGPROBS, "trust_remote_code": trust_remote_code,
        "structured_outputs_config": {"backend": "xgrammar", "disable_any_whitespace": True},
    }
    if weight_path == DIRECT_LOAD:
        # max_num_batched_tokens bounds the dummy batch vLLM's memory profiler runs at start-up (TRL's colocate
        # mode sets it too): without it the profile of a long-context model can claim the trainer's memory.
        options.update(distributed_executor_backend="external_launcher", tensor_parallel_size=1,
                       gpu_memory_utilization=gpu_memory_utilization, enable_sleep_mode=sleep_mode,
                       max_num_batched_tokens=DEFAULT_STEP_TOKENS)
        return options
    from vllm.config import WeightTransferConfig

    from posttrain.engines.weight_sync import GLOO_BACKEND, register_gloo_receiver

    register_gloo_receiver()  # the engine runs in this process: its vLLM must know the backend
    options.update(weight_transfer_config=WeightTransferConfig(backend=GLOO_BACKEND),
                   enforce_eager=True,  # no graph compilation on CPU (tens of seconds per start, no gain here)
                   **cpu_scheduler_options(model_path, max_model_len))
    return options

