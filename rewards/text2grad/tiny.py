"""The embedded tiny span reward model (recipe ``reward-text2grad``; Text2Grad, arXiv 2505.22338).

A character-level model with the policies' tokenizer, warm-started by SFT on compact requests
``T2G|spans|<problem>|<response>|`` whose targets are the program's feedback as compact JSON of the "spans" form
(critique, good steps, poor steps, ``incomplete``). Its data mixes two sources of responses on ``step-arithmetic``
train problems, each labelled by ``program_feedback``:

- ``recipe.task``'s train split (``step-arithmetic-feedback``): responses with ``noisy_response``'s injected step
  errors;
- ``POLICY_PROBLEMS`` samples of the warm-start policy ``causal-step-arithmetic`` itself
  (``rewards.text2grad.policy_samples``) at each of ``POLICY_TEMPERATURES``, on train problems past the noisy
  split's: the distribution the critic scores during RL, whose errors (the policy's ``distractor``, one result
  one too large) the noisy responses rarely show.

Each draw of the SFT loop takes a policy sample with probability ``POLICY_SHARE``. The tokens of the
``poor_spans`` field and what follows it (the ``incomplete`` flag) weigh ``POOR_WEIGHT`` in the loss
(``poor_span_weights``): they are where the critic says which steps are wrong, a few of the ~60 target
characters. The loop is the shared ``posttrain.algos.warm_start.sft_warm_start`` (prompts through the chat
template), so the model reads its input exactly as ``scorer.SpanRewardModel(style="compact")`` renders it. The
recipe ``reward-text2grad-nocritique`` runs the same warm start on ``step-arithmetic-feedback-nocritique`` (targets
without the critique field): the paper's "spans without critique" ablation.

Why: the previous critic (noisy responses only, 700 steps) flagged poor steps at chance on held-out data
(issue 41); its measurement beside the chance baselines is ``posttrain text2grad-eval``
(``rewards.text2grad.evaluate``).

Deviation from the paper: Text2Grad fine-tunes Llama-3.1-8B with LoRA on GPT-4o annotations; here a
program writes the annotations (it knows which step is wrong) and the model is a small character model, so the
critique is short and templated.
"""

from __future__ import annotations

import math
import random
from typing import Any

import torch

from posttrain.algos.warm_start import sft_warm_start
from posttrain.tasks import TASKS
from posttrain.tasks.base import Example
from rewards.text2grad.policy_samples import policy_feedback_examples

POLICY_PROBLEMS = 4000
"""Train problems sampled from the policy, per temperature (fewer when the warm start draws fewer policy samples
than that: a short test build does not sample thousands)."""
POLICY_TEMPERATURES = (0.7, 1.0)
"""The benchmark's sampling temperature, and a hotter one for the more varied mistakes of a policy in training."""
POLICY_SHARE = 0.5
POOR_WEIGHT = 4.0
POOR_FIELD = '"poor_spans":'


def poor_span_weights(answer: str, target_ids: list[int]) -> list[float]:
    """``POOR_WEIGHT`` on the target characters from ``"poor_spans":`` on (the poor steps and the ``incomplete``
    flag), 1 elsewhere and on EOS; the character tokenizer gives one id per character plus EOS."""
    if len(target_ids) != len(answer) + 1:
        raise ValueError(f"poor_span_weights needs one token per character: {len(target_ids)} ids for "
                         f"{len(answer)} characters of {answer[:60]!r}")
    start = answer.find(POOR_FIELD)
    if start < 0:
        raise ValueError(f"target without {POOR_FIELD}: {answer[:80]!r}")
    return [POOR_WEIGHT if start <= i < len(answer) else 1.0 for i in range(len(answer))] + [1.0]


def mixed_examples(noisy: list[Example], policy: list[Example], size: int, seed: int) -> list[Example]:
    """``size`` examples drawn so that a share ``POLICY_SHARE`` are policy samples (seeded, with replacement)."""
    rng = random.Random(seed)
    return [rng.choice(policy) if rng.random() < POLICY_SHARE else rng.choice(noisy) for _ in range(size)]


def warm_start(model: Any, tokenizer: Any, recipe: Any, generator: torch.Generator) -> None:
    """SFT on the mixed data with the poor spans weighted (module docstring), in place, with one intra-op thread
    (restored afterwards): on a shared 2-core machine a tiny model trains faster single-threaded."""
    task = TASKS.get(recipe.task)()
    noisy = task.split("train")
    draws = recipe.warm_start_steps * recipe.batch_size * POLICY_SHARE / len(POLICY_TEMPERATURES)
    per_temperature = min(POLICY_PROBLEMS, math.ceil(draws))
    problems = [e.prompt for e in TASKS.get("step-arithmetic")().split("train")]
    taken = problems[len(noisy):len(noisy) + per_temperature * len(POLICY_TEMPERATURES)]
    if len(taken) < per_temperature * len(POLICY_TEMPERATURES):
        raise ValueError(f"recipe {recipe.name!r}: {len(taken)} train problems left past the noisy split's "
                         f"{len(noisy)}, need {per_temperature * len(POLICY_TEMPERATURES)}")
    policy = [ex for k, temperature in enumerate(POLICY_TEMPERATURES)
              for ex in policy_feedback_examples(taken[k * per_temperature:(k + 1) * per_temperature],
                                                 temperature, recipe.seed + k, critique=task.critique)]
    examples = mixed_examples(noisy, policy, len(noisy) + len(policy), recipe.seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        sft_warm_start(model, tokenizer, recipe, generator, examples=examples, target_weights=poor_span_weights)
    finally:
        torch.set_num_threads(threads)
