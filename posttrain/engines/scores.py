"""Token scores: what an engine's ``score`` returns for a sequence, and the pure functions that compute
them (per-token log-probs, entropies, and DMAP's "mass above" and "tied mass" of the observed token).

DMAP (Kempton et al., ICLR 2026) maps token w_i to the interval [a_i, a_i + p_i(w_i)] with
a_i = sum_{v: p_i(v) > p_i(w_i)} p_i(v). Deviation from the paper: tokens whose probabilities are *equal*
(common with bf16 logits, whose 8-bit mantissa makes neighbouring logits collide) would all get that same
interval, so under pure sampling the map piles up at its left end and is not uniform. We give the tied
tokens one shared interval of width ``tied_mass`` = sum_{v: p_i(v) = p_i(w_i)} p_i(v) instead (the
observed token included): [a_i, a_i + tied_mass_i]. Without ties this is the paper's interval; with ties,
drawing x_i uniformly in it is the same as placing w_i uniformly at random among its tied tokens, and
Proposition 3.1 (x_i ~ Uniform(0, 1) under pure sampling) holds again.

Top-k approximation (engines that return only the top-k log-probs: vLLM, OpenAI-compatible HTTP), with
``p_1..p_k`` the returned probabilities and ``r = 1 - sum p_j``: ``H ~= -sum_j p_j log p_j - r log r``
(the tail treated as one atom, a lower bound of the true tail term), and
``mass_above ~= sum_{j: p_j > p_obs} p_j``, exact iff the observed token is in the top-k or is the
k+1-th; otherwise a lower bound. ``tied_mass ~= sum_{j: p_j = p_obs} p_j`` (the observed token alone
when it is not in the top-k: the ties in the unseen tail are unknown). ``TokenScores.exact`` says which
you got.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass
class TokenScores:
    """Scores of positions 1..T-1 of one sequence (``token_ids`` are those scored tokens)."""

    token_ids: list[int] | None
    logprobs: list[float]
    entropies: list[float] | None = None
    mass_above: list[float] | None = None  # DMAP a_i: sum of p(v) over v with p(v) > p(observed)
    distributions: torch.Tensor | None = None  # [T-1, V] log-probs, HF only (``full=True``)
    exact: bool = True  # False when entropies / mass_above come from top-k log-probs
    tied_mass: list[float] | None = None  # DMAP interval width: sum of p(v) over v with p(v) == p(observed)


def mass_above_from_logits(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``sum_v p(v) * [p(v) > p(target)]`` per position (float32), the DMAP left endpoint a_i."""
    probs = torch.softmax(logits.float(), dim=-1)
    p_obs = probs.gather(-1, targets.unsqueeze(-1))
    return (probs * (probs > p_obs)).sum(-1)


def tied_mass_from_logits(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``sum_v p(v) * [p(v) == p(target)]`` per position (float32, the target included): the width of the
    DMAP interval that the target shares with the tokens tied with it (the module docstring)."""
    probs = torch.softmax(logits.float(), dim=-1)
    p_obs = probs.gather(-1, targets.unsqueeze(-1))
    return (probs * (probs == p_obs)).sum(-1)


def topk_entropy(top_logprobs: Sequence[float]) -> float:
    """Entropy approximated from top-k log-probs, the remaining mass counted as one atom."""
    probs = [math.exp(lp) for lp in top_logprobs if lp is not None and lp > -math.inf]
    h = -sum(p * math.log(p) for p in probs if p > 0)
    rest = max(0.0, 1.0 - sum(probs))
    if rest > 1e-12:
        h -= rest * math.log(rest)
    return h


def topk_mass_above(top_logprobs: Sequence[float], observed_logprob: float) -> tuple[float, bool]:
    """(mass above the observed token from top-k, exact?) - exact iff the observed token is in the top-k
    or the top-k are all above it and nothing else can be (k+1-th)."""
    p_obs = math.exp(observed_logprob)
    above = [math.exp(lp) for lp in top_logprobs if lp > observed_logprob]
    in_topk = any(abs(lp - observed_logprob) < 1e-6 for lp in top_logprobs)
    rest = max(0.0, 1.0 - sum(math.exp(lp) for lp in top_logprobs) - (0.0 if in_topk else p_obs))
    exact = in_topk or rest <= 1e-9 or (top_logprobs and min(top_logprobs) <= observed_logprob)
    return sum(above), bool(exact)


def topk_tied_mass(top_logprobs: Sequence[float], observed_logprob: float) -> tuple[float, bool]:
    """(tied mass of the observed token from top-k, exact?): the sum of the top-k probabilities equal to
    the observed one, exact when the observed token is in the top-k and ranks above its last entry (so
    no tied token can hide in the tail); otherwise the observed probability alone, a lower bound."""
    tied = [math.exp(lp) for lp in top_logprobs if lp == observed_logprob]
    if not tied:
        return math.exp(observed_logprob), False
    return sum(tied), observed_logprob > min(top_logprobs)
