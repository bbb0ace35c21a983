"""Entry point: ``deepspeed posttrain/train.py --algo NAME [--config run.yaml] [--key value ...]``.

Also ``python posttrain/train.py ...`` (one process) and ``posttrain train ...``.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable without installing
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from posttrain.algos import algorithm_names, get_algorithm
from posttrain.config import ConfigError, build_config, help_text


def _algo_from_argv(argv: list[str]) -> str:
    for i, token in enumerate(argv):
        if token == "--algo" and i + 1 < len(argv):
            return argv[i + 1]
        if token.startswith("--algo="):
            return token.split("=", 1)[1]
    return "grpo"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    argv = [a for a in argv if not a.startswith("--local_rank") and not a.startswith("--local-rank")]
    name = _algo_from_argv(argv)
    try:
        algo_cls = get_algorithm(name)
    except KeyError:
        print(f"error: unknown --algo {name!r}; choose one of {algorithm_names()}", file=sys.stderr)
        return 2
    if "-h" in argv or "--help" in argv:
        print(f"usage: deepspeed posttrain/train.py --algo {{{','.join(algorithm_names())}}} "
              "[--config run.yaml] [--key value ...]\n")
        print(help_text(algo_cls.config_class))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = build_config(algo_cls.config_class, argv + ["--algo", name])
        config.validate(int(os.environ.get("WORLD_SIZE", "1")))
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    from posttrain.tasks.dataset import DatasetError
    from posttrain.trainer import Trainer

    try:
        Trainer(config).fit()
    except (ConfigError, DatasetError) as err:  # user input problems: one clear line, no traceback
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
