"""Sudoku 4x4: fill the blanks of a 16-character grid (row by row, ``.`` = blank) with digits 1-4.

The prompt is the puzzle itself (``1.3.34.2..4.4.21``); the reference answer is the solution it was
made from, and the puzzle travels in the ``puzzle`` column. A completion (whitespace ignored) scores
1.0 when it is a valid full grid that keeps every given digit: any valid solution counts, not only
the reference. With ``partial_credit=True`` a consistent but invalid grid scores the fraction of its
12 units (rows, columns, 2x2 boxes) that hold 1-4 exactly once. Anything else scores 0.0.
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


def score_grid(completion: str, puzzle: str, partial_credit: bool = False) -> float:
    """1.0 for a valid solution of ``puzzle``; the unit fraction if ``partial_credit``; else 0.0."""
    grid = parse_grid(completion)
    if grid is None or not consistent(grid, puzzle):
        return 0.0
    units = valid_units(grid)
    if units == len(UNITS):
        return 1.0
    return units / len(UNITS) if partial_credit else 0.0


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
                 seed: int = 1234, partial_credit: bool = False) -> None:
        if not 1 <= min_blanks <= max_blanks <= SIZE * SIZE:
            raise ValueError(f"sudoku blanks must satisfy 1 <= min_blanks <= max_blanks <= 16, "
                             f"got {min_blanks}..{max_blanks}")
        self.min_blanks, self.max_blanks = min_blanks, max_blanks
        self.pool_size, self.test_size, self.seed = pool_size, test_size, seed
        self.partial_credit = partial_credit

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
        """Score each completion against ``columns['puzzle']`` (see ``score_grid``)."""
        if "puzzle" not in columns:
            raise KeyError("sudoku reward needs the 'puzzle' column (the 16-character grid with '.' blanks)")
        return [score_grid(c, p, self.partial_credit)
                for c, p in zip(completions, columns["puzzle"], strict=True)]

    def is_correct(self, completion: str, example: Example) -> bool:
        return score_grid(completion, example.columns["puzzle"]) == 1.0
