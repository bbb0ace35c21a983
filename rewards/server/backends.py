"""What the reward server serves: one of the project's generation engines plus the facts about its model
that the server needs (``ServedModel``), built from ``posttrain serve --backend SPEC`` (an engine spec,
``posttrain.engines.spec``) by the one engine builder (``posttrain.engines.build.build_engine``):

======================== ====================================================== ==========================
``--backend``            engine                                                 model
======================== ====================================================== ==========================
hf (or transformers)     ``HFRolloutEngine`` (CPU or GPU)                       ``--model`` (or ``hf:PATH``)
                                                                                or, unset, the embedded
                                                                                tiny mR3 judge
vllm                     ``VLLMRolloutEngine`` (GPU, and CPU through vLLM's     ``--model`` (or
                         CPU build)                                             ``vllm:PATH``; required)
fake                     ``FakeEngine`` (no model; tests and the load           none
                         benchmark)
======================== ====================================================== ==========================

The server calls ``engine.generate(prompt_ids, SamplingParams)`` from one worker thread with a whole
batch (``batching.Batcher``), encodes text with ``ServedModel.encode`` and renders chats with
``posttrain.models.chat.render_chat``. ``--model`` names go through
``posttrain.models.pretrained.resolve_model_name`` (``smollm2-135m`` works) and tokenizers through
``posttrain.models.loading.load_tokenizer`` (which keeps the tiny models' whitespace).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from posttrain.engines.base import GenerationEngine
from posttrain.engines.build import build_engine
from posttrain.engines.spec import EngineSpec, FakeSpec, VLLMSpec, parse_engine_spec
from posttrain.models.loading import DTYPES
from posttrain.models.pretrained import resolve_model_name
from posttrain.models.tiny import build_tiny

EMBEDDED_RECIPE = "reward-mr3"
BACKENDS = ("hf", "vllm", "fake")
"""The engine kinds ``--backend`` may name."""


@dataclass
class ServedModel:
    """A generation engine and what the server reports and checks about its model."""

    engine: GenerationEngine
    backend: str  # the engine spec's kind, one of BACKENDS (``/health`` reports it)
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


def load_served_model(backend: str | EngineSpec, model: str | None = None, *, device: str = "cpu",
                      dtype: str = "auto", max_batch_size: int = 64, max_model_len: int | None = None,
                      cache_dir: str | None = None, base_latency_s: float = 0.0,
                      per_item_latency_s: float = 0.0) -> ServedModel:
    """Build the ``ServedModel`` of ``--backend backend --model model`` (see the module docstring).

    ``device`` and ``max_batch_size`` are the engine's, ``max_model_len`` vLLM's, the latencies the fake
    engine's; ``dtype`` is one of ``DTYPES`` (``auto``: the checkpoint's own)."""
    spec = parse_engine_spec(backend)
    if spec.kind not in BACKENDS:
        raise ValueError(f"--backend {spec}: the server serves {', '.join(BACKENDS)} engines, not {spec.kind}")
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    if isinstance(spec, FakeSpec):
        if model is not None:
            raise ValueError("--backend fake serves no model; drop --model")
        engine = build_engine(spec.with_options({"base_latency_s": base_latency_s,
                                                 "per_item_latency_s": per_item_latency_s}))
        return ServedModel(engine, spec.kind, "fake-judge", 4096, "mr3")
    if spec.location and model is not None:
        raise ValueError(f"--backend {spec} names its own checkpoint; drop --model or the path")
    model = spec.location or model
    if model is None:
        if spec.kind == "vllm":
            raise ValueError("--backend vllm needs --model (the embedded tiny judge runs on --backend hf)")
        path, name, style = str(build_tiny(EMBEDDED_RECIPE, cache_dir=cache_dir)), f"tiny-{EMBEDDED_RECIPE}", "compact"
    else:
        path, name, style = resolve_model_name(model, cache_dir=cache_dir), model, "mr3"
    if isinstance(spec, VLLMSpec):  # vLLM schedules its own batches, and a server never trains beside it
        spec = spec.with_options({"max_model_len": max_model_len, "sleep": False})
        engine = build_engine(dataclasses.replace(spec, path=path), dtype=DTYPES[dtype])
        return ServedModel(engine, spec.kind, name, int(engine.llm.llm_engine.model_config.max_model_len), style)
    engine = build_engine(dataclasses.replace(spec, path=path), device=device, dtype=DTYPES[dtype],
                          max_batch_size=max_batch_size)
    return ServedModel(engine, spec.kind, name, context_length(engine.model.config), style)
