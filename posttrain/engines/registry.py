"""Rollout engines by name (``--rollout hf``); each factory imports its backend only when built, so
GPU-only engines (vLLM) cost nothing where their libraries are missing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from posttrain.registry import Registry
from posttrain.engines.base import RolloutEngine

ROLLOUT_ENGINES: Registry[Callable[..., RolloutEngine]] = Registry("rollout engine")


@ROLLOUT_ENGINES.register("hf")
def _hf(**kwargs: Any) -> RolloutEngine:
    """Our KV-cached decoding loop over a Hugging Face causal LM (CPU or GPU)."""
    from posttrain.engines.hf import HFRolloutEngine

    return HFRolloutEngine(**kwargs)


@ROLLOUT_ENGINES.register("diffusion")
def _diffusion(**kwargs: Any) -> RolloutEngine:
    """The masked-diffusion sampler (semi-autoregressive blocks, low-confidence remasking)."""
    from posttrain.engines.diffusion import DiffusionRolloutEngine

    return DiffusionRolloutEngine(**kwargs)


@ROLLOUT_ENGINES.register("vllm-remote")
def _vllm_remote(*, model: Any, tokenizer: Any, urls: list[str], timeout_s: float, dtype: Any,
                 **in_process_options: Any) -> RolloutEngine:
    """vLLM servers started with `posttrain rollout-worker`, synced over vLLM's weight-transfer protocol
    (``in_process_options``, the device and batch size of in-process engines, do not apply)."""
    from posttrain.engines.remote import RemoteVLLMEngine

    return RemoteVLLMEngine(urls, tokenizer, model, timeout_s=timeout_s, dtype=dtype)


@ROLLOUT_ENGINES.register("vllm")
def _vllm(model: Any, tokenizer: Any, max_batch_size: int = 256, dtype: str | None = None, seed: int = 0,
          **options: Any) -> RolloutEngine:
    """vLLM in this process (colocated), started on the checkpoint ``model`` was loaded from (its
    ``name_or_path``); the module itself is not kept, vLLM loads its own copy."""
    from posttrain.engines.vllm import VLLMRolloutEngine

    options.pop("device", None)  # vLLM places itself (its platform: CUDA or CPU)
    return VLLMRolloutEngine.from_pretrained(model.name_or_path, tokenizer=tokenizer,
                                             dtype=dtype or str(model.dtype).removeprefix("torch."),
                                             max_num_seqs=max_batch_size, seed=seed, **options)


def build_rollout_engine(name: str, **kwargs: Any) -> RolloutEngine:
    """Build the engine registered as ``name``; unknown names fail listing the known ones."""
    return ROLLOUT_ENGINES.get(name)(**kwargs)


def checkpoint_engine(name: str, path: str, tokenizer: Any, *, device: str | None, max_batch_size: int,
                      trust_remote_code: bool = False, seed: int = 0) -> RolloutEngine:
    """The in-process engine ``name`` (hf or vllm) on the checkpoint at ``path``, as the subcommands build it
    (``posttrain dupo-rerank``, ``posttrain prefix-cluster``); ``device`` None = cuda if available, else cpu;
    ``seed`` is vLLM's engine seed (the HF engine is seeded per call)."""
    import torch

    from posttrain.models.loading import load_causal_lm

    model = load_causal_lm(path, trust_remote_code=trust_remote_code)
    return build_rollout_engine(name, model=model, tokenizer=tokenizer,
                                device=device or ("cuda" if torch.cuda.is_available() else "cpu"),
                                max_batch_size=max_batch_size, **({"seed": seed} if name == "vllm" else {}))


def engine_options(config: Any, name: str | None = None) -> dict[str, Any]:
    """Engine-specific constructor arguments taken from a ``TrainConfig`` for the engine ``name`` (default: the
    run's ``--rollout``; a frozen model role may be served by another): the diffusion sampler's schedule,
    vLLM's seed, sleep mode, memory share and sync timeout, the remote workers and their timeout."""
    name = name or config.rollout
    if name == "vllm-remote":
        import torch

        from posttrain.engines.remote import parse_worker_urls

        return {"urls": parse_worker_urls(config.rollout_workers), "timeout_s": config.worker_timeout_s,
                "dtype": torch.bfloat16 if config.precision == "bf16" else torch.float32}
    if name == "vllm":
        return {"seed": config.seed, "sleep_mode": config.vllm_sleep,
                "gpu_memory_utilization": config.vllm_gpu_memory_utilization,
                "sync_timeout_s": config.worker_timeout_s}
    if name != "diffusion":
        return {}
    from posttrain.engines.diffusion import DiffusionSampling

    return {"sampling": DiffusionSampling(block_length=config.block_length, steps=config.diffusion_steps or None,
                                          remasking=config.remasking)}
