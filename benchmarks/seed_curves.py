"""The shared half of the learning benchmarks that train several arms over seeds (``bench_dupo.py``,
``bench_prefix_rl.py``, ``bench_text2grad.py``): run one training as a user would, reuse it when it already
finished, read metric curves from its log, and plot each arm's curves (every seed faint, the mean over seeds
opaque with markers).

A run is ``posttrain/train.py`` in its own process with one thread (``OMP_NUM_THREADS=1``, offline); it counts
as finished, and is skipped, when its output directory holds ``metrics.jsonl`` and a complete checkpoint, so an
interrupted benchmark resumes where it stopped.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

Curve = list[tuple[int, float]]
"""(training step, value) points of one run, in step order."""


def finished(output_dir: Path, final_step: int | None = None) -> bool:
    """Whether a run in ``output_dir`` finished: its metrics log and a complete checkpoint exist (the checkpoint
    of ``final_step`` when given, for runs that also save intermediate checkpoints)."""
    pattern = f"checkpoints/step_{final_step}/COMPLETE" if final_step is not None else "checkpoints/step_*/COMPLETE"
    return (output_dir / "metrics.jsonl").exists() and any(output_dir.glob(pattern))


def run_training(flags: Sequence[str], seed: int, output_dir: Path, extra: Sequence[str] = (),
                 final_step: int | None = None) -> None:
    """``posttrain/train.py FLAGS --seed SEED --output_dir OUTPUT_DIR EXTRA`` single-threaded and offline, unless
    it already ``finished`` (at ``final_step`` when given); a failed run raises ``CalledProcessError``."""
    if finished(output_dir, final_step):
        return
    cmd = [sys.executable, str(REPO / "posttrain" / "train.py"), *flags, "--seed", str(seed),
           "--output_dir", str(output_dir), *extra]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    subprocess.run(cmd, cwd=REPO, check=True, env=env)


def metric_curves(output_dir: Path, keys: Sequence[str]) -> dict[str, Curve]:
    """Each metric in ``keys`` as the (step, value) points of the run's ``metrics.jsonl`` rows that log it."""
    rows = [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return {key: [(row["step"], row[key]) for row in rows if key in row] for key in keys}


def mean_curve(series: Sequence[Curve]) -> Curve:
    """The pointwise mean over seeds, on the steps all of them reached (the first seed's steps)."""
    length = min(len(curve) for curve in series)
    return [(series[0][i][0], statistics.mean(curve[i][1] for curve in series)) for i in range(length)]


def plot_seed_curves(curves_by_arm: dict[str, Sequence[Curve]], path: Path, title: str,
                     figsize: tuple[float, float] = (6.5, 4), alpha: float = 0.25, label: str = "{arm} ({n} seeds)",
                     legend: dict[str, Any] | None = None, decorate: Callable[[Any], None] | None = None,
                     ylabel: str = "held-out greedy accuracy", mean_width: float | None = None) -> None:
    """One PNG at ``path``: per arm (colours C0, C1, ... in order) every seed's curve at ``alpha`` and the mean
    (``mean_curve``) opaque with markers and line width ``mean_width`` (None: matplotlib's), labelled
    ``label.format(arm=..., n=seeds)``; ``decorate(ax)`` may add reference lines before the legend (``legend``
    holds its keyword arguments)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=figsize)
    for i, (arm, series) in enumerate(curves_by_arm.items()):
        color = f"C{i}"
        for curve in series:
            ax.plot(*zip(*curve), color=color, alpha=alpha)
        ax.plot(*zip(*mean_curve(series)), color=color, marker="o", linewidth=mean_width,
                label=label.format(arm=arm, n=len(series)))
    if decorate is not None:
        decorate(ax)
    ax.set_xlabel("training step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(**(legend or {}))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
