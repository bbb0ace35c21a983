"""Batched partially observable environments with privileged state, for GPO's control setting.

Every environment is vectorised over ``num_envs`` copies in numpy and returns, each step, the
**privileged state** s (what the guider / a full-state oracle sees) and the **observation** o (what the
learner sees: a partial, noisy view; optionally a stack of the last k such views). Episodes reset on the
same step they end; the pre-reset state and observation are returned so that a truncated (time-limit)
episode can be bootstrapped with the critic.

- ``tiger-door``: the didactic TigerDoor of the A2D/GPO papers (GPO, arXiv 2505.15418). Reward values are
  our choice (the paper's were not verified): listen -0.1, open the tiger-free door +1, the tiger's -1,
  horizon 4 steps. ``noise`` = probability that listening reports the wrong side.
- ``cartpole``: gymnasium's ``CartPoleVectorEnv`` physics; the learner sees the positions [x, theta]
  plus N(0, noise^2), stacked over the last ``stack`` steps (2 by default, so velocities are only
  inferable by differencing noisy positions; a CPU-scale POMDP). The guider sees [x, x', theta, theta'].
- ``pendulum``: gymnasium's Pendulum-v1 dynamics (re-implemented batched, same constants); the learner
  sees [cos th, sin th] + noise (no velocity), the guider also th'. Continuous action (tier C, optional).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from posttrain.common.seeds import derive_seed

ENV_NAMES = ("tiger-door", "cartpole", "pendulum")


@dataclass
class StepResult:
    state: np.ndarray  # [N, S] privileged state after the step (after reset where done)
    obs: np.ndarray  # [N, O] learner observation after the step (after reset where done)
    reward: np.ndarray  # [N]
    terminated: np.ndarray  # [N] bool: a true terminal state (no bootstrap)
    truncated: np.ndarray  # [N] bool: time limit (bootstrap from final_state / final_obs)
    final_state: np.ndarray  # [N, S] pre-reset state (equals ``state`` where not done)
    final_obs: np.ndarray  # [N, O]
    episode_returns: np.ndarray  # returns of the episodes that ended on this step (any order)


class PartialObsVecEnv:
    """Base class: time limit, observation noise, frame stacking, same-step auto-reset, return tracking.

    Subclasses implement ``_reset_envs(idx)``, ``_dynamics(action) -> (reward, terminated)``,
    ``_state()`` and ``_clean_obs()`` (the noise-free partial view of one frame).
    """

    state_dim: int
    frame_dim: int
    discrete: bool = True
    n_actions: int = 0  # discrete
    act_dim: int = 0  # continuous
    act_high: float = 1.0
    max_steps: int = 500

    def __init__(self, num_envs: int, noise: float, seed: int, stack: int = 1) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if noise < 0:
            raise ValueError(f"noise must be >= 0, got {noise}")
        self.num_envs, self.noise, self.stack = num_envs, float(noise), int(stack)
        self.rng = np.random.default_rng(seed)
        self._t = np.zeros(num_envs, dtype=np.int64)
        self._ret = np.zeros(num_envs, dtype=np.float64)
        self._frames = np.zeros((num_envs, self.stack, self.frame_dim), dtype=np.float32)

    @property
    def obs_dim(self) -> int:
        return self.stack * self.frame_dim

    def _noisy_frame(self) -> np.ndarray:
        frame = self._clean_obs().astype(np.float32)
        if self.noise > 0:
            frame = frame + self.noise * self.rng.standard_normal(frame.shape).astype(np.float32)
        return frame

    def _push_frame(self, idx: np.ndarray | None = None, fill: bool = False) -> None:
        frame = self._noisy_frame()
        sel = slice(None) if idx is None else idx
        if fill:
            self._frames[sel] = frame[sel][:, None, :]
        else:
            self._frames[sel] = np.concatenate([self._frames[sel][:, 1:], frame[sel][:, None, :]], axis=1)

    def _obs(self) -> np.ndarray:
        return self._frames.reshape(self.num_envs, -1).copy()

    def reset(self) -> tuple[np.ndarray, np.ndarray]:
        idx = np.arange(self.num_envs)
        self._reset_envs(idx)
        self._t[:] = 0
        self._ret[:] = 0
        self._push_frame(fill=True)
        return self._state().astype(np.float32), self._obs()

    def step(self, action: np.ndarray) -> StepResult:
        reward, terminated = self._dynamics(np.asarray(action))
        self._t += 1
        self._ret += reward
        truncated = (self._t >= self.max_steps) & ~terminated
        self._push_frame()
        final_state, final_obs = self._state().astype(np.float32), self._obs()
        done = terminated | truncated
        episode_returns = self._ret[done].copy()
        if done.any():
            idx = np.flatnonzero(done)
            self._reset_envs(idx)
            self._t[idx] = 0
            self._ret[idx] = 0
            self._push_frame(idx, fill=True)
        return StepResult(
            self._state().astype(np.float32), self._obs(), reward.astype(np.float32), terminated, truncated,
            final_state, final_obs, episode_returns,
        )

    # -- subclass hooks ---------------------------------------------------------------------------
    def _reset_envs(self, idx: np.ndarray) -> None:
        raise NotImplementedError

    def _dynamics(self, action: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _state(self) -> np.ndarray:
        raise NotImplementedError

    def _clean_obs(self) -> np.ndarray:
        raise NotImplementedError


class TigerDoor(PartialObsVecEnv):
    """Actions: 0 listen, 1 open left, 2 open right. State: one-hot tiger side. Observation: one-hot of
    what was last heard (nothing / left / right). The optimum is listen-then-open (0.9 with noise 0);
    opening at once without the side is worth 0 in expectation, which is what a student of a teacher that
    never listens learns (the "impossibly good teacher")."""

    state_dim, frame_dim, n_actions, max_steps = 2, 3, 3, 4
    LISTEN_COST, CORRECT, WRONG = 0.1, 1.0, -1.0

    def __init__(self, num_envs: int, noise: float = 0.0, seed: int = 0, stack: int = 1) -> None:
        if not 0 <= noise <= 0.5:
            raise ValueError(f"tiger-door noise is the probability of mishearing, in [0, 0.5]; got {noise}")
        self.tiger = np.zeros(num_envs, dtype=np.int64)
        self.heard = np.zeros(num_envs, dtype=np.int64)  # 0 nothing, 1 left, 2 right
        self.mishear = noise
        super().__init__(num_envs, 0.0, seed, stack)

    def _reset_envs(self, idx: np.ndarray) -> None:
        self.tiger[idx] = self.rng.integers(0, 2, size=len(idx))
        self.heard[idx] = 0

    def _dynamics(self, action: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        action = action.astype(np.int64)
        listen = action == 0
        wrong = self.rng.random(self.num_envs) < self.mishear
        side = np.where(wrong, 1 - self.tiger, self.tiger)
        self.heard = np.where(listen, side + 1, self.heard)
        opened = action - 1  # 0 left, 1 right, -1 listen
        reward = np.where(listen, -self.LISTEN_COST, np.where(opened == self.tiger, self.WRONG, self.CORRECT))
        return reward.astype(np.float64), ~listen

    def _state(self) -> np.ndarray:
        return np.eye(2, dtype=np.float32)[self.tiger]

    def _clean_obs(self) -> np.ndarray:
        return np.eye(3, dtype=np.float32)[self.heard]


class NoisyCartPole(PartialObsVecEnv):
    """CartPole-v1 (gymnasium's vectorised physics, 500-step limit); learner sees noisy [x, theta] frames."""

    state_dim, frame_dim, n_actions, max_steps = 4, 2, 2, 500

    def __init__(self, num_envs: int, noise: float = 0.0, seed: int = 0, stack: int = 2) -> None:
        from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv

        # gymnasium's own auto-reset is next-step; we reset on the same step through its state array
        # and keep its time limit out of the way (ours is max_steps).
        self.sim = CartPoleVectorEnv(num_envs=num_envs, max_episode_steps=2**62)
        self.sim.reset(seed=seed)
        super().__init__(num_envs, noise, derive_seed(seed, "noise"), stack)

    def _reset_envs(self, idx: np.ndarray) -> None:
        self.sim.state[:, idx] = self.sim.np_random.uniform(self.sim.low, self.sim.high, size=(4, len(idx)))

    def _dynamics(self, action: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        _, reward, terminated, _, _ = self.sim.step(action.astype(np.int64))
        self.sim.prev_done[:] = False
        self.sim.steps[:] = 0
        return reward.astype(np.float64), terminated.astype(bool)

    def _state(self) -> np.ndarray:
        return self.sim.state.T.copy()

    def _clean_obs(self) -> np.ndarray:
        return self.sim.state.T[:, [0, 2]].copy()


class PendulumNoVelocity(PartialObsVecEnv):
    """Pendulum-v1 dynamics batched (g=10, m=l=1, dt=0.05, max torque 2, 200 steps); learner sees
    [cos th, sin th] + noise, guider [cos th, sin th, th']. Continuous 1-d action in [-2, 2]."""

    state_dim, frame_dim, max_steps = 3, 2, 200
    discrete, act_dim, act_high = False, 1, 2.0
    G, M, L, DT, MAX_SPEED = 10.0, 1.0, 1.0, 0.05, 8.0

    def __init__(self, num_envs: int, noise: float = 0.0, seed: int = 0, stack: int = 1) -> None:
        self.th = np.zeros(num_envs)
        self.thdot = np.zeros(num_envs)
        super().__init__(num_envs, noise, seed, stack)

    def _reset_envs(self, idx: np.ndarray) -> None:
        self.th[idx] = self.rng.uniform(-np.pi, np.pi, size=len(idx))
        self.thdot[idx] = self.rng.uniform(-1.0, 1.0, size=len(idx))

    def _dynamics(self, action: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        u = np.clip(action.reshape(self.num_envs), -self.act_high, self.act_high)
        norm_th = ((self.th + np.pi) % (2 * np.pi)) - np.pi
        cost = norm_th**2 + 0.1 * self.thdot**2 + 0.001 * u**2
        thdot = self.thdot + (3 * self.G / (2 * self.L) * np.sin(self.th) + 3.0 / (self.M * self.L**2) * u) * self.DT
        self.thdot = np.clip(thdot, -self.MAX_SPEED, self.MAX_SPEED)
        self.th = self.th + self.thdot * self.DT
        return -cost, np.zeros(self.num_envs, dtype=bool)

    def _state(self) -> np.ndarray:
        return np.stack([np.cos(self.th), np.sin(self.th), self.thdot], axis=1)

    def _clean_obs(self) -> np.ndarray:
        return np.stack([np.cos(self.th), np.sin(self.th)], axis=1)


def make_env(name: str, num_envs: int, noise: float, seed: int, stack: int | None = None) -> PartialObsVecEnv:
    """Build one of ``ENV_NAMES``; ``stack`` = frames of the learner's view (None = the env's default)."""
    classes = {"tiger-door": TigerDoor, "cartpole": NoisyCartPole, "pendulum": PendulumNoVelocity}
    if name not in classes:
        raise ValueError(f"unknown env {name!r}; choose one of {list(ENV_NAMES)}")
    kwargs = {} if stack is None else {"stack": stack}
    return classes[name](num_envs, noise=noise, seed=seed, **kwargs)
