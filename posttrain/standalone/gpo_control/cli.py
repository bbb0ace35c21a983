"""``posttrain gpo-control``: GPO and its baselines on partially observable control tasks.

Example::

    posttrain gpo-control --env cartpole --method gpo-clip --noise 0.1 --seed 0 --out runs/gpo-cp
    posttrain gpo-control --env tiger-door --method teacher-student --steps 10000

Writes ``result.json`` (config, learning curve, final learner return) and ``model.pt`` under ``--out``;
an oracle's ``model.pt`` can be passed to ``--teacher`` of a teacher-student run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from posttrain.algos.gpo import core
from posttrain.common.cli_help import CommandParser
from posttrain.common.files import atomic_write_text
from posttrain.standalone.gpo_control.envs import ENV_NAMES
from posttrain.standalone.gpo_control.methods import ENV_DEFAULTS, METHODS, ControlConfig


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(
        prog="posttrain gpo-control",
        description="Guided Policy Optimization (guider sees the full state, learner the noisy partial "
        "observation) and the paper's baselines on vectorised gymnasium-style control tasks.",
    )
    p.add_argument("--env", choices=ENV_NAMES, default="cartpole",
                   help="tiger-door (didactic), cartpole (noisy positions only), pendulum (no velocity).")
    p.add_argument("--method", choices=METHODS, default="gpo-clip",
                   help="gpo-clip, gpo-penalty, gpo-naive (GPO variants); ppo, ppo-asym (critic sees the state), "
                   "ppo-bc, teacher-student (baselines); oracle (PPO on the full state).")
    p.add_argument("--noise", type=float, default=0.0,
                   help="Std of the Gaussian noise on the learner's view (tiger-door: mishearing probability).")
    p.add_argument("--seed", type=int, default=0, help="Seed of envs, initialisation and sampling.")
    p.add_argument("--steps", type=int, default=None,
                   help="Environment steps to train (default per env: "
                   + ", ".join(f"{k} {v['steps']}" for k, v in ENV_DEFAULTS.items()) + ").")
    p.add_argument("--num_envs", type=int, default=None, help="Parallel (vectorised) environments (default per env).")
    p.add_argument("--rollout_len", type=int, default=None, help="Steps per environment per update (default per env).")
    p.add_argument("--lr", type=float, default=None, help="Adam learning rate (default per env; code: 3e-4).")
    p.add_argument("--stack", type=int, default=None, help="Frames in the learner's view (cartpole default 2).")
    p.add_argument("--ppo_clip", type=float, default=core.PPO_CLIP, help="PPO clip epsilon (code: 0.3).")
    p.add_argument("--inner_clip", type=float, default=core.INNER_CLIP, help="GPO-clip's delta (code: 0.1-0.3).")
    p.add_argument("--alpha", type=float, default=core.GPO_CLIP_ALPHA, help="GPO-clip's fixed learner RL weight.")
    p.add_argument("--target_kl", type=float, default=core.PENALTY_TARGET_KL, help="GPO-penalty's d_targ.")
    p.add_argument("--ent_coef", type=float, default=0.01, help="Entropy bonus on the behaviour policy.")
    p.add_argument("--num_evals", type=int, default=10, help="Evaluations of the learner during training.")
    p.add_argument("--eval_episodes", type=int, default=None, help="Deterministic episodes per evaluation (default per env).")
    p.add_argument("--teacher", default=None, help="teacher-student: an oracle's model.pt (else one is trained).")
    p.add_argument("--out", default=None, help="Folder for result.json and model.pt (optional).")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads.")
    p.add_argument("--no_progress", action="store_true", help="Hide the progress bar.")
    return p


def gpo_control_main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import torch

    from posttrain.standalone.gpo_control.methods import train

    torch.set_num_threads(args.threads)
    cfg = ControlConfig(
        env=args.env, method=args.method, noise=args.noise, seed=args.seed, steps=args.steps,
        num_envs=args.num_envs, rollout_len=args.rollout_len, lr=args.lr, stack=args.stack,
        ppo_clip=args.ppo_clip, inner_clip=args.inner_clip, alpha=args.alpha, target_kl=args.target_kl,
        ent_coef=args.ent_coef, num_evals=args.num_evals, eval_episodes=args.eval_episodes,
    )
    try:
        cfg = cfg.resolved()
    except ValueError as e:
        build_parser().error(str(e))
    teacher = None
    if args.teacher:
        if args.method != "teacher-student":
            build_parser().error("--teacher is only used by --method teacher-student")
        teacher = torch.load(args.teacher, weights_only=False)
    result, state = train(cfg, progress=not args.no_progress, teacher=teacher)
    role = "guider (full state)" if args.method == "oracle" else "learner"
    print(f"{args.env} {args.method} noise={args.noise} seed={args.seed}: final {role} return "
          f"{result['final_return']:.3f} after {result['history'][-1]['env_steps']} steps")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / "result.json", json.dumps(result, indent=1))
        torch.save(state, out / "model.pt")
    return 0


if __name__ == "__main__":
    raise SystemExit(gpo_control_main())
