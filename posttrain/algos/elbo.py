"""Likelihood estimators for masked-diffusion LMs: the sequence ELBO (ESPO) and the mean-field one-step
estimate (d1 / diffu-GRPO). Pure functions of a ``logits_fn`` and explicit mask tensors.

Layout. ``input_ids`` is [B, T] = left-padded prompt followed by a **fixed-length completion** of L
tokens (the last L positions; post-EOS tail filled with EOS, as in LLaDA SFT and ESPO's padded
generation). ``attention_mask`` [B, T] marks real tokens (None = all real).

Common random numbers. All randomness is drawn *before* any forward, into tensors
(``draw_elbo_masks`` / ``draw_prompt_masks``) from an explicit ``torch.Generator``. The same tensors are
then passed to the current, old and reference models, so the three estimates share their mask counts
and positions (ESPO's "antithetic" shared seeds). Store them in the Experience next to the samples so
micro-batching splits them consistently.

Sequence ELBO (ESPO, arXiv 2512.03759; its code's ``_get_elbo`` / ``_get_elbo_mc``):

1. Stratified mask counts: per Monte Carlo sample m, k ~ U{0..L}; row j of the batch gets
   l_j = (k + floor(j (L+1)/B)) mod (L+1) (``stratify="batch"``, ESPO). Alternatives: ``"mc"`` spreads
   the counts over the M samples of the same row (LLaDA's ``get_log_likelihood`` style), ``"none"``
   draws l ~ U{0..L} independently. Exactly l_j completion positions, a uniform random subset, are masked.
2. Pass 1: each masked token contributes log p(y_i | y_masked) * (L+1)/l.
3. Coupled complementary pass (``coupled=True``): the complement positions are masked; each contributes
   log p * (L+1)/(L-l). The two passes are averaged, so every completion token gets exactly one term.
4. M samples are averaged. ``elbo_terms`` returns per-token terms [B, L] (the token-level ELBO terms
   L^k used by the token-elbo baseline); the sequence ELBO is their sum.

Deviations from the papers' code (deliberate): ESPO's code computes l_j = round(k + j (L+1)/B), and
``torch.round`` rounds halves to even, so when j (L+1)/B is a half (even B, even L) the offset of row j
depends on the parity of k: with B = 2, L = 4 row 1 takes the counts {2, 4, 4, 1, 1} instead of
{0, ..., 4}, never 0 and 4 twice, and its ELBO estimate is biased (a context-free model: E = (L+1)/L times
the exact ELBO without coupling). Here the offset is the integer floor(j (L+1)/B), the same for every k,
so each row's count is exactly uniform on {0..L} and the rows stay evenly spread (offsets differ by
floor or ceil of (L+1)/B). Masks come from a local generator instead of
``accelerate.set_seed`` (which reseeds global RNGs); padded prompt positions get attention mask 0 (ESPO
passes no attention mask, so pads are visible); the M samples and both coupled passes go through the
model through one code path that can batch several passes per forward (``max_batch``); a pass row with
no masked token (l = 0, or l = L in the coupled pass) takes no forward, and the vocabulary softmax is
taken only at masked positions. None of these change the estimate.

Mean-field (d1 ``_get_per_token_logps``): every completion token masked, each real prompt token masked
independently with probability p (d1 train.yaml: 0.15); log p(y_k | masked canvas) per token, one
forward. d1 draws the prompt mask over pad positions too (it passes no attention mask); we mask only
real prompt tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch
import torch.nn.functional as F

from posttrain.models.diffusion import diffusion_logits

LogitsFn = Callable[[torch.Tensor, "torch.Tensor | None", "torch.Tensor | None"], torch.Tensor]
"""``logits_fn(input_ids [N, T], attention_mask [N, T] | None, keep [K] | None) -> logits [N, K or T, V]``,
aligned one-to-one with positions (see ``posttrain.models.diffusion.diffusion_logits``)."""

Stratify = Literal["batch", "mc", "none"]


def model_logits_fn(model: torch.nn.Module) -> LogitsFn:
    """The ``LogitsFn`` of a diffusion model: ``diffusion_logits`` with its alignment and Dream shift."""
    def fn(input_ids: torch.Tensor, attention_mask: torch.Tensor | None, keep: torch.Tensor | None) -> torch.Tensor:
        return diffusion_logits(model, input_ids, attention_mask, keep=keep)

    return fn


# ---------------------------------------------------------------------------------------------------
# Randomness, drawn up front
# ---------------------------------------------------------------------------------------------------

def stratified_mask_counts(
    batch_size: int, length: int, num_mc: int, generator: torch.Generator, stratify: Stratify = "batch"
) -> torch.Tensor:
    """Mask counts l in {0..L}, LongTensor [B, M], each exactly uniform on {0..L}.

    Stratified counts are one uniform draw k plus a fixed integer offset per row (``"batch"``) or per
    sample (``"mc"``), taken mod L+1: a shift of a uniform variable is uniform, whatever the offsets.
    """
    if length < 1 or batch_size < 1 or num_mc < 1:
        raise ValueError(f"need length, batch_size and num_mc >= 1; got {length}, {batch_size}, {num_mc}")
    span = length + 1
    if stratify == "none":
        return torch.randint(0, span, (batch_size, num_mc), generator=generator)
    if stratify == "batch":  # ESPO forward_process: one k per MC sample, spread over the batch rows
        k = torch.randint(0, span, (num_mc,), generator=generator)
        offsets = torch.arange(batch_size) * span // batch_size
        return (k[None, :] + offsets[:, None]) % span
    if stratify == "mc":  # spread over the M samples of each row
        k = torch.randint(0, span, (batch_size,), generator=generator)
        offsets = torch.arange(num_mc) * span // num_mc
        return (k[:, None] + offsets[None, :]) % span
    raise ValueError(f"stratify must be 'batch', 'mc' or 'none', got {stratify!r}")


def draw_elbo_masks(
    batch_size: int, length: int, num_mc: int, generator: torch.Generator, stratify: Stratify = "batch"
) -> torch.Tensor:
    """Pass-1 masks for the sequence ELBO: BoolTensor [B, M, L], row (b, m) masking exactly l_{b,m}
    uniformly chosen completion positions (counts from ``stratified_mask_counts``)."""
    counts = stratified_mask_counts(batch_size, length, num_mc, generator, stratify)
    scores = torch.rand((batch_size, num_mc, length), generator=generator)
    ranks = scores.argsort(-1).argsort(-1)  # a uniform random permutation per row
    return ranks < counts.unsqueeze(-1)


def draw_prompt_masks(
    prompt_valid: torch.Tensor, prob: float, generator: torch.Generator, num_draws: int = 1
) -> torch.Tensor:
    """d1's prompt masking: BoolTensor [B, num_draws, P]; each real prompt token (``prompt_valid`` [B, P])
    masked independently with probability ``prob``."""
    if not 0.0 <= prob < 1.0:
        raise ValueError(f"prompt mask probability must be in [0, 1), got {prob}")
    draws = torch.rand((prompt_valid.shape[0], num_draws, prompt_valid.shape[1]), generator=generator)
    return (draws < prob) & prompt_valid.bool().cpu().unsqueeze(1)


# ---------------------------------------------------------------------------------------------------
# Estimators
# ---------------------------------------------------------------------------------------------------

def _token_logprobs(
    logits_fn: LogitsFn,
    noisy: torch.Tensor,
    attention_mask: torch.Tensor | None,
    targets: torch.Tensor,
    length: int,
    max_batch: int | None,
    select: torch.Tensor | None = None,
) -> torch.Tensor:
    """log p(targets) at the last ``length`` positions of each noisy row: float32 [N, L].

    Only positions in ``select`` [N, L] (default: all) are scored (others are 0): rows with nothing
    selected take no forward at all, and the softmax runs only over the selected positions' logits.
    """
    total = noisy.shape[0]
    keep = torch.arange(noisy.shape[1] - length, noisy.shape[1], device=noisy.device)
    if select is None:
        select = torch.ones((total, length), dtype=torch.bool, device=noisy.device)
    rows = select.any(-1).nonzero(as_tuple=True)[0]
    chunk = max(1, rows.numel()) if not max_batch else max_batch
    pieces, values = [], []
    for start in range(0, rows.numel(), chunk):
        idx = rows[start : start + chunk]
        logits = logits_fn(noisy[idx], None if attention_mask is None else attention_mask[idx], keep)
        sel = select[idx]
        picked = logits[sel].float()  # [n_selected, V]
        logp = F.log_softmax(picked, dim=-1).gather(-1, targets[idx][sel].unsqueeze(-1)).squeeze(-1)
        pieces.append((idx, sel))
        values.append(logp)
    out = torch.zeros((total, length), dtype=torch.float32, device=noisy.device)
    if not values:
        return out
    # one differentiable scatter of every selected value into its (row, position)
    flat_index = torch.cat([(idx.unsqueeze(1) * length + torch.arange(length, device=noisy.device))[sel]
                            for idx, sel in pieces])
    return out.view(-1).index_put((flat_index,), torch.cat(values)).view(total, length)


def elbo_terms(
    logits_fn: LogitsFn,
    input_ids: torch.Tensor,
    masks: torch.Tensor,
    mask_token_id: int,
    attention_mask: torch.Tensor | None = None,
    coupled: bool = True,
    max_batch: int | None = None,
) -> torch.Tensor:
    """Per-token ELBO terms, float32 [B, L], averaged over the M samples in ``masks`` [B, M, L].

    Row sums are the sequence ELBO ``L_theta(y|x)`` (ESPO). Token k's term is its weighted
    log-likelihood when it is masked (pass 1 weight (L+1)/l, coupled pass (L+1)/(L-l), averaged), zero
    when it is visible in an uncoupled pass. Differentiable through ``logits_fn``.

    ``max_batch``: rows per forward. Default (None) = B, i.e. one pass of one MC sample per forward as
    in the papers; a larger value puts several passes into one forward (fewer, bigger calls: useful on
    GPUs; on CPU it was slower and doubled peak memory, see benchmarks/results/diffusion_throughput*.json).
    """
    batch, num_mc, length = masks.shape
    if input_ids.shape[0] != batch or input_ids.shape[1] < length:
        raise ValueError(f"input_ids {tuple(input_ids.shape)} does not match masks {tuple(masks.shape)}")
    device = input_ids.device
    masks = masks.to(device)
    counts = masks.sum(-1).to(torch.float32)  # [B, M]
    span = float(length + 1)
    targets = input_ids[:, -length:]

    passes = [masks]
    if coupled:
        passes.append(~masks)
    stacked = torch.stack(passes, dim=0)  # [S, B, M, L], S = 1 or 2
    num_passes = stacked.shape[0]
    expanded = input_ids.unsqueeze(0).unsqueeze(2).expand(num_passes, batch, num_mc, -1)
    completion = torch.where(stacked, torch.full_like(targets, mask_token_id).view(1, batch, 1, length)
                             .expand_as(stacked), targets.view(1, batch, 1, length).expand_as(stacked))
    noisy = torch.cat([expanded[..., :-length], completion], dim=-1).reshape(-1, input_ids.shape[1])
    am = None
    if attention_mask is not None:
        am = attention_mask.unsqueeze(0).unsqueeze(2).expand(num_passes, batch, num_mc, -1)
        am = am.reshape(-1, attention_mask.shape[1])
    flat_targets = targets.view(1, batch, 1, length).expand(num_passes, batch, num_mc, length).reshape(-1, length)
    logp = _token_logprobs(logits_fn, noisy, am, flat_targets, length, max_batch or batch,
                           select=stacked.reshape(-1, length))
    logp = logp.view(num_passes, batch, num_mc, length)

    weight1 = torch.where(counts > 0, span / counts.clamp(min=1), torch.zeros_like(counts))  # [B, M]
    terms = torch.where(stacked[0], logp[0] * weight1.unsqueeze(-1), torch.zeros_like(logp[0]))
    if coupled:
        rest = length - counts
        weight2 = torch.where(rest > 0, span / rest.clamp(min=1), torch.zeros_like(rest))
        terms = terms + torch.where(stacked[1], logp[1] * weight2.unsqueeze(-1), torch.zeros_like(logp[1]))
        terms = terms / 2
    return terms.mean(dim=1)


def sequence_elbo(
    logits_fn: LogitsFn,
    input_ids: torch.Tensor,
    masks: torch.Tensor,
    mask_token_id: int,
    attention_mask: torch.Tensor | None = None,
    coupled: bool = True,
    max_batch: int | None = None,
) -> torch.Tensor:
    """The sequence ELBO estimate, float32 [B]: ``elbo_terms(...).sum(-1)``."""
    return elbo_terms(logits_fn, input_ids, masks, mask_token_id, attention_mask, coupled, max_batch).sum(-1)


def mean_field_logprobs(
    logits_fn: LogitsFn,
    input_ids: torch.Tensor,
    completion_length: int,
    mask_token_id: int,
    prompt_masks: torch.Tensor | None = None,
    attention_mask: torch.Tensor | None = None,
    max_batch: int | None = None,
) -> torch.Tensor:
    """d1's one-step mean-field estimate: log p(y_k | prompt (partly masked), all completion masked),
    float32 [B, L]. ``prompt_masks`` [B, P] (or [B, 1, P]) marks prompt positions to mask (from
    ``draw_prompt_masks``; None = no prompt masking). One forward per row."""
    length = completion_length
    prompt_len = input_ids.shape[1] - length
    noisy = input_ids.clone()
    noisy[:, prompt_len:] = mask_token_id
    if prompt_masks is not None:
        pm = prompt_masks.reshape(input_ids.shape[0], -1).to(input_ids.device)
        if pm.shape[1] != prompt_len:
            raise ValueError(f"prompt_masks has {pm.shape[1]} columns, the prompt has {prompt_len}")
        noisy[:, :prompt_len] = torch.where(pm, torch.full_like(pm, mask_token_id, dtype=input_ids.dtype),
                                            input_ids[:, :prompt_len])
    return _token_logprobs(logits_fn, noisy, attention_mask, input_ids[:, -length:], length, max_batch)


def exact_elbo(
    logits_fn: LogitsFn, input_ids: torch.Tensor, length: int, mask_token_id: int,
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """The exact discrete ELBO by enumeration (tiny L only, 2^L forwards per row), float64 [B]:
    sum over l = 1..L of (1/l) * mean over |S| = l of sum_{i in S} log p(y_i | y with S masked),
    i.e. the any-order-autoregressive log-likelihood averaged over orders. Used by tests and as ground
    truth for the estimators, which are unbiased for it."""
    import itertools

    if length > 12:
        raise ValueError(f"exact_elbo enumerates 2^L masks; L={length} is too large")
    batch = input_ids.shape[0]
    total = torch.zeros(batch, dtype=torch.float64)
    for l in range(1, length + 1):
        subsets = list(itertools.combinations(range(length), l))
        masks = torch.zeros((batch, len(subsets), length), dtype=torch.bool)
        for s, subset in enumerate(subsets):
            masks[:, s, list(subset)] = True
        noisy_terms = elbo_terms(logits_fn, input_ids, masks, mask_token_id, attention_mask, coupled=False)
        # elbo_terms weights by (L+1)/l and averages over subsets; undo the weight, apply 1/l
        per_subset_sum = noisy_terms.double().sum(-1) * (l / (length + 1))
        total += per_subset_sum.cpu() / l
    return total
