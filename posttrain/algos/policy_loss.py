"""The one policy loss of every clipped policy-gradient algorithm (GRPO, RLOO, PPO, Text2Grad, Prefix-RL, DuPO and
ESPO): per token, ``surrogate x behaviour weight + beta x KL``, reduced by the chosen aggregation. Its variants are
typed values of ``PolicyLossOptions`` that a config selects, as verl's ``policy_loss.loss_mode`` / ``loss_agg_mode``
do; nothing depends on the order in which they are named.

Three policies meet in one token's loss, the decoupled objective of AReaL (Fu et al. 2025, arXiv 2505.24298,
``ppo_actor_loss_fn``) and of verl's rollout correction in decoupled mode (``docs/algo/rollout_corr.md``):

- pi_sampler (``sampling_logp``): what sampled the token: the rollout engine's kernels (vLLM), or weights some
  versions older than the trainer's (``--async_rollouts``, ``--sync_every N``, an ``hf`` engine between syncs);
- pi_prox (``proximal_logp``): the trainer's weights when the step's experience was made, recomputed by the
  trainer (at ``mu == 1`` they are the policy's own log-probs, detached: the weights have not moved yet);
- pi_theta (``logp``): the weights being trained.

The three factors:

- **surrogate**: -min(r A, clip(r, 1 - clip_low, 1 + clip_high) A) with r = pi_theta / pi_prox (PPO, Schulman et
  al. 2017; DAPO's decoupled range, Yu et al. 2025): the trust region is around pi_prox, whatever sampled the
  token. ``ratio_level="sequence"`` takes one ratio per sequence, exp of the mean token log-ratio (GSPO, Zheng et
  al. 2025, in its GSPO-token form: the value is the sequence's ratio, the gradient flows through each token).
  ``dual_clip`` c > 1 bounds the loss of a negative-advantage token at c |A| (dual-clip PPO, Ye et al. 2020,
  "Mastering Complex Control in MOBA Games"; verl's vanilla loss applies c = 3).
- **behaviour weight**: truncated importance sampling of the sampler's lag and mismatch, min(pi_prox /
  pi_sampler, C) (``tis_cap`` C; Yao et al. 2025's TIS, verl's token-level ``rollout_is``), per token, or per
  sequence (``is_level``: "sequence" truncates the product of the sequence's token ratios at C, TRL's
  ``sequence_truncate`` and verl's ``sequence`` level; "sequence-mask" drops a sequence whose product exceeds C,
  TRL's ``sequence_mask``). It multiplies the surrogate only, before the KL is added, as TRL and verl apply it.
  Deviation from AReaL, stated: AReaL drops a token whose pi_prox / pi_sampler exceeds its cap; the token level
  here truncates it at C.
- **KL**: beta KL(pi_theta || ref) per token from the sampled tokens (``core.kl_estimate``: k1, k2, k3), optionally
  clamped to [-kl_clamp, kl_clamp] (verl and OpenRLHF clamp to [-10, 10]; k3 = e^x - 1 - x overflows float32
  gradients once |log r| passes about 12).

``PolicyTokens.scale`` divides the log-likelihoods of the ratio and the KL: 1 for token log-probs; ESPO's fixed
generation length L for its sequence ELBO (ESPO eq. 8: rho = exp((E - E_old) / L), its KL sum / (N L)).

The loss also logs how far pi_sampler is from pi_prox (``rollout/logprob_abs_diff``, ``rollout/logprob_kl``)
whenever the batch carries the sampler's log-probs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from posttrain.algos.core import (
    AGGREGATIONS,
    KL_ESTIMATORS,
    aggregate_loss,
    kl_estimate,
    masked_mean,
    masked_sum,
    ratio_surrogate,
    sampler_mismatch,
)

RATIO_LEVELS: tuple[str, ...] = ("token", "sequence")
IS_LEVELS: tuple[str, ...] = ("token", "sequence", "sequence-mask")


@dataclass(frozen=True)
class PolicyTokens:
    """One micro-batch's log-likelihoods under the policies that meet in its loss (``[B, T]``: T completion tokens,
    or T = 1 for a whole-sequence quantity such as ESPO's ELBO)."""

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
    """The frozen reference's log-probs, for the KL; None without one."""
    scale: float = 1.0
    """What the log-likelihoods are divided by in the ratio and the KL (ESPO: the generation length L)."""


