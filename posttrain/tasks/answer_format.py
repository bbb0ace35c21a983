"""Answer format: arithmetic whose accuracy depends on how the answer opens, and the best opening on the input.

The embedded default of ``--algo prefix-rl`` and ``posttrain prefix-cluster`` (Prefix-RL and Prefix Clustering,
"Parameter-Efficient Reinforcement Learning using Prefix Optimization", ICLR 2026; its CPU-scale plan: a
synthetic task whose accuracy depends on the answer's format, with an input-dependent best format).

Two kinds of problem, as many of each: ``short`` (``n+1=`` with a number of 2-3 digits, ``47+1=``) and ``long``
(5 digits, ``40871+1=``). Two answer formats, whose markers share their first ``len(SHARED_OPENING)`` = 6
tokens (the tokenizer is character level) and part at the 7th, so a prefix must be at least 7 tokens long to
choose one:

- direct: ``Answer: 48``;
- worked: ``Answer by steps: 47+1 so 48`` (the problem restated, then the result).

The reward (and ``is_correct``) reads the last integer of the completion, whatever its format: 1.0 when it
equals the answer, else 0.0.

``answer-format-sft`` is the tiny models' warm-start data (``posttrain.algos.warm_start.sft_task_warm_start``): every
training problem once in each format, so a model trained on it opens either way on any input (its format is
never conditioned on the problem). Each format carries a systematic error on one kind of problem, the kind of
mistake SFT on noisy traces leaves: stated directly, a ``long`` number comes back unchanged (the +1 dropped,
``LONG_DIRECT_ERROR``); worked, a ``short`` one is counted one step too far (``SHORT_WORKED_ERROR``). So the
direct opening is reliable on ``short`` problems and the worked one on ``long`` ones: a model that picks its
format at random is right about half the time, a fixed opening helps one kind and hurts the other (the paper's
"clustering hurts Qwen" effect), and an opening chosen per input wins on both.
"""

from __future__ import annotations

import random
import re
from typing import Any

from posttrain.tasks.base import TASKS, Example, head_tail_split
from posttrain.tasks.verifiers import math_equal

SHARED_OPENING = "Answer"
"""The tokens both formats open with."""
DIRECT_OPENING = "Answer: "
"""The direct format's marker (8 tokens)."""
WORKED_OPENING = "Answer by steps: "
"""The worked format's marker (17 tokens)."""
LONG_DIRECT_ERROR = -1
"""How far off the warm start's direct answers of ``long`` problems are."""
SHORT_WORKED_ERROR = 1
"""How far off the warm start's worked answers of ``short`` problems are."""
KINDS = ("short", "long")
NUMBERS = {"short": range(10, 1000), "long": range(10_000, 100_000)}
"""The numbers of each kind of problem (2-3 and 5 digits)."""
_LAST_INTEGER = re.compile(r"[+-]?\d+(?!.*\d)", re.DOTALL)


def direct_answer(value: int) -> str:
    """``direct_answer(48) == "Answer: 48"``."""
    return f"{DIRECT_OPENING}{value}"


def worked_answer(number: int, value: int) -> str:
    """``worked_answer(47, 48) == "Answer by steps: 47+1 so 48"``."""
    return f"{WORKED_OPENING}{number}+1 so {value}"


def final_integer(completion: str) -> str | None:
    """The last integer written in ``completion`` (``"Answer by steps: 47+1 so 48"`` -> ``"48"``), or None."""
    match = _LAST_INTEGER.search(completion)
    return match.group(0) if match else None


@TASKS.register("answer-format")
class AnswerFormatTask:
    """``short`` and ``long`` successor problems, interleaved, so every split holds as many of each."""

    name = "answer-format"

    def __init__(self, per_kind: int = 400, test_size: int = 128, seed: int = 1234) -> None:
        self.per_kind, self.test_size, self.seed = per_kind, test_size, seed

    def _all(self) -> list[Example]:
        rng = random.Random(self.seed)
        short, long = (rng.sample(NUMBERS[kind], self.per_kind) for kind in KINDS)
        examples = []
        for pair in zip(short, long, strict=True):
            for kind, number in zip(KINDS, pair):
                examples.append(Example(prompt=f"{number}+1=", answer=str(number + 1),
                                        columns={"kind": kind, "number": number}))
        return examples

    def split(self, name: str) -> list[Example]:
        """``test``: the first ``test_size`` problems (half of each kind); ``train``: all the others."""
        return head_tail_split(self._all(), name, self.test_size, self.name)

    def reward(self, prompts: list[str], completions: list[str], **columns: list[Any]) -> list[float | None]:
        """1.0 when the completion's last integer equals ``columns['answer']``, else 0.0."""
        return [float(self._right(c, a)) for c, a in zip(completions, columns["answer"], strict=True)]

    def is_correct(self, completion: str, example: Example) -> bool:
        return self._right(completion, example.answer)

    @staticmethod
    def _right(completion: str, answer: str) -> bool:
        final = final_integer(completion)
        return final is not None and math_equal(final, answer)


@TASKS.register("answer-format-sft")
class AnswerFormatSFTTask(AnswerFormatTask):
    """The warm-start data: every ``answer-format`` training problem once per format, the target (``answer``)
    being the formatted text, with each format's systematic error on its unreliable kind of problem."""

    name = "answer-format-sft"

    def split(self, name: str) -> list[Example]:
        examples = []
        for example in super().split(name):
            number, value, kind = example.columns["number"], int(example.answer), example.columns["kind"]
            direct = value + (LONG_DIRECT_ERROR if kind == "long" else 0)
            worked = value + (SHORT_WORKED_ERROR if kind == "short" else 0)
            for fmt, text in (("direct", direct_answer(direct)), ("worked", worked_answer(number, worked))):
                examples.append(Example(prompt=example.prompt, answer=text, columns={**example.columns, "format": fmt}))
        return examples
