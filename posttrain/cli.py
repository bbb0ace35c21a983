"""The ``posttrain`` command: train | tiny | data | serve | rollout-worker | gpo-control | dupo-rerank |
prefix-cluster | text2grad-eval | vision.

Each subcommand forwards its arguments to the module that owns it, so ``posttrain train ...`` and
``deepspeed posttrain/train.py ...`` parse exactly the same options.
"""

from __future__ import annotations

import importlib
import sys

# subcommand -> ("module:function taking argv and returning an exit code", one-line description); a description's
# "{subcommands}" is filled with the names of the owning module's own SUBCOMMANDS, so it cannot go stale
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "train": ("posttrain.train:main", "post-train a model (one process; use `deepspeed posttrain/train.py` for ranks)"),
    "tiny": ("posttrain.models.tiny:tiny_main", "build or list the embedded tiny models"),
    "data": ("data_pipelines.cli:data_main", "run a data pipeline ({subcommands})"),
    "serve": ("rewards.server.cli:serve_main", "serve a reward model and an OpenAI-compatible API"),
    "rollout-worker": ("posttrain.engines.worker:rollout_worker_main",
                       "a vLLM rollout worker that --rollout vllm-remote trainers sync"),
    "gpo-control": ("posttrain.standalone.gpo_control.cli:gpo_control_main", "GPO in partially observable control"),
    "dupo-rerank": ("posttrain.algos.dupo.rerank_cli:dupo_rerank_main",
                    "best-of-N by DuPO's backward accuracy (dual questions, no labels)"),
    "prefix-cluster": ("posttrain.algos.prefix_rl.cluster_cli:prefix_cluster_main",
                       "Prefix Clustering: one fixed opening, found by k-means on a target's prefixes"),
    "text2grad-eval": ("rewards.text2grad.evaluate:text2grad_eval_main",
                       "span precision / recall of a Text2Grad span reward model against program labels"),
    "vision": ("posttrain.standalone.vision.cli:vision_main", "vision methods: attwarp | deleaker | fga (the vision extra)"),
}


def describe(command: str) -> str:
    """The one-line description of ``command``, with its own subcommands named where it says ``{subcommands}``
    (read from its module, imported only then: the data CLI's module imports no pipeline at its top)."""
    target, description = SUBCOMMANDS[command]
    if "{subcommands}" not in description:
        return description
    names = importlib.import_module(target.split(":")[0]).SUBCOMMANDS
    return description.replace("{subcommands}", ", ".join(names))


def _usage() -> str:
    lines = ["usage: posttrain <command> [options]   (posttrain <command> --help for its options)", "", "commands:"]
    width = max(map(len, SUBCOMMANDS)) + 2
    lines += [f"  {name:<{width}}{describe(name)}" for name in SUBCOMMANDS]
    lines += ["", "examples:",
              "  posttrain train --algo espo          ESPO on the embedded tiny diffusion model (Sudoku), on CPU",
              "  posttrain train --algo grpo --help   every option of an algorithm, its default and meaning",
              "  deepspeed --num_gpus 2 posttrain/train.py --algo grpo   the same trainer on 2 ranks",
              "", "Architecture and contracts: docs/ARCHITECTURE.md"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command not in SUBCOMMANDS:
        print(f"error: unknown command {command!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module_name, function_name = SUBCOMMANDS[command][0].split(":")
    return int(getattr(importlib.import_module(module_name), function_name)(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