@dataclass(frozen=True)
class PolicyLossOptions:
    """The variants of the policy loss, each a typed value a config selects (validated here, naming the field)."""

    clip_low: float = 0.2
    """Ratios below 1 - clip_low are clipped."""
    clip_high: float = 0.2
    """Ratios above 1 + clip_high are clipped (DAPO's clip-higher: e.g. 0.28)."""
    dual_clip: float = 0.0
    """c of dual-clip PPO: a negative-advantage token's loss is at most c |A|; 0 = off, else > 1."""
    ratio_level: str = "token"
    """"token": a ratio per token; "sequence": GSPO's per-sequence ratio exp(mean_t log r_t)."""
    tis_cap: float = 0.0
    """C of the behaviour weight min(pi_prox / pi_sampler, C); 0 = no behaviour weight."""
    is_level: str = "token"
    """Where the behaviour weight is taken: "token", "sequence" (truncated) or "sequence-mask" (dropped above C)."""
    aggregation: str = "token-mean"
    """How the per-token loss is reduced (``core.AGGREGATIONS``)."""
    aggregation_constant: float | None = None
    """The denominator's length for aggregation "constant" (the completion budget)."""
    kl_coef: float = 0.0
    """beta; 0 = no KL term (the reference's log-probs are then not read)."""
    kl_estimator: str = "k3"
    """k1, k2 or k3 (``core.kl_estimate``)."""
    kl_clamp: float = 0.0
    """Clamp the KL estimate to [-kl_clamp, kl_clamp]; 0 = no clamp."""
    k1_gradient_correction: bool = False
    """ESPO's stop-gradient term for k1, (lp - sg(lp)) (sg(lp) - ref): the gradient becomes (1 + lp - ref) d lp, the
    score-function gradient of the KL, where plain k1's is d lp (zero in expectation)."""
    skip_ratio: float = 0.0
    """Skip the micro-batch when its mean ratio exceeds this (TRL PPO's ``ratio_threshold``); 0 = never."""

    def __post_init__(self) -> None:
        checks = [
            ("clip_low", 0 <= self.clip_low < 1, "must be in [0, 1)"),
            ("clip_high", self.clip_high >= 0, "must be >= 0"),
            ("dual_clip", self.dual_clip == 0 or self.dual_clip > 1, "must be 0 (off) or > 1"),
            ("ratio_level", self.ratio_level in RATIO_LEVELS, f"must be one of {list(RATIO_LEVELS)}"),
            ("tis_cap", self.tis_cap >= 0, "must be 0 (off) or > 0"),
            ("is_level", self.is_level in IS_LEVELS, f"must be one of {list(IS_LEVELS)}"),
            ("aggregation", self.aggregation in AGGREGATIONS, f"must be one of {list(AGGREGATIONS)}"),
            ("kl_coef", self.kl_coef >= 0, "must be >= 0"),
            ("kl_estimator", self.kl_coef == 0 or self.kl_estimator in KL_ESTIMATORS,
             f"must be one of {list(KL_ESTIMATORS)} (it is read only with a KL term, kl_coef > 0)"),
            ("kl_clamp", self.kl_clamp >= 0, "must be 0 (off) or > 0"),
            ("skip_ratio", self.skip_ratio >= 0, "must be 0 (never) or > 0"),
        ]
        for name, ok, allowed in checks:
            if not ok:
                raise ValueError(f"policy loss option {name} = {getattr(self, name)!r} {allowed}")


@dataclass(frozen=True)
class PolicyLoss:
    """What ``policy_loss`` returns for one micro-batch."""

    loss: torch.Tensor
    """The aggregated scalar loss."""
    per_token: torch.Tensor
    """``[B, T]`` before aggregation."""
    metrics: dict[str, float]
    skip: bool
    """Drop this micro-batch (its mean ratio exceeded ``skip_ratio``)."""


