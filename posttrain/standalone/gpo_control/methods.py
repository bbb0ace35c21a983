"""GPO and the paper's baselines (GPO, arXiv 2505.15418) on the partially observable control tasks.

| method          | behaviour      | guider trained by         | learner trained by            | critic |
|-----------------|----------------|---------------------------|-------------------------------|--------|
| ppo             | learner pi(o)  | -                         | PPO                           | V(o_l) |
| ppo-asym        | learner pi(o)  | -                         | PPO                           | V(o_g) |
| ppo-bc          | guider mu(s)   | PPO                       | imitation KL(sg mu || pi)     | V(o_g) |
| gpo-naive       | guider         | GPO-clip (double clip + backtracking) | imitation (alpha = 0) | V(o_g) |
| gpo-clip        | guider         | GPO-clip                  | imitation - alpha L4 (alpha 2)| V(o_g) |
| gpo-penalty     | guider         | PPO + alpha KL(mu || sg pi) | imitation - alpha L4, adaptive alpha | V(o_g) |
| oracle          | guider         | PPO (full state)          | - (the guider is evaluated)   | V(o_g) |
| teacher-student | learner        | pre-trained oracle, frozen | DAgger: KL(teacher || pi) on the learner's states | - |

Every method except the oracle is evaluated through the **learner** alone, deterministically (argmax or
Gaussian mean), on fresh episodes. The entropy bonus is taken from the *current* behaviour role's
distribution, which avoids the official ``GPO.py``'s no-op entropy. Time-limit truncation
is bootstrapped with the critic.

CPU-scale deviations from GPO.py: 2 x 64 networks (code 2 x 128), 8 environments (code 2048), and
about 1e5 steps (code 30M), hence a larger learning rate (1e-3; code 3e-4) on TigerDoor and CartPole.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from posttrain.algos.core import clipped_surrogate
from posttrain.algos.gpo import core
from posttrain.common.seeds import derive_seed
from posttrain.standalone.gpo_control.envs import PartialObsVecEnv, make_env
from posttrain.standalone.gpo_control.ppo import Dist, Inputs, Policy, gae, mlp, normalise

METHODS = ("ppo", "ppo-asym", "ppo-bc", "gpo-naive", "gpo-clip", "gpo-penalty", "oracle", "teacher-student")


@dataclass(frozen=True)
class MethodSpec:
    act: str  # behaviour role: "guider" | "learner"
    critic: str  # critic input: "guider" (o_g) | "learner" (o_l)
    guider: str | None  # None | "ppo" | "clip" | "penalty"
    learner: str | None  # None | "ppo" | "imitate" | "clip" | "penalty"
    eval: str  # role that is evaluated


SPECS = {
    "ppo": MethodSpec("learner", "learner", None, "ppo", "learner"),
    "ppo-asym": MethodSpec("learner", "guider", None, "ppo", "learner"),
    "ppo-bc": MethodSpec("guider", "guider", "ppo", "imitate", "learner"),
    "gpo-naive": MethodSpec("guider", "guider", "clip", "imitate", "learner"),
    "gpo-clip": MethodSpec("guider", "guider", "clip", "clip", "learner"),
    "gpo-penalty": MethodSpec("guider", "guider", "penalty", "penalty", "learner"),
    "oracle": MethodSpec("guider", "guider", "ppo", None, "guider"),
}

# Per-environment defaults (CPU scale; the official code's Brax scripts run 2048 envs for 30M steps).
ENV_DEFAULTS = {
    "tiger-door": {"num_envs": 32, "rollout_len": 8, "steps": 16_384, "lr": 1e-3, "reward_scale": 1.0, "gamma": 0.99,
                   "eval_episodes": 64},
    "cartpole": {"num_envs": 8, "rollout_len": 128, "steps": 100_000, "lr": 1e-3, "reward_scale": 1.0, "gamma": 0.99,
                 "eval_episodes": 16},
    "pendulum": {"num_envs": 8, "rollout_len": 200, "steps": 300_000, "lr": 3e-4, "reward_scale": 0.1, "gamma": 0.99,
                 "eval_episodes": 16},
}


@dataclass
class ControlConfig:
    """One control run. ``None`` fields take the environment's default from ENV_DEFAULTS; the GPO
    coefficients default to the paper's code (core.py)."""

    env: str = "cartpole"
    method: str = "gpo-clip"
    noise: float = 0.0
    seed: int = 0
    steps: int | None = None
    num_envs: int | None = None
    rollout_len: int | None = None
    epochs: int = 4
    minibatches: int = 4
    lr: float | None = None
    gamma: float | None = None
    lam: float = 0.95
    reward_scale: float | None = None
    ppo_clip: float = core.PPO_CLIP
    inner_clip: float = core.INNER_CLIP
    alpha: float = core.GPO_CLIP_ALPHA
    target_kl: float = core.PENALTY_TARGET_KL
    ent_coef: float = 0.01
    vf_coef: float = 0.25
    max_grad_norm: float = 1.0
    hidden: int = 64
    stack: int | None = None
    num_evals: int = 10
    eval_episodes: int | None = None
    teacher_steps: int | None = None

    def resolved(self) -> ControlConfig:
        if self.method not in METHODS:
            raise ValueError(f"unknown method {self.method!r}; choose one of {list(METHODS)}")
        if self.env not in ENV_DEFAULTS:
            raise ValueError(f"unknown env {self.env!r}; choose one of {list(ENV_DEFAULTS)}")
        c = copy.copy(self)
        for k, v in ENV_DEFAULTS[self.env].items():
            if getattr(c, k) is None:
                setattr(c, k, v)
        if c.steps < c.num_envs * c.rollout_len:
            raise ValueError(f"steps={c.steps} is less than one rollout (num_envs x rollout_len = {c.num_envs * c.rollout_len})")
        if c.minibatches < 1 or (c.num_envs * c.rollout_len) % c.minibatches:
            raise ValueError(f"minibatches={c.minibatches} must divide num_envs x rollout_len = {c.num_envs * c.rollout_len}")
        return c


