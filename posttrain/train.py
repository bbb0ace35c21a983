"""Entry point: ``deepspeed posttrain/train.py --algo NAME [--config run.yaml] [--key value ...]``.

Also ``python posttrain/train.py ...`` (one process) and ``posttrain train ...``. The algorithm is the
``--algo`` flag, else the ``algo:`` key of the ``--config`` file, else grpo (``requested_algo``). ``main`` is
the one place that parses a run's config; ``Trainer.from_config`` validates it before anything is built, and a bad value ends the run with one line naming the field.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable without installing
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from posttrain.algos import algorithm_names, get_algorithm
from posttrain.common.memory import fix_malloc_thresholds
from posttrain.config import ConfigError, build_config, help_text, requested_algo
from posttrain.tasks.dataset import DatasetError

HELP_FLAGS = ("-h", "--help")


def _usage() -> str:
    return (f"usage: deepspeed posttrain/train.py --algo {{{','.join(algorithm_names())}}} "
            "[--config run.yaml] [--key value ...]\n"
            "       (or: posttrain train ..., python posttrain/train.py ...: one process)\n\n"
            "The algorithm is --algo, else `algo:` in the --config file, else grpo. --key value flags override "
            "the file;\nthe options below are those of the chosen algorithm (`--algo NAME --help` for another's).\n")


def main(argv: list[str] | None = None) -> int:
    fix_malloc_thresholds()  # resident memory stays flat over many steps and weight syncs (common/memory.py)
    argv = list(sys.argv[1:] if argv is None else argv)
    argv = [a for a in argv if not a.startswith("--local_rank") and not a.startswith("--local-rank")]
    wants_help = any(a in HELP_FLAGS for a in argv)
    argv = [a for a in argv if a not in HELP_FLAGS]
    try:
        name = requested_algo(argv)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        algo_cls = get_algorithm(name)
    except KeyError:
        print(f"error: unknown --algo {name!r}; choose one of {algorithm_names()}", file=sys.stderr)
        return 2
    if wants_help:
        print(_usage())
        print(help_text(algo_cls.config_class, name))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = build_config(algo_cls.config_class, argv + ["--algo", name])
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    from posttrain.trainer import (
        Trainer,  # loads DeepSpeed: only once the options parse (fast --help, parse errors)
    )

    try:
        Trainer.from_config(config).fit()
    except (ConfigError, DatasetError) as err:  # user input problems: one clear line, no traceback
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
