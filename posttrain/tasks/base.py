"""The Task contract: fixed train/test splits of examples plus a TRL-style reward function.

A reward function has TRL's signature, ``fn(prompts, completions, **columns) -> list[float | None]``,
where ``columns`` holds one list per dataset column (``answer`` always among them). ``None`` marks a
sample whose reward could not be computed; the trainer masks it out of the loss. A reward function may also
report metrics of its calls (``ReportsRewardMetrics``), which join the step's metrics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from posttrain.common.registry import Registry

RewardFn = Callable[..., list[float | None]]


@runtime_checkable
class ReportsRewardMetrics(Protocol):
    """A reward function that also reports metrics of its calls, e.g. the reward server's client
    (``rewards.remote``) its share of unreadable verdicts (``reward/parse_fail_rate``)."""

    def pop_metrics(self) -> dict[str, float]:
        """The metrics of the calls since the last ``pop_metrics`` (named as step metrics, ``reward/...``),
        then forgets them; empty when there is nothing to report."""
        ...


@dataclass(frozen=True)
class Example:
    """One prompt with its reference answer and any extra dataset columns."""

    prompt: str
    answer: str
    columns: dict[str, Any] = field(default_factory=dict)


class Task(Protocol):
    """A verifiable task. ``split`` is deterministic: the same name gives the same examples."""

    name: str

    def split(self, name: str) -> list[Example]: ...

    def reward(self, prompts: list[str], completions: list[str], **columns: list[Any]) -> list[float | None]: ...

    def is_correct(self, completion: str, example: Example) -> bool: ...


TASKS: Registry[Callable[..., Task]] = Registry("task")


def reward_columns(examples: list[Example]) -> dict[str, list[Any]]:
    """Columns for a reward call: ``answer`` plus every extra column, one list entry per example."""
    columns: dict[str, list[Any]] = {"answer": [e.answer for e in examples]}
    for key in sorted({k for e in examples for k in e.columns}):
        columns[key] = [e.columns.get(key) for e in examples]
    return columns


def head_tail_split(examples: list[Example], name: str, test_size: int, task_name: str) -> list[Example]:
    """The built-in tasks' fixed split of a deterministic list: ``test`` is the first ``test_size``
    examples, ``train`` all the others."""
    if name == "test":
        return examples[:test_size]
    if name == "train":
        return examples[test_size:]
    raise ValueError(f"task {task_name!r} has splits 'train' and 'test', not {name!r}")
