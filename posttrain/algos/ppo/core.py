"""PPO's pure math (Schulman et al. 2017; the RLHF form of Ziegler et al. 2019 and Ouyang et al. 2022, as
TRL 0.11's ``PPOTrainer`` implements it and Text2Grad, arXiv 2505.22338, trains with): per-token rewards with
the KL penalty folded in, GAE, whitening over the response mask, the clipped value loss, the full-vocabulary
KL, and the adaptive KL controller. No model code lives here; tensors are ``[B, T]`` over completion tokens,
right-padded, with a ``mask`` of the real tokens.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from posttrain.algos.core import masked_mean, masked_sum


def last_token_index(mask: torch.Tensor) -> torch.Tensor:
    """Index of each row's last real token (``[B]``, long); rows without one get -1."""
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    return torch.where(mask.bool(), positions, torch.full_like(positions, -1)).max(-1).values


def token_rewards(dense: torch.Tensor, kl: torch.Tensor, kl_coef: float, mask: torch.Tensor,
                  terminal: torch.Tensor | None = None) -> torch.Tensor:
    """r_t = dense_t - kl_coef * KL_t on the response tokens, plus ``terminal`` (``[B]``) on each row's last
    token: TRL's ``compute_rewards`` with an optional dense part. Text2Grad passes its span rewards as
    ``dense`` and no terminal scalar; a verifier or reward model gives ``terminal`` and zero ``dense``.
    Padding positions are 0."""
    rewards = dense - kl_coef * kl
    if terminal is not None:
        last = last_token_index(mask)
        has = last >= 0
        rows = torch.arange(mask.shape[0], device=mask.device)[has]
        rewards = rewards.clone()
        rewards[rows, last[has]] += terminal[has].to(rewards.dtype)
    return torch.where(mask.bool(), rewards, torch.zeros_like(rewards))


def gae_recursion(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, last_value: torch.Tensor,
                  gamma: float, lam: float) -> torch.Tensor:
    """Generalised advantage estimation (Schulman et al. 2016) over the last dimension (time) of [..., T] tensors.

    delta_t = r_t + gamma * V_{t+1} * (1 - done_t) - V_t and A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1},
    where V_T is ``last_value`` (the bootstrap after the last step) and ``done_t`` = 1 ends an episode at step t.
    The one GAE recursion: the token-level ``gae`` below and GPO's control setting both run it.
    """
    steps = rewards.shape[-1]
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(last_value)
    for t in reversed(range(steps)):
        next_value = last_value if t == steps - 1 else values[..., t + 1]
        nonterminal = 1.0 - dones[..., t]
        delta = rewards[..., t] + gamma * next_value * nonterminal - values[..., t]
        running = delta + gamma * lam * nonterminal * running
        advantages[..., t] = running
    return advantages


def gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float,
        lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``gae_recursion`` over each row's response tokens: the episode ends at the last real token (V after it 0).

    Returns ``(advantages, returns = advantages + values)``, both 0 on padding. Right padding only: a masked
    position ends the recursion like the end of the row.
    """
    if not 0 <= gamma <= 1 or not 0 <= lam <= 1:
        raise ValueError(f"gamma and lam must be in [0, 1], got gamma={gamma}, lam={lam}")
    if not rewards.shape == values.shape == mask.shape:
        raise ValueError(f"rewards {tuple(rewards.shape)}, values {tuple(values.shape)} and mask "
                         f"{tuple(mask.shape)} must have one shape")
    keep = mask.bool()
    values = torch.where(keep, values, torch.zeros_like(values))
    rewards = torch.where(keep, rewards, torch.zeros_like(rewards))
    next_kept = torch.zeros_like(keep)
    next_kept[:, :-1] = keep[:, 1:]
    dones = (keep & ~next_kept).to(rewards.dtype)
    advantages = gae_recursion(rewards, values, dones, torch.zeros_like(rewards[:, 0]), gamma, lam)
    advantages = torch.where(keep, advantages, torch.zeros_like(advantages))
    return advantages, torch.where(keep, advantages + values, torch.zeros_like(values))


def whiten(x: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True, eps: float = 1e-8) -> torch.Tensor:
    """(x - mean) / sqrt(var + eps) over the entries in ``mask`` (TRL's ``masked_whiten``: the variance is the
    unbiased one, the mean added back when ``shift_mean`` is False); 0 on masked-out entries. A single kept
    entry has no variance: it becomes 0 (or its mean)."""
    mean = masked_mean(x, mask)
    count = mask.bool().sum()
    variance = masked_sum((x - mean) ** 2, mask) / (count - 1).clamp(min=1)
    out = (x - mean) * torch.rsqrt(variance + eps)
    if not shift_mean:
        out = out + mean
    return torch.where(mask.bool(), out, torch.zeros_like(out))


def clipped_value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor,
                       clip: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token PPO value loss 0.5 * max((V - R)^2, (V_clip - R)^2), with V_clip = V_old + clamp(V - V_old,
    -clip, clip) (TRL's ``cliprange_value``); returns ``(loss, clipped_mask)`` where the clipped branch is the
    larger (its gradient is zero there). ``clip`` <= 0 turns clipping off (the plain squared error)."""
    unclipped = (values - returns) ** 2
    if clip <= 0:
        return 0.5 * unclipped, torch.zeros_like(unclipped, dtype=torch.bool)
    clipped_values = old_values + torch.clamp(values - old_values, -clip, clip)
    clipped = (clipped_values - returns) ** 2
    return 0.5 * torch.maximum(unclipped, clipped), clipped > unclipped


def full_kl(logits: torch.Tensor, ref_logits: torch.Tensor) -> torch.Tensor:
    """KL(pi(.|prefix) || ref(.|prefix)) over the whole vocabulary at every position (``[..., V] -> [...]``):
    TRL's ``kl_penalty="full"``, which Text2Grad uses; exact, never negative, no sampling noise."""
    logp = F.log_softmax(logits.float(), dim=-1)
    ref_logp = F.log_softmax(ref_logits.float(), dim=-1)
    return (logp.exp() * (logp - ref_logp)).sum(-1).clamp(min=0.0)


class AdaptiveKLController:
    """The adaptive KL coefficient of Ziegler et al. 2019 (TRL's ``AdaptiveKLController``): after each step,
    error = clip(KL / target - 1, -0.2, 0.2) and beta <- beta * (1 + error * n_steps / horizon), where KL is the
    batch's mean per-sequence KL (summed over its tokens) and n_steps the sequences in the batch.
    A ``target`` of None keeps beta fixed. Over a horizon's worth of samples at a constant error beta moves by a
    factor of about e^error (e^0.2 = 1.22 at most). ``floor`` bounds beta from below (0: no bound, as TRL; never
    above the initial beta): a controller fast enough to act within a run would otherwise shrink beta while the KL
    sits below its target, and need as long to bring it back when the policy starts to drift."""

    def __init__(self, init_kl_coef: float, target: float | None, horizon: float, floor: float = 0.0) -> None:
        if init_kl_coef < 0:
            raise ValueError(f"init_kl_coef must be >= 0, got {init_kl_coef}")
        if target is not None and not target > 0:
            raise ValueError(f"target must be > 0 (or None for a fixed coefficient), got {target}")
        if not horizon > 0:
            raise ValueError(f"horizon must be > 0, got {horizon}")
        if floor < 0:
            raise ValueError(f"floor must be >= 0, got {floor}")
        self.value, self.target, self.horizon = float(init_kl_coef), target, float(horizon)
        self.floor = min(float(floor), self.value)

    def update(self, current_kl: float, n_steps: int) -> float:
        """Adapt beta to the KL just measured; returns the new beta."""
        if self.target is not None:
            error = min(max(current_kl / self.target - 1.0, -0.2), 0.2)
            self.value *= 1.0 + error * n_steps / self.horizon
            self.value = max(self.value, self.floor)
        return self.value

    def state_dict(self) -> dict[str, float]:
        return {"value": self.value}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.value = float(state["value"])
