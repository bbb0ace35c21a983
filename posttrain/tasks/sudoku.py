"""Sudoku 4x4: fill the blanks of a 16-character grid (row by row, ``.`` = blank) with digits 1-4.

The prompt is the puzzle itself (``1.3.34.2..4.4.21``); the reference answer is the solution it was
made from, and the puzzle travels in the ``puzzle`` column. A completion (whitespace ignored) is
*correct* when it is a valid full grid that keeps every given digit: any valid solution counts, not
only the reference.

Reward (``SudokuTask.reward``): 1.0 for a correct grid; otherwise, by default, ESPO's dense Sudoku
reward (Ou et al. 2025, taken from d1): the fraction of the puzzle's blank cells whose digit equals the
reference's, reading the completion's first 16 non-space characters as the grid. With
``dense_reward=False`` anything but a correct grid scores 0.0.
"""

from __future__ import annotations

import random
from typing import Any

from posttrain.tasks.base import TASKS, Example, head_tail_split

SIZE = 4
_DIGITS = "1234"
UNITS: tuple[tuple[int, ...], ...] = (
    tuple(tuple(r * SIZE + c for c in range(SIZE)) for r in range(SIZE))
    + tuple(tuple(r * SIZE + c for r in range(SIZE)) for c in range(SIZE))
    + tuple(tuple((br + r) * SIZE + bc + c for r in range(2) for c in range(2))
            for br in (0, 2) for bc in (0, 2))
)
"""The 12 index sets (4 rows, 4 columns, 4 boxes) that must each hold 1-4 once."""


def parse_grid(text: str) -> str | None:
    """The 16 digits of ``text`` with whitespace removed, or None unless exactly 16 characters of 1-4."""
    grid = "".join(text.split())
    return grid if len(grid) == SIZE * SIZE and all(ch in _DIGITS for ch in grid) else None


def valid_units(grid: str) -> int:
    """How many of the 12 units of a full 16-digit ``grid`` hold each of 1-4 exactly once."""
    return sum(sorted(grid[i] for i in unit) == list(_DIGITS) for unit in UNITS)


def consistent(grid: str, puzzle: str) -> bool:
    """True when ``grid`` keeps every given (non-``.``) digit of ``puzzle``."""
    return len(grid) == len(puzzle) and all(p == "." or p == g for p, g in zip(puzzle, grid))


def is_solution(completion: str, puzzle: str) -> bool:
    """True when ``completion`` is a valid full grid that keeps every given digit of ``puzzle``."""
    grid = parse_grid(completion)
    return grid is not None and consistent(grid, puzzle) and valid_units(grid) == len(UNITS)


def blank_cell_accuracy(completion: str, puzzle: str, answer: str) -> float:
    """Fraction of ``puzzle``'s blank cells that ``completion`` (first 16 non-space characters) fills
    with ``answer``'s digit: ESPO's / d1's Sudoku reward."""
    grid = "".join(completion.split())[: SIZE * SIZE]
    blanks = [i for i, ch in enumerate(puzzle) if ch == "."]
    return sum(i < len(grid) and grid[i] == answer[i] for i in blanks) / max(1, len(blanks))


def score_grid(completion: str, puzzle: str, answer: str, dense: bool = True) -> float:
    """1.0 for a valid solution of ``puzzle``; else ``blank_cell_accuracy`` if ``dense``, else 0.0."""
    if is_solution(completion, puzzle):
        return 1.0
    return blank_cell_accuracy(completion, puzzle, answer) if dense else 0.0


def all_solutions() -> list[str]:
    """Every valid 4x4 grid (288 of them), in lexicographic order."""
    solutions: list[str] = []

    def fill(cells: list[str]) -> None:
        index = len(cells)
        if index == SIZE * SIZE:
            solutions.append("".join(cells))
            return
        for digit in _DIGITS:
            cells.append(digit)
            if all(len({cells[i] for i in unit if i < len(cells)}) == sum(i < len(cells) for i in unit)
                   for unit in UNITS if index in unit):
                fill(cells)
            cells.pop()

    fill([])
    return solutions


@TASKS.register("sudoku")
class SudokuTask:
    """4x4 sudoku puzzles with ``min_blanks``..``max_blanks`` blanks, from a fixed seed."""

    name = "sudoku"

    def __init__(self, min_blanks: int = 4, max_blanks: int = 8, pool_size: int = 4000, test_size: int = 256,
                 seed: int = 1234, dense_reward: bool = True) -> None:
        if not 1 <= min_blanks <= max_blanks <= SIZE * SIZE:
            raise ValueError(f"sudoku blanks must satisfy 1 <= min_blanks <= max_blanks <= 16, "
                             f"got {min_blanks}..{max_blanks}")
        self.min_blanks, self.max_blanks = min_blanks, max_blanks
        self.pool_size, self.test_size, self.seed = pool_size, test_size, seed
        self.dense_reward = dense_reward

    def _all(self) -> list[Example]:
        rng = random.Random(self.seed)
        solutions = all_solutions()
        seen: dict[str, Example] = {}
        for _ in range(self.pool_size):
            solution = rng.choice(solutions)
            blanks = set(rng.sample(range(SIZE * SIZE), rng.randint(self.min_blanks, self.max_blanks)))
            puzzle = "".join("." if i in blanks else ch for i, ch in enumerate(solution))
            seen.setdefault(puzzle, Example(prompt=puzzle, answer=solution, columns={"puzzle": puzzle}))
        return list(seen.values())

    def split(self, name: str) -> list[Example]:
        """``test``: the first ``test_size`` distinct puzzles drawn; ``train``: all the others."""
        return head_tail_split(self._all(), name, self.test_size, self.name)

    def reward(self, prompts: list[str], completions: list[str], **columns: list[Any]) -> list[float | None]:
        """Score each completion against ``columns['puzzle']`` and ``columns['answer']`` (see ``score_grid``)."""
        for column in ("puzzle", "answer"):
            if column not in columns:
                raise KeyError(f"sudoku reward needs the {column!r} column (16-character grids, '.' = blank)")
        return [score_grid(c, p, a, self.dense_reward)
                for c, p, a in zip(completions, columns["puzzle"], columns["answer"], strict=True)]

    def is_correct(self, completion: str, example: Example) -> bool:
        return is_solution(completion, example.columns["puzzle"])

    def distractor(self, example: Example) -> str:
        """A systematic wrong answer: the solution with digits 1 and 2 swapped in the blank cells (givens
        kept). It breaks at least one unit whenever a blank holds a 1 or a 2, and gives a warm start
        trained on it a consistent mistake that RL can learn to remove (see TinyRecipe.target_noise)."""
        swap = {"1": "2", "2": "1"}
        return "".join(swap.get(a, a) if p == "." else a
                       for p, a in zip(example.columns["puzzle"], example.answer, strict=True))
