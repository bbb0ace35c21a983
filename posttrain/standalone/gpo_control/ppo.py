"""PPO building blocks for the control setting: shared guider/learner policy, critic, normaliser, GAE.

Follows the official ``GPO.py`` (github.com/liyheng/GPO) at CPU scale:

- **One shared policy MLP** for both roles. Inputs are o_g = [s, o, 0] for the guider and
  o_l = [0, o, 1] for the learner (role flag 0 = guider, 1 = learner, as in the code).
- One value MLP whose input is o_g (asymmetric critic) or o_l (plain PPO), as the method says.
- SiLU MLPs of 2 x ``hidden`` (the code uses 2 x 128; we default to 64 for CPU-scale runs).
- Discrete actions use a categorical head. Continuous actions use a tanh-squashed Gaussian with
  scale = softplus + 1e-3. Ratios and KLs are taken on the pre-tanh Gaussian: the tanh Jacobian cancels
  in every ratio of two policies at the same pre-tanh sample.
- Observation normalisation with running mean/variance, clipped to +-5. *Deviation:* s and o are
  normalised by separate statistics, so the zeros in o_l's state slot do not bias the state's mean.
  The code instead updates a single statistic from both o_g and o_l.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from posttrain.algos.gpo.core import categorical_kl, gaussian_kl
from posttrain.algos.ppo.core import gae_recursion


class RunningNorm:
    """Running mean/variance (parallel Welford), applied as clip((x - mean) / std, -5, 5)."""

    def __init__(self, dim: int, clip: float = 5.0) -> None:
        self.mean = np.zeros(dim, dtype=np.float64)
        self.var = np.ones(dim, dtype=np.float64)
        self.count = 1e-4
        self.clip = clip

    def update(self, x: np.ndarray) -> None:
        batch_mean, batch_var, n = x.mean(0), x.var(0), x.shape[0]
        delta, total = batch_mean - self.mean, self.count + n
        self.mean = self.mean + delta * n / total
        m2 = self.var * self.count + batch_var * n + delta**2 * self.count * n / total
        self.var, self.count = m2 / total, total

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.clip((x - self.mean) / np.sqrt(self.var + 1e-8), -self.clip, self.clip).astype(np.float32)

    def state_dict(self) -> dict:
        return {"mean": self.mean.tolist(), "var": self.var.tolist(), "count": self.count}

    def load_state_dict(self, d: dict) -> None:
        self.mean, self.var, self.count = np.array(d["mean"]), np.array(d["var"]), float(d["count"])


class Inputs:
    """Builds the guider input [s, o, 0] and the learner input [0, o, 1] from raw arrays (normalised)."""

    def __init__(self, state_dim: int, obs_dim: int) -> None:
        self.state_norm, self.obs_norm = RunningNorm(state_dim), RunningNorm(obs_dim)
        self.state_dim, self.obs_dim = state_dim, obs_dim
        self.dim = state_dim + obs_dim + 1

    def update(self, state: np.ndarray, obs: np.ndarray) -> None:
        self.state_norm.update(state)
        self.obs_norm.update(obs)

    def guider(self, state: np.ndarray, obs: np.ndarray) -> torch.Tensor:
        flag = np.zeros((state.shape[0], 1), dtype=np.float32)
        return torch.from_numpy(np.concatenate([self.state_norm(state), self.obs_norm(obs), flag], axis=1))

    def learner(self, obs: np.ndarray) -> torch.Tensor:
        n = obs.shape[0]
        zeros, flag = np.zeros((n, self.state_dim), dtype=np.float32), np.ones((n, 1), dtype=np.float32)
        return torch.from_numpy(np.concatenate([zeros, self.obs_norm(obs), flag], axis=1))

    def state_dict(self) -> dict:
        return {"state": self.state_norm.state_dict(), "obs": self.obs_norm.state_dict()}

    def load_state_dict(self, d: dict) -> None:
        self.state_norm.load_state_dict(d["state"])
        self.obs_norm.load_state_dict(d["obs"])


def mlp(inp: int, out: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inp, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, out))


class Policy(nn.Module):
    """Shared guider/learner policy; ``forward`` returns the distribution parameters (logits or mean|std)."""

    def __init__(self, in_dim: int, discrete: bool, n_out: int, hidden: int = 64) -> None:
        super().__init__()
        self.discrete, self.n_out = discrete, n_out
        self.net = mlp(in_dim, n_out if discrete else 2 * n_out, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


@dataclass
class Dist:
    """Distribution helpers over a policy head output (categorical logits or [mean, raw scale])."""

    discrete: bool

    def split(self, out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, raw = out.chunk(2, dim=-1)
        return mean, F.softplus(raw) + 1e-3

    def log_prob(self, out: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        if self.discrete:
            return torch.log_softmax(out, -1).gather(-1, action.long()[:, None])[:, 0]
        mean, std = self.split(out)
        z = (action - mean) / std
        return (-0.5 * z**2 - torch.log(std) - 0.5 * math.log(2 * math.pi)).sum(-1)

    def sample(self, out: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        if self.discrete:
            return torch.multinomial(torch.softmax(out, -1), 1, generator=gen)[:, 0]
        mean, std = self.split(out)
        return mean + std * torch.randn(mean.shape, generator=gen)

    def mode(self, out: torch.Tensor) -> torch.Tensor:
        return out.argmax(-1) if self.discrete else self.split(out)[0]

    def entropy(self, out: torch.Tensor) -> torch.Tensor:
        if self.discrete:
            logp = torch.log_softmax(out, -1)
            return -(logp.exp() * logp).sum(-1)
        _, std = self.split(out)  # pre-tanh Gaussian entropy, averaged over dims like the KL
        return (0.5 + 0.5 * math.log(2 * math.pi) + torch.log(std)).mean(-1)

    def kl(self, p_out: torch.Tensor, q_out: torch.Tensor) -> torch.Tensor:
        """KL(p || q) of the full distributions (categorical, or Gaussian averaged over dims)."""
        if self.discrete:
            return categorical_kl(p_out, q_out)
        (mp, sp), (mq, sq) = self.split(p_out), self.split(q_out)
        return gaussian_kl(mp, sp, mq, sq)

    def to_env(self, action: torch.Tensor, act_high: float) -> np.ndarray:
        a = action.numpy()
        return a if self.discrete else np.tanh(a) * act_high


def gae(
    rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, last_value: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over time-major [T, N] tensors (``posttrain.algos.ppo.core.gae_recursion``).
    ``dones[t]`` = the episode ended at step t (time-limit bootstraps are already folded into ``rewards``).
    Returns (advantages, returns)."""
    adv = gae_recursion(rewards.T, values.T, dones.T, last_value, gamma, lam).T
    return adv, adv + values


def normalise(adv: torch.Tensor) -> torch.Tensor:
    """Per-minibatch advantage normalisation (as in the code)."""
    return (adv - adv.mean()) / (adv.std(unbiased=False) + 1e-8)
