"""Token log-likelihoods of causal LMs: the one place that turns logits into per-token log-probs.

Diffusion models plug in their own estimators (ELBO, mean-field) with the same output shape, so
GRPO-style code never needs to know which kind of model it holds.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from posttrain.common.padding import left_padded_positions

_CHUNK_ELEMENTS = 2**24
"""float32 elements of one chunk of the [.., V] intermediates (64 MiB): how much of the vocabulary-wide work
is materialised at once."""


def _row_chunks(logits: torch.Tensor) -> list[tuple[slice, slice]]:
    """(batch rows, positions) index pairs that tile a ``[B, T, V]`` tensor, each piece at most
    ``_CHUNK_ELEMENTS`` wide where a position allows (whole rows together when they fit, else one row cut
    into position spans): views of the tensor as it is, so a non-contiguous ``logits[:, :-1]`` is never
    copied, and small models pay one piece per call."""
    batch, length, vocab = logits.shape
    if length * vocab <= _CHUNK_ELEMENTS:
        rows = max(1, _CHUNK_ELEMENTS // max(1, length * vocab))
        return [(slice(b, min(b + rows, batch)), slice(0, length)) for b in range(0, batch, rows)]
    step = max(1, _CHUNK_ELEMENTS // vocab)
    return [(slice(b, b + 1), slice(s, min(s + step, length))) for b in range(batch) for s in range(0, length, step)]


def _scaled_float(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """A float32 copy of ``logits / temperature``, never a view of ``logits``: the caller changes it in place."""
    scaled = logits.float() if logits.dtype != torch.float32 else logits.clone()
    return scaled if temperature == 1.0 else scaled.div_(temperature)


class _TargetLogprob(torch.autograd.Function):
    """log softmax(logits / T)[target] in float32, keeping for the backward pass only the logits (in their
    own dtype) and the per-position log-normaliser: the float32 ``[.., V]`` intermediates (the upcast, the
    softmax, its gradient) exist one chunk at a time, where ``log_softmax`` + ``gather`` would keep a whole
    float32 copy of the logits alive until the backward pass."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
        lse = torch.empty(targets.shape, dtype=torch.float32, device=logits.device)
        picked = torch.empty_like(lse)
        for rows, span in _row_chunks(logits):
            scaled = logits[rows, span].float()
            if temperature != 1.0:
                scaled = scaled / temperature
            lse[rows, span] = torch.logsumexp(scaled, dim=-1)
            picked[rows, span] = scaled.gather(-1, targets[rows, span].unsqueeze(-1)).squeeze(-1)
        ctx.save_for_backward(logits, targets, lse)
        ctx.temperature = temperature
        return picked - lse

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        logits, targets, lse = ctx.saved_tensors
        grad_logits = torch.empty_like(logits)
        for rows, span in _row_chunks(logits):
            g = grad[rows, span].float().unsqueeze(-1) / ctx.temperature
            # d/dlogits of (logit_target / T - lse) is (onehot - softmax) / T
            local = _scaled_float(logits[rows, span], ctx.temperature).sub_(lse[rows, span].unsqueeze(-1)).exp_()
            local.mul_(g.neg()).scatter_add_(-1, targets[rows, span].unsqueeze(-1), g)
            grad_logits[rows, span] = local
        return grad_logits, None, None


