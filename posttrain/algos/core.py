"""Pure math shared by the RL algorithms: group advantages, the clipped surrogate, loss aggregation,
KL estimators, masked reductions, the SFT loss and pass@k. No model code lives here.

Conventions: masks are boolean (any non-zero entry counts as kept); masked-out entries never reach a
result, not even as NaN, because reductions select with ``torch.where`` instead of multiplying.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from posttrain.common.registry import Registry

ADVANTAGES: Registry[Callable[..., torch.Tensor]] = Registry("advantage estimator")
"""Group advantage estimators: ``fn(rewards [G, n], valid [G, n] bool, eps) -> advantages [G, n]``."""

AGGREGATIONS: tuple[str, ...] = ("token-mean", "seq-mean", "seq-mean-token-sum", "constant")
KL_ESTIMATORS: tuple[str, ...] = ("k1", "k2", "k3")


# ---------------------------------------------------------------------------------------------------
# Masked reductions
# ---------------------------------------------------------------------------------------------------

def masked_sum(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Sum of ``x`` where ``mask`` is set (mask broadcasts to ``x``); masked-out NaN/inf are ignored."""
    kept = torch.where(mask.bool(), x, torch.zeros((), dtype=x.dtype, device=x.device))
    return kept.sum() if dim is None else kept.sum(dim)


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of ``x`` over the entries where ``mask`` is set; 0 (not NaN) where nothing is kept."""
    count = mask.bool().expand_as(x).sum() if dim is None else mask.bool().expand_as(x).sum(dim)
    return masked_sum(x, mask, dim) / count.clamp(min=1).to(x.dtype)


# ---------------------------------------------------------------------------------------------------
# Rewards and group advantages
# ---------------------------------------------------------------------------------------------------

def rewards_to_tensor(rewards: list[float | None]) -> tuple[torch.Tensor, torch.Tensor]:
    """Turn a reward function's output (``None`` = no reward) into ``(float32 tensor, valid mask)``.

    Missing rewards become NaN in the tensor and False in the mask.
    """
    values = [math.nan if r is None else float(r) for r in rewards]
    for i, (raw, value) in enumerate(zip(rewards, values)):
        if raw is not None and not math.isfinite(value):
            raise ValueError(f"rewards[{i}] = {raw!r} is not finite; return None for a missing reward")
    tensor = torch.tensor(values, dtype=torch.float32)
    return tensor, ~torch.isnan(tensor)


def _group_stats(
    rewards: torch.Tensor, valid: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-group (count, sum, mean) of the valid rewards, each shaped [G, 1] for broadcasting."""
    count = valid.sum(-1, keepdim=True).to(rewards.dtype)
    total = masked_sum(rewards, valid, dim=-1).unsqueeze(-1)
    return count, total, total / count.clamp(min=1)


@ADVANTAGES.register("grpo")
def grpo_advantages(rewards: torch.Tensor, valid: torch.Tensor, eps: float) -> torch.Tensor:
    """GRPO outcome advantage (Shao et al. 2024, DeepSeekMath, eq. 3): (r - mean) / (std + eps) per group.

    ``std`` is the unbiased (Bessel-corrected, n - 1) sample std, as ``torch.std`` computes it: the
    paper does not say which, and TRL's GRPOTrainer and verl both use ``torch.std``, so our advantages
    match the peers we benchmark against. A group with one valid sample has no spread and gets 0.
    """
    count, _, mean = _group_stats(rewards, valid)
    centered = torch.where(valid, rewards - mean, torch.zeros_like(rewards))
    std = ((centered**2).sum(-1, keepdim=True) / (count - 1).clamp(min=1)).sqrt()
    return centered / (std + eps)


@ADVANTAGES.register("rloo")
def rloo_advantages(rewards: torch.Tensor, valid: torch.Tensor, eps: float) -> torch.Tensor:
    """REINFORCE leave-one-out baseline (Ahmadian et al. 2024): r_i - mean_{j != i} r_j over valid j.

    A sample alone in its group has no other sample to baseline against and gets 0. ``eps`` is unused.
    """
    count, total, _ = _group_stats(rewards, valid)
    others = (total - rewards) / (count - 1).clamp(min=1)
    keep = valid & (count > 1)
    return torch.where(keep, rewards - others, torch.zeros_like(rewards))