class Agent:
    """Policy (shared guider/learner), critic, input builder and optimiser of one run."""

    def __init__(self, cfg: ControlConfig, env: PartialObsVecEnv, seed: int) -> None:
        self.inputs = Inputs(env.state_dim, env.obs_dim)
        self.dist = Dist(env.discrete)
        n_out = env.n_actions if env.discrete else env.act_dim
        with torch.random.fork_rng(devices=[]):  # seeded init without touching the caller's global RNG
            torch.manual_seed(seed)
            self.policy = Policy(self.inputs.dim, env.discrete, n_out, cfg.hidden)
            self.value = mlp(self.inputs.dim, 1, cfg.hidden)
        self.opt = torch.optim.Adam([*self.policy.parameters(), *self.value.parameters()], lr=cfg.lr)

    def role_input(self, role: str, state: np.ndarray, obs: np.ndarray) -> torch.Tensor:
        return self.inputs.guider(state, obs) if role == "guider" else self.inputs.learner(obs)

    def state_dict(self) -> dict:
        return {"policy": self.policy.state_dict(), "value": self.value.state_dict(), "inputs": self.inputs.state_dict()}

    def load_state_dict(self, d: dict) -> None:
        self.policy.load_state_dict(d["policy"])
        self.value.load_state_dict(d["value"])
        self.inputs.load_state_dict(d["inputs"])


@torch.no_grad()
def evaluate(agent: Agent, role: str, env: PartialObsVecEnv) -> float:
    """Mean return of one deterministic episode per evaluation environment, acting as ``role``."""
    state, obs = env.reset()
    returns, running = np.full(env.num_envs, np.nan), np.zeros(env.num_envs)
    while np.isnan(returns).any():
        action = agent.dist.mode(agent.policy(agent.role_input(role, state, obs)))
        res = env.step(agent.dist.to_env(action, env.act_high))
        running += res.reward
        fresh = (res.terminated | res.truncated) & np.isnan(returns)
        returns[fresh] = running[fresh]
        state, obs = res.state, res.obs
    return float(returns.mean())


