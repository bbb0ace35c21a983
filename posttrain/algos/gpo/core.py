"""GPO (Li, Xie, Lu; "Guided Policy Optimization under Partial Observability", ICLR 2026) as pure functions.

Shared by the control setting (``posttrain.standalone.gpo_control``) and the LLM setting. Every function
takes and returns torch tensors, per sample (or per token); reductions are left to the caller, except
where the paper's reduction matters and is named (the backtracking term is a mean over *all* samples
with masked-out ones counting as 0, so callers should ``.mean()`` it, not ``masked_mean`` it).

Notation (as in ``GPO.py``): the behaviour policy beta is the guider at rollout time; mu is the
guider being trained (sees the privileged state s); pi the learner (sees only the observation o);
A the advantage; eps the PPO clip (0.3 in the code); delta the inner clip (``--eps`` in the code);
sg the stop-gradient. Losses are returned with the sign to *minimise*:

- L1 guider PPO          ``guider_ppo_loss``           = -min(rho_mu A, clip(rho_mu) A), rho_mu = mu/beta
- L2 learner imitation   ``learner_imitation_loss``    = KL(sg mu || pi)
- L3 backtracking        ``backtrack_kl``              = KL(mu || sg pi)
- L4 learner RL aux      ``learner_rl_aux_loss``       = -min(rho_pi A, clip(rho_pi) A), rho_pi = pi/beta,
                                                         with log rho_pi clamped at 10 as in the code
- GPO-clip guider        ``guider_clip_loss``          = -min(rho_mu A, clip(clip(mu/sg pi,1-d,1+d) sg pi/beta,1-e,1+e) A)
                                                         + 1[mu/pi outside (1-d,1+d)] KL(mu || sg pi)
- GPO-penalty            ``gpo_penalty_losses``        guider -L1 + alpha L3, learner L2 - alpha L4,
                                                         alpha adapted by ``update_penalty_alpha``.

The KLs between two full distributions are closed-form: categorical (``categorical_kl``) or diagonal
Gaussian averaged over action dimensions (``gaussian_kl``, on the pre-tanh Gaussian as in the code).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from posttrain.algos.core import clipped_surrogate

# Defaults from the official code (GPO.py, its scripts): PPO clip 0.3, alpha 2 (GPO-clip), target KL 0.001
# (every training script; the argparse default is 0.01), alpha cap 10. The inner clip delta is 0.1 or
# 0.3 per environment in the scripts; we use the argparse default, 0.2.
PPO_CLIP = 0.3
INNER_CLIP = 0.2
GPO_CLIP_ALPHA = 2.0
PENALTY_TARGET_KL = 0.001
PENALTY_ALPHA_MAX = 10.0
LOG_RATIO_CAP = 10.0


@dataclass(frozen=True)
class GPOCoefs:
    """GPO's coefficients; the defaults are the paper's code defaults (see module docstring)."""

    ppo_clip: float = PPO_CLIP
    inner_clip: float = INNER_CLIP
    alpha: float = GPO_CLIP_ALPHA
    target_kl: float = PENALTY_TARGET_KL
    alpha_max: float = PENALTY_ALPHA_MAX
    log_ratio_cap: float = LOG_RATIO_CAP


# ---------------------------------------------------------------------------------------------------
# KLs between two full distributions
# ---------------------------------------------------------------------------------------------------

def categorical_kl(p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
    """KL(p || q) over the last dimension from logits; returns one value per leading index (>= 0).

    Works for control actions ([B, A]) and LLM vocabularies ([B, T, V]); -inf logits (masked actions)
    in p contribute 0, as they should.
    """
    if p_logits.shape != q_logits.shape:
        raise ValueError(f"p_logits {tuple(p_logits.shape)} and q_logits {tuple(q_logits.shape)} differ")
    logp = torch.log_softmax(p_logits, dim=-1)
    logq = torch.log_softmax(q_logits, dim=-1)
    p = logp.exp()
    terms = torch.where(p > 0, p * (logp - logq), torch.zeros_like(p))
    return terms.sum(-1)


def gaussian_kl(
    mean_p: torch.Tensor, std_p: torch.Tensor, mean_q: torch.Tensor, std_q: torch.Tensor
) -> torch.Tensor:
    """KL(N(mean_p, std_p^2) || N(mean_q, std_q^2)) for diagonal Gaussians, **averaged** over the last
    (action) dimension as in ``GPO.py`` (so KL thresholds are per dimension, not summed)."""
    var_p, var_q = std_p**2, std_q**2
    per_dim = torch.log(std_q / std_p) + (var_p + (mean_p - mean_q) ** 2) / (2 * var_q) - 0.5
    return per_dim.mean(-1)


# ---------------------------------------------------------------------------------------------------
# Guider terms
# ---------------------------------------------------------------------------------------------------

def guider_ppo_loss(
    guider_logp: torch.Tensor, behaviour_logp: torch.Tensor, advantages: torch.Tensor, ppo_clip: float = PPO_CLIP
) -> tuple[torch.Tensor, torch.Tensor]:
    """-L1: plain PPO clipped surrogate of the guider against the behaviour policy. Returns (loss, ratio)."""
    loss, _, ratio = clipped_surrogate(guider_logp, behaviour_logp, advantages, ppo_clip, ppo_clip)
    return loss, ratio


def backtrack_mask(guider_logp: torch.Tensor, learner_logp: torch.Tensor, inner_clip: float = INNER_CLIP) -> torch.Tensor:
    """m(s, a) = 1[mu(a|s) / pi(a|o) outside (1 - delta, 1 + delta)] at the sampled action, as a float
    tensor without gradient. The boundary values themselves count as inside (open interval in the paper,
    but a ratio exactly at the boundary is already clipped, so its KL pull is harmless either way)."""
    with torch.no_grad():
        gap = guider_logp - learner_logp
        lo, hi = math.log(1 - inner_clip), math.log(1 + inner_clip)
        return ((gap < lo) | (gap > hi)).to(guider_logp.dtype)


def guider_clip_surrogate(
    guider_logp: torch.Tensor,
    learner_logp: torch.Tensor,
    behaviour_logp: torch.Tensor,
    advantages: torch.Tensor,
    ppo_clip: float = PPO_CLIP,
    inner_clip: float = INNER_CLIP,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GPO-clip's double-clipped guider surrogate (to minimise), per sample:

        -min(rho_mu A, clip(clip(mu/sg pi, 1-delta, 1+delta) * sg pi/beta, 1-eps, 1+eps) A)

    The inner clip is applied in log space with the learner's log-prob detached, as in GPO.py.
    Returns (loss, rho_mu).
    """
    if not 0 < inner_clip < 1:
        raise ValueError(f"inner_clip (delta) must be in (0, 1), got {inner_clip}")
    if advantages.dim() < guider_logp.dim():
        advantages = advantages.reshape(advantages.shape + (1,) * (guider_logp.dim() - advantages.dim()))
    sg_learner = learner_logp.detach()
    rho_mu = torch.exp(guider_logp - behaviour_logp)
    gap = torch.clamp(guider_logp - sg_learner, math.log(1 - inner_clip), math.log(1 + inner_clip))
    rho_clip = torch.clamp(torch.exp(gap + sg_learner - behaviour_logp), 1 - ppo_clip, 1 + ppo_clip)
    return torch.maximum(-rho_mu * advantages, -rho_clip * advantages), rho_mu