@ADVANTAGES.register("dr_grpo")
def dr_grpo_advantages(rewards: torch.Tensor, valid: torch.Tensor, eps: float) -> torch.Tensor:
    """Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-like training"): r - group mean, no std scaling.

    ``eps`` is unused.
    """
    _, _, mean = _group_stats(rewards, valid)
    return torch.where(valid, rewards - mean, torch.zeros_like(rewards))


def group_advantages(
    rewards: torch.Tensor,
    group_size: int,
    estimator: str,
    valid: torch.Tensor | None = None,
    eps: float = 1e-4,
) -> torch.Tensor:
    """Advantages of ``rewards [N]`` laid out as consecutive groups of ``group_size`` samples per prompt.

    ``valid`` marks samples that have a reward (see ``rewards_to_tensor``); group statistics use only
    valid samples and invalid samples get advantage 0. Without ``valid`` every reward must be finite.
    A group whose valid rewards are all equal gets exactly 0 under every estimator (also with eps = 0).
    """
    if estimator not in ADVANTAGES:
        raise ValueError(f"estimator {estimator!r} is unknown; choose one of {ADVANTAGES.names()}")
    if rewards.dim() != 1 or not rewards.is_floating_point():
        raise ValueError(f"rewards must be a 1-D float tensor, got {rewards.dtype} {tuple(rewards.shape)}")
    if group_size < 1 or rewards.numel() % group_size:
        raise ValueError(f"group_size {group_size} must be >= 1 and divide the {rewards.numel()} rewards")
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    if valid is None:
        valid = torch.ones_like(rewards, dtype=torch.bool)
    elif valid.shape != rewards.shape:
        raise ValueError(f"valid has shape {tuple(valid.shape)}, rewards {tuple(rewards.shape)}")
    valid = valid.bool()
    bad = valid & ~torch.isfinite(rewards)
    if bad.any():
        raise ValueError(f"rewards at indices {bad.nonzero().flatten().tolist()} are not finite but marked "
                         "valid; mark missing rewards invalid (rewards_to_tensor does)")
    grouped, valid = rewards.reshape(-1, group_size), valid.reshape(-1, group_size)
    advantages = ADVANTAGES.get(estimator)(grouped, valid, eps)
    # A group whose valid rewards are all equal carries no signal: exactly 0, free of rounding residue.
    high = torch.where(valid, grouped, -math.inf).amax(-1, keepdim=True)
    low = torch.where(valid, grouped, math.inf).amin(-1, keepdim=True)
    return torch.where(high == low, torch.zeros_like(advantages), advantages).reshape(-1)


# ---------------------------------------------------------------------------------------------------
# Policy loss
# ---------------------------------------------------------------------------------------------------