def _collect(agent: Agent, cfg: ControlConfig, spec: MethodSpec, env, carry, gen, episode_returns: list) -> dict:
    """One rollout of ``rollout_len`` steps with the behaviour role; returns the flattened batch."""
    state, obs = carry["state"], carry["obs"]
    T, N = cfg.rollout_len, cfg.num_envs
    buf = {k: [] for k in ("gi", "li", "ci", "act", "logp", "val", "rew", "done")}
    with torch.no_grad():
        for _ in range(T):
            agent.inputs.update(state, obs)
            gi, li = agent.inputs.guider(state, obs), agent.inputs.learner(obs)
            ci = gi if spec.critic == "guider" else li
            out = agent.policy(gi if spec.act == "guider" else li)
            action = agent.dist.sample(out, gen)
            res = env.step(agent.dist.to_env(action, env.act_high))
            reward = torch.from_numpy(res.reward) * cfg.reward_scale
            if res.truncated.any():  # bootstrap time limits with the critic on the pre-reset input
                fin = agent.role_input(spec.critic, res.final_state, res.final_obs)
                reward = reward + cfg.gamma * agent.value(fin)[:, 0] * torch.from_numpy(res.truncated).float()
            for k, v in (("gi", gi), ("li", li), ("ci", ci), ("act", action), ("logp", agent.dist.log_prob(out, action)),
                         ("val", agent.value(ci)[:, 0]), ("rew", reward),
                         ("done", torch.from_numpy(res.terminated | res.truncated).float())):
                buf[k].append(v)
            episode_returns.extend(res.episode_returns.tolist())
            state, obs = res.state, res.obs
        last_ci = agent.role_input(spec.critic, state, obs)
        last_value = agent.value(last_ci)[:, 0]
    carry["state"], carry["obs"] = state, obs
    b = {k: torch.stack(v) for k, v in buf.items()}
    adv, ret = gae(b["rew"], b["val"], b["done"], last_value, cfg.gamma, cfg.lam)
    flat = {k: v.reshape(T * N, *v.shape[2:]) for k, v in b.items()}
    flat["adv"], flat["ret"] = adv.reshape(-1), ret.reshape(-1)
    return flat


def _minibatch_loss(agent: Agent, cfg: ControlConfig, spec: MethodSpec, mb: dict, alpha: float) -> tuple[torch.Tensor, dict]:
    """The total loss of one minibatch: learner + guider + vf_coef * value MSE - ent_coef * entropy."""
    dist, adv, beta, act = agent.dist, normalise(mb["adv"]), mb["logp"], mb["act"]
    coefs = core.GPOCoefs(ppo_clip=cfg.ppo_clip, inner_clip=cfg.inner_clip, alpha=cfg.alpha, target_kl=cfg.target_kl)
    g_out = agent.policy(mb["gi"]) if spec.guider else None
    l_out = agent.policy(mb["li"]) if spec.learner else None
    metrics: dict[str, float] = {}
    if spec.guider and spec.learner:  # co-trained guider and learner
        g_logp, l_logp = dist.log_prob(g_out, act), dist.log_prob(l_out, act)
        kl_g, kl_l = dist.kl(g_out, l_out.detach()), dist.kl(g_out.detach(), l_out)
        if spec.guider == "clip":
            coefs = dataclasses.replace(coefs, alpha=0.0 if spec.learner == "imitate" else cfg.alpha)
            g_loss, l_loss, info = core.gpo_clip_losses(g_logp, l_logp, beta, adv, kl_g, kl_l, coefs)
            metrics["mask_frac"] = info["mask"].mean().item()
        elif spec.guider == "penalty":
            g_loss, l_loss, _ = core.gpo_penalty_losses(g_logp, l_logp, beta, adv, kl_g, kl_l, alpha, coefs)
        else:  # ppo-bc: unconstrained PPO guider, imitation learner
            g_loss = core.guider_ppo_loss(g_logp, beta, adv, cfg.ppo_clip)[0]
            l_loss = core.learner_imitation_loss(kl_l)
        loss = g_loss.mean() + l_loss.mean()
        metrics["kl"] = kl_g.mean().item()
    elif spec.guider:  # oracle
        loss = core.guider_ppo_loss(dist.log_prob(g_out, act), beta, adv, cfg.ppo_clip)[0].mean()
    else:  # ppo / ppo-asym on the learner
        loss = clipped_surrogate(dist.log_prob(l_out, act), beta, adv, cfg.ppo_clip, cfg.ppo_clip)[0].mean()
    behaviour_out = g_out if spec.act == "guider" else l_out
    entropy = dist.entropy(behaviour_out).mean()
    v_loss = ((agent.value(mb["ci"])[:, 0] - mb["ret"]) ** 2).mean()
    return loss + cfg.vf_coef * v_loss - cfg.ent_coef * entropy, metrics