def backtrack_kl(kl_guider_learner: torch.Tensor) -> torch.Tensor:
    """L3 = KL(mu || sg pi). Pass the KL computed with the learner's distribution detached; this function
    only documents and checks the term (a KL below -1e-6 means the caller passed something else)."""
    if kl_guider_learner.numel() and kl_guider_learner.detach().min() < -1e-6:
        raise ValueError("backtrack KL must be a full-distribution KL (>= 0)")
    return kl_guider_learner


def guider_clip_loss(
    guider_logp: torch.Tensor,
    learner_logp: torch.Tensor,
    behaviour_logp: torch.Tensor,
    advantages: torch.Tensor,
    kl_guider_sg_learner: torch.Tensor,
    ppo_clip: float = PPO_CLIP,
    inner_clip: float = INNER_CLIP,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The whole GPO-clip guider loss per sample: double-clipped surrogate + m * KL(mu || sg pi).

    ``kl_guider_sg_learner`` is KL(mu(.|s) || sg pi(.|o)) per sample (full distributions). Average the
    result over *all* samples (masked-out samples count as 0 in the backtracking term, as in the code).
    Returns (loss, {"mask", "ratio"}).
    """
    surrogate, rho_mu = guider_clip_surrogate(guider_logp, learner_logp, behaviour_logp, advantages, ppo_clip, inner_clip)
    mask = backtrack_mask(guider_logp, learner_logp, inner_clip)
    return surrogate + mask * backtrack_kl(kl_guider_sg_learner), {"mask": mask, "ratio": rho_mu}


# ---------------------------------------------------------------------------------------------------
# Learner terms
# ---------------------------------------------------------------------------------------------------

def learner_imitation_loss(kl_sg_guider_learner: torch.Tensor) -> torch.Tensor:
    """L2 = KL(sg mu(.|s) || pi(.|o)) per sample (pass the KL computed with the guider detached)."""
    return kl_sg_guider_learner


def learner_rl_aux_loss(
    learner_logp: torch.Tensor,
    behaviour_logp: torch.Tensor,
    advantages: torch.Tensor,
    ppo_clip: float = PPO_CLIP,
    log_ratio_cap: float = LOG_RATIO_CAP,
) -> tuple[torch.Tensor, torch.Tensor]:
    """-L4: off-policy PPO surrogate of the learner on the guider's samples, rho_pi = pi(a|o)/beta(a|s),
    with log rho_pi clamped at ``log_ratio_cap`` (GPO.py's ``exp(min(log-ratio, 10))``; no gradient
    flows where the clamp is active). Returns (loss, rho_pi)."""
    capped = torch.minimum(learner_logp, behaviour_logp + log_ratio_cap)
    loss, _, ratio = clipped_surrogate(capped, behaviour_logp, advantages, ppo_clip, ppo_clip)
    return loss, ratio


def learner_loss(
    kl_sg_guider_learner: torch.Tensor,
    learner_logp: torch.Tensor,
    behaviour_logp: torch.Tensor,
    advantages: torch.Tensor,
    alpha: float = GPO_CLIP_ALPHA,
    ppo_clip: float = PPO_CLIP,
    log_ratio_cap: float = LOG_RATIO_CAP,
) -> torch.Tensor:
    """Learner loss per sample for every GPO variant: L2 - alpha L4 (alpha = 0 is GPO-naive, pure imitation)."""
    imitation = learner_imitation_loss(kl_sg_guider_learner)
    if alpha == 0:
        return imitation
    aux, _ = learner_rl_aux_loss(learner_logp, behaviour_logp, advantages, ppo_clip, log_ratio_cap)
    return imitation + alpha * aux


# ---------------------------------------------------------------------------------------------------
# Variants
# ---------------------------------------------------------------------------------------------------

def gpo_clip_losses(
    guider_logp: torch.Tensor,
    learner_logp: torch.Tensor,
    behaviour_logp: torch.Tensor,
    advantages: torch.Tensor,
    kl_guider_sg_learner: torch.Tensor,
    kl_sg_guider_learner: torch.Tensor,
    coefs: GPOCoefs = GPOCoefs(),
) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """GPO-clip (paper's default variant): (guider loss, learner loss, metrics), all per sample.

    guider = double-clipped surrogate + m KL(mu || sg pi); learner = KL(sg mu || pi) - alpha L4 with a
    fixed alpha (2 by default; 0 gives GPO-naive).
    """
    g, info = guider_clip_loss(
        guider_logp, learner_logp, behaviour_logp, advantages, kl_guider_sg_learner, coefs.ppo_clip, coefs.inner_clip
    )
    lrn = learner_loss(
        kl_sg_guider_learner, learner_logp, behaviour_logp, advantages, coefs.alpha, coefs.ppo_clip, coefs.log_ratio_cap
    )
    return g, lrn, info


def gpo_penalty_losses(
    guider_logp: torch.Tensor,
    learner_logp: torch.Tensor,
    behaviour_logp: torch.Tensor,
    advantages: torch.Tensor,
    kl_guider_sg_learner: torch.Tensor,
    kl_sg_guider_learner: torch.Tensor,
    alpha: float,
    coefs: GPOCoefs = GPOCoefs(),
) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """GPO-penalty (paper 3.3): guider = -L1 + alpha L3, learner = L2 - alpha L4, one adaptive alpha for
    both (update it once per epoch with ``update_penalty_alpha``). Returns per-sample (guider, learner, metrics)."""
    l1, ratio = guider_ppo_loss(guider_logp, behaviour_logp, advantages, coefs.ppo_clip)
    g = l1 + alpha * backtrack_kl(kl_guider_sg_learner)
    lrn = learner_loss(
        kl_sg_guider_learner, learner_logp, behaviour_logp, advantages, alpha, coefs.ppo_clip, coefs.log_ratio_cap
    )
    return g, lrn, {"ratio": ratio}


def update_penalty_alpha(
    alpha: float, mean_kl: float, target_kl: float = PENALTY_TARGET_KL, alpha_max: float = PENALTY_ALPHA_MAX
) -> float:
    """GPO-penalty's alpha schedule, exactly as in GPO.py, run once per epoch with ``mean_kl`` = the mean
    over minibatches of KL(mu || pi): start from 0.1 when alpha ~ 0 and the KL exceeds the target, then
    multiply / divide by 1.2 outside [target/1.2, 1.2 target], capped at ``alpha_max``."""
    if alpha < 1e-5 and mean_kl > target_kl:
        alpha = 0.1
    if mean_kl > 1.2 * target_kl:
        alpha *= 1.2
    if mean_kl < target_kl / 1.2:
        alpha /= 1.2
    return min(alpha, alpha_max)