def logprobs_from_logits(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log softmax(logits / T)[target] per position (``[B, T, V]`` or ``[T, V]`` logits), computed in float32
    for stability, chunk by chunk so that no float32 copy of the whole vocabulary-wide tensor is kept."""
    if temperature <= 0:
        temperature = 1.0
    if logits.dim() == 2:
        return _TargetLogprob.apply(logits.unsqueeze(0), targets.unsqueeze(0), temperature).squeeze(0)
    return _TargetLogprob.apply(logits, targets, temperature)


@torch.no_grad()
def entropy_from_logits(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Entropy of softmax(logits / T) at each position (float32), a metric: no gradient, computed chunk by
    chunk (``[B, T, V]`` or ``[T, V]`` logits)."""
    if temperature <= 0:
        temperature = 1.0
    squeeze = logits.dim() == 2
    logits = logits.unsqueeze(0) if squeeze else logits
    entropy = torch.empty(logits.shape[:-1], dtype=torch.float32, device=logits.device)
    for rows, span in _row_chunks(logits):
        logp = F.log_softmax(logits[rows, span].float() / temperature, dim=-1)
        entropy[rows, span] = -(logp.exp() * logp).sum(-1)
    return entropy.squeeze(0) if squeeze else entropy


def causal_token_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    temperature: float = 1.0,
    with_entropy: bool = False,
    last: int | None = None,
    padding_free: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-prob of every token given its prefix: output[:, t] = log p(input_ids[:, t+1] | input_ids[:, :t+1]).

    Returns ``(logprobs [B, T-1], entropy [B, T-1] or None)``; with ``last=C`` only the log-probs of the
    final C tokens (``[B, C]``), and the model computes logits for those positions only. Position ids
    follow the attention mask so left-padded batches give the same numbers as unpadded sequences.
    The entropy is a metric: it carries no gradient, so none of its ``[B, T, V]`` intermediates is kept
    for the backward pass (with a 49k vocabulary each is 0.4 GB per 16 x 128 tokens).

    ``padding_free``: the same numbers from one forward over the batch's real tokens only
    (``packed_token_logprobs``); each row's real tokens must be contiguous, as ``pack_sequences`` lays them out.
    """
    if padding_free:
        return packed_token_logprobs(model, input_ids, attention_mask, temperature, with_entropy, last)
    position_ids = left_padded_positions(attention_mask)
    kwargs = {"logits_to_keep": last + 1} if last else {}
    logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, **kwargs).logits
    logits = logits[:, :-1]
    if last:
        input_ids = input_ids[:, -(last + 1):]
    logprobs = logprobs_from_logits(logits, input_ids[:, 1:], temperature)
    entropy = None
    if with_entropy:
        entropy = entropy_from_logits(logits, temperature)
    return logprobs, entropy


def packed_token_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    temperature: float = 1.0,
    with_entropy: bool = False,
    last: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``causal_token_logprobs`` without padding: the rows' real tokens (``attention_mask`` 1) are concatenated
    into one row with position ids restarting at 0 for each, and no attention mask, from which transformers
    (``masking_utils.find_packed_sequence_indices``) builds the block-diagonal causal mask, so no token attends
    across sequences; the forward and backward do no work on padding, and the vocabulary projection runs only
    at the positions whose next token is scored (a real token among the last ``last`` columns). Outputs have
    the padded shape, 0 where the padded call would score a pad (the callers mask those positions out).
    The model runs without a KV cache (transformers detects packing only then)."""
    _check_packing_support(model)
    if input_ids.shape[1] < 2:
        raise ValueError(f"input_ids has {input_ids.shape[1]} column(s); scoring a next token needs at least 2")
    real = attention_mask.bool()
    if not real.any():
        raise ValueError("attention_mask has no real token to score")
    flat_index = real.flatten().long().cumsum(0).sub_(1).view_as(real)  # column of each real token in the packed row
    scored = real[:, 1:] & real[:, :-1]  # targets whose context token is real
    if last:
        scored[:, : scored.shape[1] - last] = False
    position_ids = left_padded_positions(attention_mask)[real].unsqueeze(0)
    hidden_positions = flat_index[:, :-1][scored]
    logits = model(input_ids=input_ids[real].unsqueeze(0), position_ids=position_ids, use_cache=False,
                   logits_to_keep=hidden_positions).logits[0]
    targets = input_ids[:, 1:][scored]
    logprobs = _scatter_rows(logprobs_from_logits(logits, targets, temperature), scored, last)
    entropy = _scatter_rows(entropy_from_logits(logits, temperature), scored, last) if with_entropy else None
    return logprobs, entropy


PACKING_ATTENTION = frozenset({"sdpa", "eager", "flash_attention_2", "flex_attention"})
"""transformers attention implementations whose mask comes from ``masking_utils`` (packed sequences detected)."""


def _check_packing_support(model: torch.nn.Module) -> None:
    """Refuse a model whose attention may not separate packed sequences: only transformers' own model classes
    (under a DeepSpeed or PEFT wrapper too) with a ``PACKING_ATTENTION`` implementation build the block-diagonal
    mask; any other would let sequences attend to each other silently."""
    base = getattr(model, "module", model)  # DeepSpeed engine
    base = base.get_base_model() if hasattr(base, "get_base_model") else base  # PEFT
    attention = getattr(getattr(base, "config", None), "_attn_implementation", None)
    if not type(base).__module__.startswith("transformers.models.") or attention not in PACKING_ATTENTION:
        raise ValueError(f"padding_free: {type(base).__name__} (attention {attention!r}) is not a transformers model "
                         f"with one of {sorted(PACKING_ATTENTION)}; it may not separate packed sequences, "
                         "so set padding_free false")


def _scatter_rows(values: torch.Tensor, where: torch.Tensor, last: int | None) -> torch.Tensor:
    """``values`` (one per True of ``where``, row-major) back in ``where``'s ``[B, T-1]`` shape (zeros elsewhere,
    differentiably), then its last ``last`` columns."""
    out = values.new_zeros(where.shape).masked_scatter(where, values)
    return out[:, -last:] if last else out
