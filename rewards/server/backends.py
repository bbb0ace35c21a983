"""What the reward server serves: one of the project's generation engines plus the facts about its model
that the server needs (``ServedModel``), built by name for ``posttrain serve --backend``.

============== ============================================================ ==========================
``--backend``  engine                                                       model
============== ============================================================ ==========================
transformers   ``posttrain.engines.hf.HFRolloutEngine`` (CPU or GPU)        ``--model`` or, unset, the
                                                                            embedded tiny mR3 judge
vllm           ``posttrain.engines.vllm.VLLMRolloutEngine`` (GPU, and CPU   ``--model`` (required)
               through vLLM's CPU build)
fake           ``posttrain.engines.fake.FakeEngine`` (no model; tests and      none
               the load benchmark)
============== ============================================================ ==========================

The server calls ``engine.generate(prompt_ids, SamplingParams)`` from one worker thread with a whole
batch (``batching.Batcher``), encodes text with ``ServedModel.encode`` and renders chats with
``posttrain.models.chat.render_chat``. ``--model`` names go through
``posttrain.models.pretrained.resolve_model_name`` (``smollm2-135m`` works) and tokenizers through
``posttrain.models.loading.load_tokenizer`` (which keeps the tiny models' whitespace).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from posttrain.engines.base import GenerationEngine

EMBEDDED_RECIPE = "reward-mr3"
BACKENDS = ("transformers", "vllm", "fake")
DTYPES: dict[str, torch.dtype | str] = {"auto": "auto", "fp32": torch.float32, "bf16": torch.bfloat16,
                                        "fp16": torch.float16}


@dataclass
class ServedModel:
    """A generation engine and what the server reports and checks about its model."""

    engine: GenerationEngine
    backend: str  # one of BACKENDS (``/health`` reports it)
    model_name: str  # what ``/v1/models`` lists
    max_context: int  # prompt + completion tokens
    default_style: str  # rubric template style: "compact" for the embedded tiny judge, "mr3" otherwise

    @property
    def tokenizer(self) -> Any:
        return self.engine.tokenizer

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """``text`` as the engine's token ids."""
        return list(self.tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"])


def context_length(config: Any) -> int:
    """The longest sequence a model config allows (``max_position_embeddings``; 4096 when unset)."""
    return int(getattr(config, "max_position_embeddings", None) or 4096)


def vllm_dtype(dtype: str, path: str) -> str:
    """The vLLM engine's dtype name for ``--dtype`` (``auto``: the checkpoint's ``dtype`` in its
    config.json, float32 when it names none)."""
    if dtype != "auto":
        return str(DTYPES[dtype]).removeprefix("torch.")
    config = Path(path) / "config.json"
    saved = json.loads(config.read_text()) if config.is_file() else {}
    name = saved.get("dtype") or saved.get("torch_dtype") or "float32"
    return name if name in ("float32", "bfloat16", "float16") else "float32"


def load_served_model(backend: str, model: str | None = None, *, device: str = "cpu", dtype: str = "auto",
                      max_batch_size: int = 64, max_model_len: int | None = None, cache_dir: str | None = None,
                      base_latency_s: float = 0.0, per_item_latency_s: float = 0.0) -> ServedModel:
    """Build the ``ServedModel`` of ``--backend backend --model model`` (see the module docstring).

    ``device`` and ``max_batch_size`` are for ``transformers``, ``max_model_len`` for ``vllm``, the
    latencies for ``fake``; ``dtype`` is one of ``DTYPES`` (``auto``: the checkpoint's own)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    if backend == "fake":
        from posttrain.engines.fake import FakeEngine

        if model is not None:
            raise ValueError("--backend fake serves no model; drop --model")
        return ServedModel(FakeEngine(base_latency_s, per_item_latency_s), "fake", "fake-judge", 4096, "mr3")

    from posttrain.models.pretrained import resolve_model_name

    if model is None:
        if backend == "vllm":
            raise ValueError("--backend vllm needs --model (the embedded tiny judge runs on --backend transformers)")
        from posttrain.models.tiny import build_tiny

        path, name, style = str(build_tiny(EMBEDDED_RECIPE, cache_dir=cache_dir)), f"tiny-{EMBEDDED_RECIPE}", "compact"
    else:
        path, name, style = resolve_model_name(model, cache_dir=cache_dir), model, "mr3"
    if backend == "transformers":
        from posttrain.engines.hf import HFRolloutEngine

        engine = HFRolloutEngine.from_pretrained(path, dtype=DTYPES[dtype], device=device,
                                                 max_batch_size=max_batch_size)
        return ServedModel(engine, backend, name, context_length(engine.model.config), style)
    from posttrain.engines.vllm import VLLMRolloutEngine

    engine = VLLMRolloutEngine.from_pretrained(path, dtype=vllm_dtype(dtype, path), max_model_len=max_model_len)
    return ServedModel(engine, backend, name, int(engine.llm.llm_engine.model_config.max_model_len), style)