def _progress(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="step", disable=not enabled, dynamic_ncols=True, leave=False)


def _eval_points(updates: int, num_evals: int) -> set[int]:
    return {round(updates * (i + 1) / num_evals) for i in range(num_evals)}


def train(cfg: ControlConfig, progress: bool = False, teacher: dict | None = None) -> tuple[dict, dict]:
    """Run one method; returns (result with the learning curve, agent state_dict).

    ``teacher`` (teacher-student only): an oracle's state_dict; when None the oracle is trained first
    for ``teacher_steps`` (default ``steps``) steps that are not counted on the curve.
    """
    cfg = cfg.resolved()
    if cfg.method == "teacher-student":
        return _train_teacher_student(cfg, progress, teacher)
    spec = SPECS[cfg.method]
    env = make_env(cfg.env, cfg.num_envs, cfg.noise, cfg.seed, cfg.stack)
    eval_env = make_env(cfg.env, cfg.eval_episodes, cfg.noise, derive_seed(cfg.seed, "eval"), cfg.stack)
    agent = Agent(cfg, env, cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    state, obs = env.reset()
    carry = {"state": state, "obs": obs}
    batch = cfg.num_envs * cfg.rollout_len
    updates, mb_size = cfg.steps // batch, batch // cfg.minibatches
    evals, history, alpha, ep_returns = _eval_points(updates, cfg.num_evals), [], 0.0, []
    bar = _progress(updates * batch, f"{cfg.env}/{cfg.method}/s{cfg.seed}", progress)
    for u in range(1, updates + 1):
        flat = _collect(agent, cfg, spec, env, carry, gen, ep_returns)
        kls, masks = [], []
        for _ in range(cfg.epochs):
            perm = torch.randperm(batch, generator=gen)
            epoch_kl = []
            for i in range(cfg.minibatches):
                idx = perm[i * mb_size : (i + 1) * mb_size]
                loss, m = _minibatch_loss(agent, cfg, spec, {k: v[idx] for k, v in flat.items()}, alpha)
                agent.opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_([*agent.policy.parameters(), *agent.value.parameters()], cfg.max_grad_norm)
                agent.opt.step()
                if "kl" in m:
                    epoch_kl.append(m["kl"])
                if "mask_frac" in m:
                    masks.append(m["mask_frac"])
            if epoch_kl:
                kls.append(float(np.mean(epoch_kl)))
                if spec.guider == "penalty":  # once per epoch, from the mean KL(mu || pi) over minibatches
                    alpha = core.update_penalty_alpha(alpha, kls[-1], cfg.target_kl)
        bar.update(batch)
        if u in evals:
            point = {
                "env_steps": u * batch,
                "eval_return": evaluate(agent, spec.eval, eval_env),
                "behaviour_return": float(np.mean(ep_returns[-50:])) if ep_returns else float("nan"),
                "kl_guider_learner": float(np.mean(kls)) if kls else None,
                "backtrack_mask_frac": float(np.mean(masks)) if masks else None,
                "alpha": alpha if spec.guider == "penalty" else None,
            }
            history.append(point)
            bar.set_postfix(eval=f"{point['eval_return']:.2f}")
    bar.close()
    return _result(cfg, history, agent, spec.eval), agent.state_dict()


@torch.no_grad()
def _first_action_probs(agent: Agent, role: str) -> list[list[float]]:
    """TigerDoor: the role's action probabilities (listen, open left, open right) before listening,
    one row per tiger side (identical rows for the learner, which cannot see the side)."""
    state = np.eye(2, dtype=np.float32)
    obs = np.tile(np.eye(3, dtype=np.float32)[:1], (2, 1))
    return torch.softmax(agent.policy(agent.role_input(role, state, obs)), -1).tolist()


def _result(cfg: ControlConfig, history: list[dict], agent: Agent, role: str) -> dict:
    out = {"config": dataclasses.asdict(cfg), "history": history,
           "final_return": history[-1]["eval_return"] if history else float("nan")}
    if cfg.env == "tiger-door":
        out["first_action_probs"] = _first_action_probs(agent, role)
    return out


def _train_teacher_student(cfg: ControlConfig, progress: bool, teacher: dict | None) -> tuple[dict, dict]:
    """Teacher-student distillation: a frozen full-state oracle labels the learner's own states (DAgger,
    all-student roll-in) and the learner minimises KL(teacher(.|s) || pi(.|o)) over full distributions."""
    if teacher is None:
        tcfg = dataclasses.replace(cfg, method="oracle", steps=cfg.teacher_steps or cfg.steps)
        teacher = train(tcfg, progress)[1]
    env = make_env(cfg.env, cfg.num_envs, cfg.noise, cfg.seed, cfg.stack)
    eval_env = make_env(cfg.env, cfg.eval_episodes, cfg.noise, derive_seed(cfg.seed, "eval"), cfg.stack)
    t_agent, student = Agent(cfg, env, cfg.seed), Agent(cfg, env, derive_seed(cfg.seed, "student"))
    t_agent.load_state_dict(teacher)  # frozen teacher, frozen normaliser
    student.inputs.load_state_dict(teacher["inputs"])
    gen = torch.Generator().manual_seed(cfg.seed)
    state, obs = env.reset()
    batch = cfg.num_envs * cfg.rollout_len
    updates, mb_size = cfg.steps // batch, batch // cfg.minibatches
    evals, history = _eval_points(updates, cfg.num_evals), []
    bar = _progress(updates * batch, f"{cfg.env}/teacher-student/s{cfg.seed}", progress)
    for u in range(1, updates + 1):
        li, target = [], []
        with torch.no_grad():
            for _ in range(cfg.rollout_len):
                student.inputs.update(state, obs)
                x = student.inputs.learner(obs)
                target.append(t_agent.policy(t_agent.inputs.guider(state, obs)))
                li.append(x)
                action = student.dist.sample(student.policy(x), gen)
                res = env.step(student.dist.to_env(action, env.act_high))
                state, obs = res.state, res.obs
        li_t, target_t = torch.cat(li), torch.cat(target)
        for _ in range(cfg.epochs):
            perm = torch.randperm(batch, generator=gen)
            for i in range(cfg.minibatches):
                idx = perm[i * mb_size : (i + 1) * mb_size]
                loss = core.learner_imitation_loss(student.dist.kl(target_t[idx], student.policy(li_t[idx]))).mean()
                student.opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(student.policy.parameters(), cfg.max_grad_norm)
                student.opt.step()
        bar.update(batch)
        if u in evals:
            history.append({"env_steps": u * batch, "eval_return": evaluate(student, "learner", eval_env),
                            "teacher_return": evaluate(t_agent, "guider", eval_env)})
            bar.set_postfix(eval=f"{history[-1]['eval_return']:.2f}")
    bar.close()
    return _result(cfg, history, student, "learner"), student.state_dict()
