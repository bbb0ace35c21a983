"""Responses of the step-arithmetic warm-start policy (recipe ``causal-step-arithmetic``), labelled by the program:
the distribution a span critic scores during RL (Text2Grad, arXiv 2505.22338).

The policy's mistakes come from its warm start's ``distractor`` (one step's result one too large, carried on) and
from sampling, not from ``noisy_response``'s injected errors, so a critic trained only on the latter may never
have seen them. ``policy_responses`` samples one completion per problem through ``HFRolloutEngine`` (seeded, one
intra-op thread); ``policy_feedback_examples`` turns them into the span critic's SFT examples
(``step_arithmetic.feedback_example``: the compact request and the program's feedback). Both
``rewards.text2grad.evaluate`` (the held-out policy-sample split) and ``rewards.text2grad.tiny`` (the critic's
training data) use them.
"""

from __future__ import annotations

from collections.abc import Sequence

from posttrain.engines.base import SamplingParams
from posttrain.engines.hf import HFRolloutEngine
from posttrain.models.loading import load_causal_lm, load_tokenizer
from posttrain.models.tiny import build_tiny
from posttrain.tasks.base import Example
from posttrain.tasks.prompts import encode_prompts
from posttrain.tasks.step_arithmetic import feedback_example

POLICY_RECIPE = "causal-step-arithmetic"
MAX_NEW_TOKENS = 32
"""The benchmark's completion budget (``bench_text2grad.BUDGET``)."""


def policy_responses(prompts: Sequence[str], temperature: float, seed: int, max_batch_size: int = 64) -> list[str]:
    """One completion of the warm-start policy per prompt (``temperature`` 0 = greedy), decoded."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        directory = str(build_tiny(POLICY_RECIPE))
        tokenizer = load_tokenizer(directory)
        engine = HFRolloutEngine(load_causal_lm(directory), tokenizer, max_batch_size=max_batch_size)
        ids = encode_prompts(tokenizer, [Example(prompt=p, answer="") for p in prompts], None, 64)
        params = SamplingParams(max_new_tokens=MAX_NEW_TOKENS, temperature=temperature, seed=seed)
        return engine.generate(ids, params).texts
    finally:
        torch.set_num_threads(threads)


def policy_feedback_examples(prompts: Sequence[str], temperature: float, seed: int,
                             critique: bool = True) -> list[Example]:
    """The span critic's SFT examples over the policy's own responses to ``prompts``, labelled by the program."""
    responses = policy_responses(prompts, temperature, seed)
    return [feedback_example(p, r, critique) for p, r in zip(prompts, responses, strict=True)]
