"""Token log-likelihoods of causal LMs: the one place that turns logits into per-token log-probs.

Diffusion models plug in their own estimators (ELBO, mean-field) with the same output shape, so
GRPO-style code never needs to know which kind of model it holds.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from posttrain.models.padding import left_padded_positions


def logprobs_from_logits(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log softmax(logits / T)[target] per position, computed in float32 for stability."""
    logits = logits.float()
    if temperature != 1.0 and temperature > 0:
        logits = logits / temperature
    return torch.gather(F.log_softmax(logits, dim=-1), -1, targets.unsqueeze(-1)).squeeze(-1)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the softmax distribution at each position (float32)."""
    logp = F.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def causal_token_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    temperature: float = 1.0,
    with_entropy: bool = False,
    last: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-prob of every token given its prefix: output[:, t] = log p(input_ids[:, t+1] | input_ids[:, :t+1]).

    Returns ``(logprobs [B, T-1], entropy [B, T-1] or None)``; with ``last=C`` only the log-probs of the
    final C tokens (``[B, C]``), and the model computes logits for those positions only. Position ids
    follow the attention mask so left-padded batches give the same numbers as unpadded sequences.
    """
    position_ids = left_padded_positions(attention_mask)
    kwargs = {"logits_to_keep": last + 1} if last else {}
    logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, **kwargs).logits
    logits = logits[:, :-1]
    if last:
        input_ids = input_ids[:, -(last + 1):]
    if temperature != 1.0 and temperature > 0:
        logits = logits.float() / temperature
    logprobs = logprobs_from_logits(logits, input_ids[:, 1:])
    entropy = entropy_from_logits(logits) if with_entropy else None
    return logprobs, entropy