def clipped_surrogate(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    clip_low: float,
    clip_high: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PPO clipped surrogate (Schulman et al. 2017) with DAPO's decoupled clip range (Yu et al. 2025).

    ratio = exp(logp - old_logp); loss = -min(ratio * A, clip(ratio, 1 - clip_low, 1 + clip_high) * A).
    ``advantages`` is [B] (one per sequence, broadcast over tokens) or the shape of ``logp``.
    Returns ``(per_token_loss, clipped_mask, ratio)``; ``clipped_mask`` is True where the clipped
    branch is strictly the active one (its gradient is zero there), for the clip-fraction metric.
    """
    if not 0 <= clip_low < 1:
        raise ValueError(f"clip_low must be in [0, 1), got {clip_low}")
    if clip_high < 0:
        raise ValueError(f"clip_high must be >= 0, got {clip_high}")
    if logp.shape != old_logp.shape:
        raise ValueError(f"logp {tuple(logp.shape)} and old_logp {tuple(old_logp.shape)} differ in shape")
    if advantages.shape == logp.shape[:1] and logp.dim() > 1:
        advantages = advantages.reshape(advantages.shape + (1,) * (logp.dim() - 1))
    elif advantages.shape != logp.shape:
        raise ValueError(f"advantages {tuple(advantages.shape)} must be [B] or match "
                         f"logp {tuple(logp.shape)}")
    ratio = torch.exp(logp - old_logp)
    loss, clipped = ratio_surrogate(ratio, advantages, clip_low, clip_high)
    return loss, clipped, ratio


def ratio_surrogate(ratio: torch.Tensor, advantages: torch.Tensor, clip_low: float,
                    clip_high: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The clipped surrogate of a given ``ratio`` (advantages already broadcast to its shape): ``(loss,
    clipped_mask)`` as ``clipped_surrogate`` returns them."""
    unclipped = -ratio * advantages
    clipped = -torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * advantages
    return torch.maximum(unclipped, clipped), clipped > unclipped


def aggregate_loss(
    per_token: torch.Tensor, mask: torch.Tensor, mode: str, constant: float | None = None
) -> torch.Tensor:
    """Reduce a [B, T] per-token loss to a scalar over the tokens in ``mask``.

    - "token-mean": sum over all tokens / number of tokens (DAPO, Yu et al. 2025).
    - "seq-mean": mean over the tokens of each sequence, then mean over the sequences that have at
      least one token (GRPO, Shao et al. 2024, eq. 3); empty sequences have no mean and are skipped.
    - "seq-mean-token-sum": the sum over the tokens of each sequence, then the mean over the sequences that have
      at least one token (verl's ``seq-mean-token-sum``, which averages over every sequence of the batch: here an
      empty sequence is skipped, as in "seq-mean").
    - "constant": sum / (B * constant), with constant = the maximum completion length (Dr. GRPO,
      Liu et al. 2025), so the weight of a token does not depend on its sequence's length.
    An all-empty mask gives 0. ``constant`` is required by "constant" and ignored by the other modes.
    """
    if mode not in AGGREGATIONS:
        raise ValueError(f"mode {mode!r} is unknown; choose one of {list(AGGREGATIONS)}")
    if per_token.dim() != 2 or mask.shape != per_token.shape:
        raise ValueError(f"per_token {tuple(per_token.shape)} and mask {tuple(mask.shape)} "
                         "must both be [B, T]")
    if mode == "token-mean":
        return masked_mean(per_token, mask)
    if mode == "seq-mean":
        per_seq = masked_mean(per_token, mask, dim=-1)
        return masked_mean(per_seq, mask.bool().any(-1))
    if mode == "seq-mean-token-sum":
        return masked_mean(masked_sum(per_token, mask, dim=-1), mask.bool().any(-1))
    if constant is None or not constant > 0:
        raise ValueError(f"constant must be > 0 for mode 'constant', got {constant!r}")
    return masked_sum(per_token, mask) / (per_token.shape[0] * constant)


def kl_estimate(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str) -> torch.Tensor:
    """Per-element estimate of KL(pi || ref) from samples of pi (Schulman 2020, "Approximating KL").

    With log r = ref_logp - logp: k1 = -log r (unbiased, can be negative); k2 = (log r)^2 / 2 (biased,
    low variance); k3 = (r - 1) - log r (unbiased, always >= 0; computed as expm1(log r) - log r for
    precision near 0). Works elementwise on any shape (tokens or whole sequences).
    """
    if kind not in KL_ESTIMATORS:
        raise ValueError(f"kind {kind!r} is unknown; choose one of {list(KL_ESTIMATORS)}")
    if logp.shape != ref_logp.shape:
        raise ValueError(f"logp {tuple(logp.shape)} and ref_logp {tuple(ref_logp.shape)} differ in shape")
    log_ratio = ref_logp - logp
    if kind == "k1":
        return -log_ratio
    if kind == "k2":
        return 0.5 * log_ratio**2
    return torch.expm1(log_ratio) - log_ratio


def sampler_mismatch(trainer_logp: torch.Tensor, sampling_logp: torch.Tensor,
                     mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mean |trainer_logp - sampling_logp|, KL(sampler || trainer))`` over the tokens in ``mask``: how far
    the engine's sampling log-probs are from the trainer's on the same tokens. The KL is the k3 estimate
    (``kl_estimate``) from the sampled tokens, which the sampler drew: unbiased and never negative."""
    trainer_logp, sampling_logp = trainer_logp.detach(), sampling_logp.detach()
    abs_diff = masked_mean((trainer_logp - sampling_logp).abs(), mask)
    kl = masked_mean(kl_estimate(sampling_logp, trainer_logp, "k3"), mask)
    return abs_diff, kl


def sft_loss(logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood over the masked tokens of ``logp [B, T]`` (0 if none are masked in)."""
    return aggregate_loss(-logp, mask, "token-mean")


# ---------------------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------------------

def pass_at_k(num_samples: int, num_correct: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021, Codex paper): 1 - C(n - c, k) / C(n, k).

    Computed as the stable product 1 - prod_{i = n - c + 1}^{n} (1 - k / i), as in the paper.
    """
    n, c = num_samples, num_correct
    if n < 1:
        raise ValueError(f"num_samples must be >= 1, got {n}")
    if not 0 <= c <= n:
        raise ValueError(f"num_correct must be in [0, num_samples={n}], got {c}")
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, num_samples={n}], got {k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))
