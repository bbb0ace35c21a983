"""The one engine builder: ``build_engine(spec, ...)`` turns an ``EngineSpec`` (``engines.spec``) into the
engine, importing each backend only when it is built (vLLM costs nothing where it is missing), and
``cached_engine`` keeps one engine per spec and settings in a process (the data pipelines' Ray workers).

Every kind's builder is registered in ``ENGINE_BUILDERS`` under its kind; a layer above the engines may
register the builder of a kind whose engine it owns (the data pipelines' ``cachelm``, whose training text
is theirs).

The caller supplies what a spec does not say: ``model`` (a loaded module the engine serves: the trainer's
policy or role; a spec's path is loaded instead when it has one), ``tokenizer``, ``device``,
``max_batch_size``, ``dtype``, vLLM's engine ``seed``, ``top_k`` (log-probs per position of the top-k
scorers), the HTTP ``api_key``, ``trust_remote_code``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from posttrain.common.registry import Registry
from posttrain.engines.diffusion import DiffusionRolloutEngine, DiffusionSampling
from posttrain.engines.fake import FakeEngine
from posttrain.engines.hf import HFRolloutEngine
from posttrain.engines.http import OpenAIHTTPEngine
from posttrain.engines.remote import RemoteVLLMEngine
from posttrain.engines.spec import (
    DiffusionSpec,
    EngineSpec,
    FakeSpec,
    HFSpec,
    HTTPSpec,
    VLLMRemoteSpec,
    VLLMSpec,
)
from posttrain.engines.vllm import VLLMRolloutEngine
from posttrain.engines.worker_auth import worker_secret
from posttrain.models.diffusion import load_diffusion_lm
from posttrain.models.loading import load_causal_lm, load_tokenizer
from posttrain.models.pretrained import resolve_model_name


@dataclass(frozen=True)
class EngineContext:
    """What the caller of ``build_engine`` supplies besides the spec (see the module docstring)."""

    model: torch.nn.Module | None = None
    tokenizer: Any = None  # an object, or the name of a folder, hub id or alias to load it from
    device: str | torch.device | None = None
    max_batch_size: int = 256
    dtype: torch.dtype | str | None = None
    seed: int = 0
    top_k: int = 20
    api_key: str | None = None
    trust_remote_code: bool = False

    @property
    def torch_device(self) -> str | torch.device:
        """``device``, or cuda if available, else cpu."""
        return self.device or ("cuda" if torch.cuda.is_available() else "cpu")


ENGINE_BUILDERS: Registry[Callable[[Any, EngineContext], Any]] = Registry("engine kind")


def build_engine(spec: EngineSpec, **context: Any) -> Any:
    """The engine ``spec`` names, built with the caller's ``context`` (``EngineContext``'s fields)."""
    return ENGINE_BUILDERS.get(spec.kind)(spec, EngineContext(**context))


_CACHE: dict[tuple[Any, ...], Any] = {}
_CACHE_LOCK = threading.Lock()


def cached_engine(spec: EngineSpec, **context: Any) -> Any:
    """``build_engine(spec, **context)`` once per process for each spec and context (which must hold plain
    values: no ``model``, a tokenizer by name only), e.g. one engine per Ray worker process."""
    if context.get("model") is not None or not isinstance(context.get("tokenizer"), (str, type(None))):
        raise ValueError("cached_engine keys on plain values; build engines of loaded modules with build_engine")
    key = (spec, tuple(sorted(context.items())))
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = build_engine(spec, **context)
        return _CACHE[key]


def _checkpoint(spec: EngineSpec, ctx: EngineContext) -> str:
    """The folder of ``spec``'s checkpoint (aliases resolved), or of the caller's module."""
    path = getattr(spec, "path", None)
    if path:
        return resolve_model_name(path)
    if ctx.model is not None and getattr(ctx.model, "name_or_path", None):
        return str(ctx.model.name_or_path)
    raise ValueError(f"the {spec.kind} engine has no model: name a checkpoint ({spec.kind}:PATH) or give it one")


def _tokenizer(spec: EngineSpec, ctx: EngineContext) -> Any:
    """The caller's tokenizer (an object, or the name of a folder, hub id or alias to load it from), else the
    one saved with ``spec``'s checkpoint (or the caller's module's)."""
    if isinstance(ctx.tokenizer, str):
        return load_tokenizer(_checkpoint(HFSpec(ctx.tokenizer), ctx), trust_remote_code=ctx.trust_remote_code)
    if ctx.tokenizer is not None:
        return ctx.tokenizer
    return load_tokenizer(_checkpoint(spec, ctx), trust_remote_code=ctx.trust_remote_code)


