"""The token-level policy-gradient loss of the clipped-surrogate algorithms (GRPO, RLOO, PPO, Text2Grad, Prefix-RL,
DuPO) as registered pure terms that an algorithm composes by name, as ``core.ADVANTAGES`` does for advantages.

Three policies meet in one token's loss, the decoupled objective of AReaL (Fu et al. 2025, arXiv 2505.24298,
``ppo_actor_loss_fn``) and of verl's rollout correction in decoupled mode (``docs/algo/rollout_corr.md``, which
its one-step-off-policy recipe runs):

- pi_sampler (``sampling_logp``): what sampled the token: the rollout engine's kernels (vLLM), or weights some
  versions older than the trainer's (``--async_rollouts``, ``--sync_every N``, an ``hf`` engine between syncs);
- pi_prox (``proximal_logp``): the trainer's weights when the step's experience was made, recomputed by the
  trainer (at ``mu == 1`` they are the policy's own log-probs, detached: the weights have not moved yet);
- pi_theta (``logp``): the weights being trained.

The terms, applied in the order an algorithm lists them to a per-token loss that starts at 0:

- ``clipped_surrogate``: + -min(r A, clip(r, 1 - clip_low, 1 + clip_high) A) with r = pi_theta / pi_prox: the
  trust region is around pi_prox, whatever sampled the token;
- ``tis``: x min(pi_prox / pi_sampler, C), truncated importance sampling of the sampler's lag and mismatch
  (``core.truncated_importance_weights``; before any KL term, as TRL and verl apply it);
- ``kl_penalty``: + beta KL(pi_theta || ref) (``core.kl_estimate``).

``policy_loss`` also logs how far pi_sampler is from pi_prox (``rollout/logprob_abs_diff``, ``rollout/logprob_kl``)
whenever the batch carries the sampler's log-probs. Deviation from AReaL, stated: AReaL drops a token whose
pi_prox / pi_sampler exceeds its cap (``behav_imp_weight_cap``); we truncate the weight at C (verl's token-level
``rollout_is``, Yao et al. 2025's TIS).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from posttrain.algos.core import (
    clipped_surrogate,
    kl_estimate,
    masked_mean,
    sampler_mismatch,
    truncated_importance_weights,
)
from posttrain.common.registry import Registry


@dataclass(frozen=True)
class PolicyTokens:
    """One micro-batch's token log-probs under the three policies (``[B, T]`` over completion tokens)."""

    logp: torch.Tensor
    """pi_theta: the trained policy's log-probs, with gradient."""
    proximal_logp: torch.Tensor
    """pi_prox: the trainer's log-probs when the experience was made (no gradient)."""
    advantages: torch.Tensor
    """``[B]`` (one per sequence) or ``[B, T]``."""
    mask: torch.Tensor
    """The tokens that carry the loss."""
    sampling_logp: torch.Tensor | None = None
    """pi_sampler: the rollout engine's log-probs of the sampled tokens; None where the trainer sampled them."""
    ref_logp: torch.Tensor | None = None
    """The frozen reference's log-probs, for the KL penalty."""


@dataclass(frozen=True)
class PolicyLossSettings:
    """The numbers the terms read: clip range, TIS cap C (0 = off) and the KL penalty's beta and estimator; and
    ``skip_ratio``, the mean ratio above which a micro-batch is skipped (``skips_batch``; 0 = never)."""

    clip_low: float
    clip_high: float
    tis_cap: float = 0.0
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    skip_ratio: float = 0.0


PolicyLossTerm = Callable[[torch.Tensor, PolicyTokens, PolicyLossSettings], tuple[torch.Tensor, dict[str, float]]]
"""``term(per_token_loss, tokens, settings) -> (per_token_loss, metrics)``."""

POLICY_LOSS_TERMS: Registry[PolicyLossTerm] = Registry("policy loss term")


@POLICY_LOSS_TERMS.register("clipped_surrogate")
def surrogate_term(per_token: torch.Tensor, tokens: PolicyTokens,
                   settings: PolicyLossSettings) -> tuple[torch.Tensor, dict[str, float]]:
    """Adds the PPO clipped surrogate of pi_theta / pi_prox; logs the clip fraction and the mean ratio."""
    surrogate, clipped, ratio = clipped_surrogate(tokens.logp, tokens.proximal_logp, tokens.advantages,
                                                  settings.clip_low, settings.clip_high)
    return per_token + surrogate, {"clip_fraction": float(masked_mean(clipped.float(), tokens.mask)),
                                   "ratio_mean": float(masked_mean(ratio.detach(), tokens.mask))}


@POLICY_LOSS_TERMS.register("tis")
def tis_term(per_token: torch.Tensor, tokens: PolicyTokens,
             settings: PolicyLossSettings) -> tuple[torch.Tensor, dict[str, float]]:
    """Multiplies by min(pi_prox / pi_sampler, C); logs the mean weight and the fraction truncated at C."""
    if tokens.sampling_logp is None:
        raise ValueError("the tis term needs the sampler's log-probs (PolicyTokens.sampling_logp)")
    weights = truncated_importance_weights(tokens.proximal_logp, tokens.sampling_logp, settings.tis_cap)
    truncated = (tokens.proximal_logp - tokens.sampling_logp).exp() > settings.tis_cap
    return per_token * weights, {"rollout/tis_weight_mean": float(masked_mean(weights, tokens.mask)),
                                 "rollout/tis_truncated_fraction": float(masked_mean(truncated.float(), tokens.mask))}


@POLICY_LOSS_TERMS.register("kl_penalty")
def kl_term(per_token: torch.Tensor, tokens: PolicyTokens,
            settings: PolicyLossSettings) -> tuple[torch.Tensor, dict[str, float]]:
    """Adds beta KL(pi_theta || ref) per token (``settings.kl_estimator``); logs the mean KL."""
    if tokens.ref_logp is None:
        raise ValueError("the kl_penalty term needs the reference's log-probs (PolicyTokens.ref_logp)")
    kl = kl_estimate(tokens.logp, tokens.ref_logp, settings.kl_estimator)
    return per_token + settings.kl_coef * kl, {"kl": float(masked_mean(kl.detach(), tokens.mask))}


def policy_loss(terms: Sequence[str], tokens: PolicyTokens,
                settings: PolicyLossSettings) -> tuple[torch.Tensor, dict[str, float]]:
    """The per-token loss ``[B, T]`` of ``terms`` (names in ``POLICY_LOSS_TERMS``, applied in order) and their
    metrics, plus the sampler-vs-pi_prox mismatch when ``tokens.sampling_logp`` is given."""
    per_token = torch.zeros_like(tokens.logp)
    metrics: dict[str, float] = {}
    if tokens.sampling_logp is not None:
        abs_diff, mismatch_kl = sampler_mismatch(tokens.proximal_logp, tokens.sampling_logp, tokens.mask)
        metrics.update({"rollout/logprob_abs_diff": float(abs_diff), "rollout/logprob_kl": float(mismatch_kl)})
    for name in terms:
        per_token, term_metrics = POLICY_LOSS_TERMS.get(name)(per_token, tokens, settings)
        metrics.update(term_metrics)
    return per_token, metrics


def skips_batch(metrics: dict[str, float], settings: PolicyLossSettings) -> bool:
    """Whether a micro-batch is dropped: its mean ratio pi_theta / pi_prox (``ratio_mean``, from the
    ``clipped_surrogate`` term) exceeds ``settings.skip_ratio`` (TRL PPO's ``ratio_threshold``; 0 = never)."""
    return settings.skip_ratio > 0 and metrics["ratio_mean"] > settings.skip_ratio
