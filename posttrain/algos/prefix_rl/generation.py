"""Prefix-then-target generation (Prefix-RL, "Parameter-Efficient Reinforcement Learning using Prefix
Optimization", ICLR 2026): the adapter writes the opening of the answer, the frozen target writes the rest.

Token ids pass between the two unchanged: the target's prompt is the adapter's prompt ids followed by the
adapter's prefix ids, as lists, never decoded and re-encoded (re-tokenising text at the prefix boundary can
split a word differently; the two models share one tokenizer, checked at start-up by
``posttrain.algos.roles.check_same_tokenizer``). A prefix that stopped at EOS is already a whole answer: the
target is not asked to continue it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from posttrain.common.seeds import derive_seed
from posttrain.engines.base import GenerationEngine, Rollouts, SamplingParams, refuse_json_schema


def target_params(params: SamplingParams, max_new_tokens: int, temperature: float) -> SamplingParams:
    """The target's sampling settings for a call whose adapter settings are ``params``: greedy when the
    adapter is greedy (evaluation), else ``temperature``; its own length budget; a seed derived from the
    adapter's, so the two draws differ and reruns repeat."""
    seed = None if params.seed is None else derive_seed(params.seed, "target")
    return SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0 if params.temperature == 0 else temperature,
                          top_p=params.top_p, top_k=params.top_k, seed=seed)


def continue_with_target(target: GenerationEngine, prefix: Rollouts, params: SamplingParams) -> Rollouts:
    """The target's continuation of every (prompt + prefix), in order: prompts ``prefix.prompt_ids[i] +
    prefix.completion_ids[i]``, the same ids. Prefixes that stopped (EOS) get an empty continuation."""
    open_rows = [i for i, reason in enumerate(prefix.finish_reasons) if reason != "stop"]
    inputs = [list(prefix.prompt_ids[i]) + list(prefix.completion_ids[i]) for i in open_rows]
    done = target.generate(inputs, params) if inputs else None
    n = len(prefix)
    ids: list[list[int]] = [[] for _ in range(n)]
    logprobs: list[list[float]] = [[] for _ in range(n)]
    reasons = ["stop"] * n
    texts = [""] * n
    for row, i in enumerate(open_rows):
        ids[i], logprobs[i] = done.completion_ids[row], done.logprobs[row]
        reasons[i], texts[i] = done.finish_reasons[row], done.texts[row]
    return Rollouts(prompt_ids=[list(p) + list(c) for p, c in zip(prefix.prompt_ids, prefix.completion_ids)],
                    completion_ids=ids, texts=texts, logprobs=logprobs, finish_reasons=reasons,
                    weight_version=done.weight_version if done is not None else 0)


def whole_answers(tokenizer: Any, prefix: Rollouts, continuation: Rollouts) -> Rollouts:
    """One rollout per prompt whose completion is the whole answer (prefix then continuation ids), decoded
    from those ids; its log-probs are each token's under the model that sampled it; the finish reason is the
    continuation's (the prefix's when it stopped at EOS); the weight version is the adapter's."""
    ids = [list(p) + list(c) for p, c in zip(prefix.completion_ids, continuation.completion_ids)]
    return Rollouts(prompt_ids=[list(p) for p in prefix.prompt_ids], completion_ids=ids,
                    texts=tokenizer.batch_decode(ids, skip_special_tokens=True),
                    logprobs=[list(p) + list(c) for p, c in zip(prefix.logprobs, continuation.logprobs)],
                    finish_reasons=list(continuation.finish_reasons), weight_version=prefix.weight_version)


def adapter_prefixes(answers: Rollouts, prefix_tokens: int) -> Rollouts:
    """The adapter's part of whole answers, as the policy-gradient step trains on it: completions and log-probs are
    the first ``prefix_tokens`` tokens (the adapter's, the only tokens that carry the loss: a prefix that stopped at
    EOS is its whole answer, a longer answer is the k prefix tokens and then the target's), texts and finish
    reasons the whole answer's (what the reward scores)."""
    return dataclasses.replace(answers, completion_ids=[list(ids[:prefix_tokens]) for ids in answers.completion_ids],
                               logprobs=[list(lp[:prefix_tokens]) for lp in answers.logprobs])


class PrefixThenTarget:
    """A ``GenerationEngine`` that answers with the adapter's ``prefix_tokens`` tokens, then the target's
    continuation of at most ``target_max_new_tokens`` (``target_params``); ``params.max_new_tokens`` is not
    used. It is what Prefix-RL's held-out evaluation generates with (``Algorithm.evaluation_engine``)."""

    def __init__(self, adapter: GenerationEngine, target: GenerationEngine, prefix_tokens: int,
                 target_max_new_tokens: int, target_temperature: float) -> None:
        self.adapter, self.target = adapter, target
        self.tokenizer = adapter.tokenizer
        self.prefix_tokens, self.target_max_new_tokens = prefix_tokens, target_max_new_tokens
        self.target_temperature = target_temperature

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts:
        """Whole answers: the adapter's prefixes (exactly ``prefix_tokens`` each, fewer only at EOS), then the target's
        continuations. A JSON schema is refused: one grammar cannot span the two engines' calls."""
        refuse_json_schema(params, "Prefix-RL's prefix-then-target engine")
        prefix = self.adapter.generate(prompt_ids, dataclasses.replace(params, max_new_tokens=self.prefix_tokens,
                                                                      stop_token_ids=()))
        continuation = continue_with_target(self.target, prefix, target_params(
            params, self.target_max_new_tokens, self.target_temperature))
        return whole_answers(self.tokenizer, prefix, continuation)