def _own_module(spec: EngineSpec, ctx: EngineContext, load: Callable[..., torch.nn.Module]) -> torch.nn.Module:
    """The module an in-process engine serves: the caller's, or ``spec``'s checkpoint loaded."""
    if ctx.model is not None and not getattr(spec, "path", None):
        return ctx.model
    kwargs = {"trust_remote_code": ctx.trust_remote_code}
    if ctx.dtype is not None:
        kwargs["dtype"] = ctx.dtype
    return load(_checkpoint(spec, ctx), **kwargs)


def checkpoint_dtype(path: str) -> str:
    """The dtype name a checkpoint's config.json records (float32 when it names none or another)."""
    config = Path(path) / "config.json"
    saved = json.loads(config.read_text()) if config.is_file() else {}
    name = saved.get("dtype") or saved.get("torch_dtype") or "float32"
    return name if name in ("float32", "bfloat16", "float16") else "float32"


@ENGINE_BUILDERS.register("hf")
def _hf(spec: HFSpec, ctx: EngineContext) -> Any:
    module = _own_module(spec, ctx, load_causal_lm)
    tokenizer = _tokenizer(spec, ctx)
    return HFRolloutEngine(module, tokenizer, max_batch_size=ctx.max_batch_size, device=ctx.torch_device)


@ENGINE_BUILDERS.register("diffusion")
def _diffusion(spec: DiffusionSpec, ctx: EngineContext) -> Any:
    module = _own_module(spec, ctx, load_diffusion_lm)
    tokenizer = _tokenizer(spec, ctx)
    sampling = DiffusionSampling(block_length=spec.block_length, steps=spec.steps or None, remasking=spec.remasking)
    return DiffusionRolloutEngine(module, tokenizer, sampling, max_batch_size=ctx.max_batch_size,
                                  device=ctx.torch_device)


@ENGINE_BUILDERS.register("vllm")
def _vllm(spec: VLLMSpec, ctx: EngineContext) -> Any:
    """vLLM loads its own copy of the checkpoint (the caller's module is only asked where it came from)."""
    path = _checkpoint(spec, ctx)
    if ctx.dtype is not None and ctx.dtype != "auto":
        dtype = str(ctx.dtype).removeprefix("torch.")
    elif ctx.model is not None and not spec.path:
        dtype = str(ctx.model.dtype).removeprefix("torch.")
    else:
        dtype = checkpoint_dtype(path)
    # vLLM refuses more log-probs per position than its max_logprobs (20 unless raised here)
    return VLLMRolloutEngine.from_pretrained(path, tokenizer=ctx.tokenizer, dtype=dtype,
                                             max_model_len=spec.max_model_len, seed=ctx.seed,
                                             max_num_seqs=ctx.max_batch_size,
                                             gpu_memory_utilization=spec.gpu_memory_utilization,
                                             sleep_mode=spec.sleep, trust_remote_code=ctx.trust_remote_code,
                                             sync_timeout_s=spec.sync_timeout_s, score_top_k=ctx.top_k,
                                             max_logprobs=max(ctx.top_k, 20))


@ENGINE_BUILDERS.register("vllm-remote")
def _vllm_remote(spec: VLLMRemoteSpec, ctx: EngineContext) -> Any:
    """The workers serve ``ctx.model``'s weights once built (pushed as version 0, in the dtype the workers
    serve; the trainer's is ``ctx.dtype``, else the module's)."""
    if ctx.tokenizer is None:
        raise ValueError("the vllm-remote engine needs the served model's tokenizer")
    dtype = ctx.dtype if isinstance(ctx.dtype, torch.dtype) else getattr(ctx.model, "dtype", torch.float32)
    return RemoteVLLMEngine(list(spec.urls), ctx.tokenizer, ctx.model, sync_timeout_s=spec.sync_timeout_s,
                            generation_timeout_s=spec.generation_timeout_s, dtype=dtype, secret=worker_secret())


@ENGINE_BUILDERS.register("http")
def _http(spec: HTTPSpec, ctx: EngineContext) -> Any:
    """The tokenizer is the caller's, else the one of the model named after '#'."""
    if ctx.tokenizer is None and not spec.model:
        raise ValueError(f"{spec}: an HTTP engine needs the served model's tokenizer: name the model after '#' "
                         "(http://HOST:PORT/v1#MODEL) or give a tokenizer")
    try:
        tokenizer = _tokenizer(HFSpec(spec.model), ctx)
    except (OSError, ValueError) as err:
        name = ctx.tokenizer if isinstance(ctx.tokenizer, str) else spec.model
        raise ValueError(f"{spec}: cannot load the tokenizer {name!r} ({err}); give a tokenizer") from err
    return OpenAIHTTPEngine(spec.url, tokenizer, model=spec.model or "default", api_key=ctx.api_key,
                            top_k=min(ctx.top_k, 20))


@ENGINE_BUILDERS.register("fake")
def _fake(spec: FakeSpec, ctx: EngineContext) -> Any:
    return FakeEngine(spec.base_latency_s, spec.per_item_latency_s)
