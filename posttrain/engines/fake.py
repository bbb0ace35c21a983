"""A deterministic stand-in generation engine for the reward server's tests and load benchmark.

``FakeEngine`` implements ``posttrain.engines.base.GenerationEngine`` like the real engines, with no
model: each ``generate`` call sleeps ``base_latency_s + per_item_latency_s * len(batch)`` (an
accelerator whose cost is dominated by a fixed per-step overhead, which is why batching pays). Rubric
prompts get a well-formed verdict: pairwise prefers the response containing "good" (else the longer one),
binary says true unless the response contains "wrong", pointwise gives ``1 + min(4, len // 10)``.
A prompt containing "<<garbage>>" gets unparsable output; other prompts get an echo.
"""

from __future__ import annotations

import re
import threading
import time

from posttrain.engines.base import Rollouts, SamplingParams, check_prompts, refuse_json_schema
from posttrain.models.tiny import build_tokenizer


class FakeEngine:
    """See the module docstring; ``calls`` records the batch size of every ``generate`` call."""

    def __init__(self, base_latency_s: float = 0.0, per_item_latency_s: float = 0.0) -> None:
        if base_latency_s < 0 or per_item_latency_s < 0:
            raise ValueError(f"latencies must be >= 0, got {base_latency_s}, {per_item_latency_s}")
        self.tokenizer = build_tokenizer()
        self.base_latency_s = base_latency_s
        self.per_item_latency_s = per_item_latency_s
        self.calls: list[int] = []
        self._lock = threading.Lock()

    def _respond(self, prompt: str) -> str:
        if "<<garbage>>" in prompt:
            return "I am not sure what to say"
        # mR3's layout indents each section after the first (``official``), hence the ``\s*``
        pair = re.search(r"# Assistant A\n\s*(.*?)\n\n\s*# Assistant B\n\s*(.*?)\n\n", prompt, re.DOTALL)
        single = re.search(r"# (?:Response|Provided Math Solution|Provided Code Solution)\n\s*(.*?)\n\n", prompt,
                           re.DOTALL)
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
        """The canned answer of every prompt, cut at ``max_new_tokens`` (else ended by the eos token); a
        JSON schema is refused (canned answers follow none)."""
        refuse_json_schema(params, "the fake engine (--backend fake)")
        check_prompts(prompt_ids)
        with self._lock:
            self.calls.append(len(prompt_ids))
        delay = self.base_latency_s + self.per_item_latency_s * len(prompt_ids)
        if delay > 0:
            time.sleep(delay)
        texts, ids_out, lps, reasons = [], [], [], []
        for ids in prompt_ids:
            prompt = self.tokenizer.decode(ids, skip_special_tokens=False)
            completion = self.tokenizer(self._respond(prompt), add_special_tokens=False)["input_ids"]
            reason = "stop"
            if len(completion) > params.max_new_tokens:
                completion, reason = completion[: params.max_new_tokens], "length"
            else:
                completion = completion + [self.tokenizer.eos_token_id]
            ids_out.append(completion)
            texts.append(self.tokenizer.decode(completion, skip_special_tokens=True))
            lps.append([-0.1] * len(completion))
            reasons.append(reason)
        return Rollouts(prompt_ids=[list(p) for p in prompt_ids], completion_ids=ids_out, texts=texts,
                        logprobs=lps, finish_reasons=reasons)
