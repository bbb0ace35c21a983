"""Generation backends of the reward server: transformers (CPU default), vLLM (GPU, lazy import), fake (tests).

A backend is anything with this shape (``Backend`` protocol):

- ``name`` ("transformers" | "vllm" | "fake"), ``model_name`` (what ``/v1/models`` lists),
  ``max_context`` (prompt + completion tokens), ``default_style`` (rubric template style: "compact"
  for the embedded tiny reward model, "mr3" otherwise);
- ``encode(text, add_special_tokens)``, ``render_chat(messages, add_generation_prompt, continue_final)``;
- ``generate(prompt_ids, SamplingParams) -> Rollouts``, called from one worker thread with a whole batch.

The transformers backend generates through the project's one HF generation core,
``posttrain.rollout.hf.HFRolloutEngine``; the server's batcher turns concurrent requests into one
``generate`` call.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any, Protocol, runtime_checkable

from posttrain.rollout.base import Rollouts, SamplingParams

logger = logging.getLogger(__name__)

EMBEDDED_RECIPE = "reward-mr3"


@runtime_checkable
class Backend(Protocol):
    name: str
    model_name: str
    max_context: int
    default_style: str

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]: ...

    def render_chat(self, messages: list[dict[str, str]], add_generation_prompt: bool = True,
                    continue_final: bool = False) -> str: ...

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts: ...


class _TokenizerMixin:
    tokenizer: Any

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"])

    def render_chat(self, messages: list[dict[str, str]], add_generation_prompt: bool = True,
                    continue_final: bool = False) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            if continue_final:
                return self.tokenizer.apply_chat_template(messages, tokenize=False, continue_final_message=True)
            return self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                      add_generation_prompt=add_generation_prompt)
        text = "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages)
        if continue_final:
            return text[:-1]
        return text + ("<|assistant|>\n" if add_generation_prompt else "")


class TransformersBackend(_TokenizerMixin):
    """A Hugging Face causal LM on CPU or GPU; ``model=None`` = the embedded tiny mR3 reward model."""

    name = "transformers"

    def __init__(self, model: str | None = None, device: str = "cpu", max_batch_size: int = 64,
                 dtype: str = "auto", cache_dir: str | None = None) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from posttrain.rollout.hf import HFRolloutEngine

        if model is None:
            from posttrain.models.tiny import build_tiny

            path = str(build_tiny(EMBEDDED_RECIPE, cache_dir=cache_dir))
            self.model_name = f"tiny-{EMBEDDED_RECIPE}"
            self.default_style = "compact"
        else:
            path = model
            self.model_name = model
            self.default_style = "mr3"
        torch_dtype = {"auto": "auto", "fp32": torch.float32, "bf16": torch.bfloat16,
                       "fp16": torch.float16}[dtype]
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        hf_model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
        self.max_context = int(getattr(hf_model.config, "max_position_embeddings", 4096) or 4096)
        self.engine = HFRolloutEngine(hf_model, self.tokenizer, max_batch_size=max_batch_size, device=device)

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts:
        return self.engine.generate(prompt_ids, params)


class VLLMBackend(_TokenizerMixin):
    """vLLM offline engine (``vllm.LLM``); imported only when chosen. Written to vLLM's documented
    ``LLM.generate(prompts, SamplingParams)`` API with ``TokensPrompt`` inputs."""

    name = "vllm"
    default_style = "mr3"

    def __init__(self, model: str, max_model_len: int | None = None, gpu_memory_utilization: float = 0.85,
                 tensor_parallel_size: int = 1, **llm_kwargs: Any) -> None:
        try:
            import vllm
        except ImportError as err:  # pragma: no cover - GPU path
            raise RuntimeError("--backend vllm needs the 'vllm' package (pip install 'posttrain[gpu]')") from err
        kwargs: dict[str, Any] = dict(model=model, gpu_memory_utilization=gpu_memory_utilization,
                                      tensor_parallel_size=tensor_parallel_size, **llm_kwargs)
        if max_model_len:
            kwargs["max_model_len"] = max_model_len
        self._vllm = vllm
        self.llm = vllm.LLM(**kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self.model_name = model
        self.max_context = int(self.llm.llm_engine.model_config.max_model_len)

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts:
        from vllm.inputs import TokensPrompt

        vparams = self._vllm.SamplingParams(
            n=1, max_tokens=params.max_new_tokens, temperature=params.temperature, top_p=params.top_p,
            top_k=params.top_k if params.top_k > 0 else -1, seed=params.seed,
            stop_token_ids=list(params.stop_token_ids) or None, logprobs=0)
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompt_ids], vparams,
                                    use_tqdm=False)
        completion_ids, texts, logprobs, reasons = [], [], [], []
        for out in outputs:
            comp = out.outputs[0]
            ids = list(comp.token_ids)
            completion_ids.append(ids)
            texts.append(comp.text)
            lps = []
            for tok, entry in zip(ids, comp.logprobs or []):
                lps.append(float(entry[tok].logprob) if entry and tok in entry else 0.0)
            logprobs.append(lps)
            reasons.append("length" if comp.finish_reason == "length" else "stop")
        return Rollouts(prompt_ids=[list(p) for p in prompt_ids], completion_ids=completion_ids, texts=texts,
                        logprobs=logprobs, finish_reasons=reasons)


class FakeBackend(_TokenizerMixin):
    """A deterministic stand-in for tests and the load benchmark: no model, a simulated batched cost.

    Each ``generate`` call sleeps ``base_latency_s + per_item_latency_s * len(batch)`` (an accelerator
    whose cost is dominated by a fixed per-step overhead, which is why batching pays). Rubric prompts
    get a well-formed verdict: pairwise prefers the response containing "good" (else the longer one),
    binary says true unless the response contains "wrong", pointwise gives ``1 + min(4, len // 10)``.
    A prompt containing "<<garbage>>" gets unparsable output; other prompts get an echo.
    """

    name = "fake"

    def __init__(self, base_latency_s: float = 0.0, per_item_latency_s: float = 0.0,
                 max_context: int = 4096, model_name: str = "fake-judge", default_style: str = "mr3") -> None:
        from posttrain.models.tiny import build_tokenizer

        self.tokenizer = build_tokenizer()
        self.base_latency_s = base_latency_s
        self.per_item_latency_s = per_item_latency_s
        self.max_context = max_context
        self.model_name = model_name
        self.default_style = default_style
        self.calls: list[int] = []  # batch size of every generate call
        self._lock = threading.Lock()

    def _respond(self, prompt: str) -> str:
        if "<<garbage>>" in prompt:
            return "I am not sure what to say"
        pair = re.search(r"# Assistant A\n(.*?)\n\n# Assistant B\n(.*?)\n\n", prompt, re.DOTALL)
        single = re.search(r"# Response\n(.*?)\n\n", prompt, re.DOTALL)
        if pair:
            a, b = pair.group(1), pair.group(2)
            if ("good" in a) != ("good" in b):
                first = "good" in a
            else:
                first = len(a) >= len(b)
            return f'compare</think>{{"explanation": "fake", "score": "Assistant {"A" if first else "B"}"}}'
        if single and "# Your Response" in prompt:
            resp = single.group(1)
            if "'enum': ['true', 'false']" in prompt or "'enum': ['false', 'true']" in prompt:
                return f'check</think>{{"explanation": "fake", "score": "{"false" if "wrong" in resp else "true"}"}}'
            return f'rate</think>{{"explanation": "fake", "score": "{1 + min(4, len(resp) // 10)}"}}'
        return " echo: " + prompt[-40:]

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts:
        with self._lock:
            self.calls.append(len(prompt_ids))
        delay = self.base_latency_s + self.per_item_latency_s * len(prompt_ids)
        if delay > 0:
            time.sleep(delay)
        texts, ids_out, lps, reasons = [], [], [], []
        for ids in prompt_ids:
            prompt = self.tokenizer.decode(ids, skip_special_tokens=False)
            ids_c = self.encode(self._respond(prompt), add_special_tokens=False)
            reason = "stop"
            if len(ids_c) > params.max_new_tokens:
                ids_c, reason = ids_c[: params.max_new_tokens], "length"
            else:
                ids_c = ids_c + [self.tokenizer.eos_token_id]
            ids_out.append(ids_c)
            texts.append(self.tokenizer.decode(ids_c, skip_special_tokens=True))
            lps.append([-0.1] * len(ids_c))
            reasons.append(reason)
        return Rollouts(prompt_ids=[list(p) for p in prompt_ids], completion_ids=ids_out, texts=texts,
                        logprobs=lps, finish_reasons=reasons)


def make_backend(kind: str, model: str | None = None, **kwargs: Any) -> Backend:
    """Build a backend by name: ``transformers`` (default; model None = embedded tiny RM), ``vllm``, ``fake``."""
    if kind == "transformers":
        return TransformersBackend(model, **{k: v for k, v in kwargs.items()
                                             if k in ("device", "max_batch_size", "dtype", "cache_dir")})
    if kind == "vllm":
        if model is None:
            raise ValueError("--backend vllm needs --model (the embedded tiny model runs on --backend transformers)")
        return VLLMBackend(model, **{k: v for k, v in kwargs.items() if k in ("max_model_len",)})
    if kind == "fake":
        return FakeBackend(**{k: v for k, v in kwargs.items()
                              if k in ("base_latency_s", "per_item_latency_s", "max_context")})
    raise ValueError(f"unknown backend {kind!r}; choose transformers, vllm or fake")