def _per_token_advantages(advantages: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    if advantages.shape == like.shape[:1]:
        return advantages.unsqueeze(-1).expand_as(like)
    if advantages.shape != like.shape:
        raise ValueError(f"advantages {tuple(advantages.shape)} must be [B] or match logp {tuple(like.shape)}")
    return advantages


def log_ratio(tokens: PolicyTokens, level: str) -> torch.Tensor:
    """log(pi_theta / pi_prox) per token (``[B, T]``): the token's own, or (``level`` "sequence") its sequence's
    mean over the masked tokens, with the gradient of each token's own term (GSPO-token)."""
    if tokens.logp.shape != tokens.proximal_logp.shape:
        raise ValueError(f"logp {tuple(tokens.logp.shape)} and proximal_logp {tuple(tokens.proximal_logp.shape)} "
                         "differ in shape")
    scaled = tokens.logp / tokens.scale
    per_token = scaled - tokens.proximal_logp.detach() / tokens.scale
    if level == "token":
        return per_token
    sequence = masked_mean(per_token.detach(), tokens.mask, dim=-1).unsqueeze(-1)
    return sequence + scaled - scaled.detach()


def clipped_surrogate_loss(ratio: torch.Tensor, advantages: torch.Tensor, options: PolicyLossOptions
                           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The clipped surrogate per token with dual-clip when ``options.dual_clip`` is set: ``(loss, clipped,
    dual_clipped)``, the two masks saying where the clip branch and the dual-clip bound are strictly active."""
    loss, clipped = ratio_surrogate(ratio, advantages, options.clip_low, options.clip_high)
    dual_clipped = torch.zeros_like(loss, dtype=torch.bool)
    if options.dual_clip:
        bound = -options.dual_clip * advantages
        dual_clipped = (advantages < 0) & (loss > bound)
        loss = torch.where(dual_clipped, bound, loss)
    return loss, clipped, dual_clipped


def behaviour_weights(tokens: PolicyTokens, options: PolicyLossOptions) -> tuple[torch.Tensor, torch.Tensor]:
    """``(weight, truncated)`` per token: min(pi_prox / pi_sampler, C) at ``options.is_level``, without gradient,
    and where the raw ratio exceeded C (truncated, or dropped for "sequence-mask")."""
    if tokens.sampling_logp is None:
        raise ValueError("a behaviour weight (tis_cap > 0) needs the sampler's log-probs (PolicyTokens.sampling_logp)")
    if tokens.sampling_logp.shape != tokens.proximal_logp.shape:
        raise ValueError(f"sampling_logp {tuple(tokens.sampling_logp.shape)} and proximal_logp "
                         f"{tuple(tokens.proximal_logp.shape)} differ in shape")
    # A non-finite sampler log-prob (an engine's NaN or -inf) would make the weight NaN or inf: such a token gets
    # weight 1 (no correction) and is counted, as TRL and AReaL clean the sampler's log-probs before weighting.
    sampling = torch.where(torch.isfinite(tokens.sampling_logp), tokens.sampling_logp, tokens.proximal_logp)
    log_weight = (tokens.proximal_logp - sampling).detach()
    cap = options.tis_cap
    if options.is_level != "token":
        log_weight = masked_sum(log_weight, tokens.mask, dim=-1).unsqueeze(-1).expand_as(log_weight)
    raw = log_weight.exp()
    truncated = raw > cap
    if options.is_level == "sequence-mask":
        return torch.where(truncated, torch.zeros_like(raw), raw), truncated
    return raw.clamp(max=cap), truncated


def kl_penalty(tokens: PolicyTokens, options: PolicyLossOptions) -> torch.Tensor:
    """KL(pi_theta || ref) per token by ``options.kl_estimator`` on the scaled log-likelihoods, with ESPO's k1
    correction and the clamp when the options ask for them."""
    if tokens.ref_logp is None:
        raise ValueError("a KL term (kl_coef > 0) needs the reference's log-probs (PolicyTokens.ref_logp)")
    logp, ref = tokens.logp, tokens.ref_logp.detach()
    kl = kl_estimate(logp, ref, options.kl_estimator)
    if options.k1_gradient_correction and options.kl_estimator == "k1":
        kl = kl + (logp - logp.detach()) * (logp.detach() - ref)
    kl = kl / tokens.scale
    return kl.clamp(-options.kl_clamp, options.kl_clamp) if options.kl_clamp else kl


def policy_loss(tokens: PolicyTokens, options: PolicyLossOptions) -> PolicyLoss:
    """``surrogate x behaviour weight + beta x KL`` per token, aggregated by ``options.aggregation``, with its
    metrics and the skip decision (module docstring)."""
    mask = tokens.mask.bool()
    ratio = log_ratio(tokens, options.ratio_level).exp()
    advantages = _per_token_advantages(tokens.advantages, tokens.logp)
    per_token, clipped, dual_clipped = clipped_surrogate_loss(ratio, advantages, options)
    ratio_mean = float(masked_mean(ratio.detach(), mask))
    metrics = {"clip_fraction": float(masked_mean(clipped.float(), mask)), "ratio_mean": ratio_mean}
    if options.dual_clip:
        metrics["dual_clip_fraction"] = float(masked_mean(dual_clipped.float(), mask))
    if tokens.sampling_logp is not None:
        abs_diff, mismatch_kl = sampler_mismatch(tokens.proximal_logp, tokens.sampling_logp, mask)
        metrics.update({"rollout/logprob_abs_diff": float(abs_diff), "rollout/logprob_kl": float(mismatch_kl),
                        "rollout/nonfinite_sampler_logprobs": float((~torch.isfinite(tokens.sampling_logp) & mask).sum())})
    if options.tis_cap:
        weights, truncated = behaviour_weights(tokens, options)
        per_token = per_token * weights
        metrics.update({"rollout/tis_weight_mean": float(masked_mean(weights, mask)),
                        "rollout/tis_truncated_fraction": float(masked_mean(truncated.float(), mask))})
    if options.kl_coef:
        kl = kl_penalty(tokens, options)
        per_token = per_token + options.kl_coef * kl
        metrics["kl"] = float(masked_mean(kl.detach(), mask))
    skip = options.skip_ratio > 0 and ratio_mean > options.skip_ratio
    if options.skip_ratio > 0:
        metrics["skipped_batch"] = float(skip)
    loss = aggregate_loss(per_token, mask, options.aggregation, constant=options.aggregation_constant)
    return PolicyLoss(loss, per_token, metrics, skip)
