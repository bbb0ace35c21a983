"""Verifiable tasks (built-in and from JSONL / Hugging Face datasets) with their rewards.

``load_task(config)`` builds the task a run asks for; ``load_reward(spec, task)`` picks the reward
function: the task's own verifier, or a user's TRL-style function named "module:function" (the
module may also be a path to a ``.py`` file).
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from posttrain.tasks import (  # noqa: F401  (register the tasks)
    answer_format,
    arithmetic,
    countdown,
    dataset,
    multistep_word,
    step_arithmetic,
    sudoku,
    word_arithmetic,
    word_translation,
)
from posttrain.tasks.base import TASKS, Example, RewardFn, Task, reward_columns

if TYPE_CHECKING:
    from posttrain.config import TrainConfig

__all__ = ["TASKS", "Example", "RewardFn", "Task", "load_reward", "load_task", "reward_columns"]


def load_task(config: TrainConfig) -> Task:
    """The task named by ``config.task``; "dataset" reads ``config.dataset`` with the column options."""
    if config.task == "dataset":
        if not config.dataset:
            raise ValueError("task 'dataset' needs --dataset PATH_OR_ID")
        return dataset.DatasetTask(config.dataset, prompt_column=config.prompt_column,
                                   answer_column=config.answer_column, test_fraction=config.test_fraction,
                                   seed=config.seed, raw_prompts=config.raw_prompts,
                                   text_column=config.text_column)
    return TASKS.get(config.task)()


def _import_module(name: str) -> ModuleType:
    if name.endswith(".py"):
        path = Path(name)
        if not path.is_file():
            raise FileNotFoundError(f"reward module file {name!r} does not exist")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load reward module file {name!r}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return importlib.import_module(name)


def load_reward(spec: str | None, task: Task) -> RewardFn:
    """``task.reward`` when ``spec`` is None, else the callable named by "module:function"."""
    if spec is None:
        return task.reward
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"reward {spec!r} must look like 'package.module:function' or 'file.py:function'")
    try:
        module = _import_module(module_name)
    except (ImportError, FileNotFoundError) as err:
        raise ImportError(f"reward {spec!r}: cannot import module {module_name!r}: {err}") from err
    fn = getattr(module, attr, None)
    if fn is None or not callable(fn):
        raise ImportError(f"reward {spec!r}: module {module_name!r} has no callable {attr!r}")
    return fn
