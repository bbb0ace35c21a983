"""The shared half of the learning benchmarks that train several arms over seeds (``bench_dupo.py``,
``bench_prefix_rl.py``, ``bench_text2grad.py``): run one training as a user would, reuse it when it already
finished, read metric curves from its log, and plot each arm's curves (every seed faint, the mean over seeds
opaque with markers).

A run is ``posttrain/train.py`` in its own process with one thread (``OMP_NUM_THREADS=1``, offline); it counts
as finished, and is skipped, when its output directory holds ``metrics.jsonl`` and a complete checkpoint, so an
interrupted benchmark resumes where it stopped.

``--reuse FILE`` (``recorded_runs``, ``RecordedRuns.take``): the finished runs an earlier report of the same
script recorded stand in for runs whose directories are gone, when the report was made with the script's
current flags; a run finished under ``--runs`` wins over a recorded one, and a run neither finished nor
recorded is trained.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

Curve = list[tuple[int, float]]
"""(training step, value) points of one run, in step order."""
Runs = dict[str, dict[int, dict[str, Curve]]]
"""Finished runs' curves: arm -> seed -> metric -> curve (a report's ``runs``, seeds as ints)."""


def finished(output_dir: Path, final_step: int | None = None) -> bool:
    """Whether a run in ``output_dir`` finished: its metrics log and a complete checkpoint exist (the checkpoint
    of ``final_step`` when given, for runs that also save intermediate checkpoints)."""
    pattern = f"checkpoints/step_{final_step}/COMPLETE" if final_step is not None else "checkpoints/step_*/COMPLETE"
    return (output_dir / "metrics.jsonl").exists() and any(output_dir.glob(pattern))


TRAINING_ENV = {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
"""What ``run_training`` adds to the environment of every run (offline, single-threaded)."""


def training_command(flags: Sequence[str], seed: int, output_dir: Path, extra: Sequence[str] = ()) -> list[str]:
    """The command ``run_training`` runs: ``posttrain/train.py FLAGS --seed SEED --output_dir OUTPUT_DIR EXTRA``."""
    return [sys.executable, str(REPO / "posttrain" / "train.py"), *flags, "--seed", str(seed),
            "--output_dir", str(output_dir), *extra]


def run_training(flags: Sequence[str], seed: int, output_dir: Path, extra: Sequence[str] = (),
                 final_step: int | None = None) -> None:
    """``training_command`` under ``TRAINING_ENV``, unless the run already ``finished`` (at ``final_step`` when
    given); a failed run raises ``CalledProcessError``."""
    if finished(output_dir, final_step):
        return
    subprocess.run(training_command(flags, seed, output_dir, extra), cwd=REPO, check=True,
                   env={**os.environ, **TRAINING_ENV})


@dataclass
class RecordedRuns:
    """The runs an earlier report recorded (``recorded_runs``; empty without ``--reuse``) and the (arm, seed)
    pairs taken from it so far. ``unchecked_flags`` names the flag records the report lacked (an old report,
    accepted only where the script allows it), so the new report says its flags were not compared."""

    file: Path | None = None
    command: str | None = None
    runs: Runs = field(default_factory=dict)
    unchecked_flags: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)

    def take(self, arm: str, seed: int, output_dir: Path) -> dict[str, Curve] | None:
        """The recorded curves of ``arm`` at ``seed`` when its run did not finish in ``output_dir`` and the
        report recorded it (noted under ``reused``); None when the run is to be read from ``output_dir`` or
        trained: a run finished under ``--runs`` wins over a recorded one."""
        if finished(output_dir) or seed not in self.runs.get(arm, {}):
            return None
        self.reused.append(f"{arm} seed {seed}")
        return self.runs[arm][seed]

    def report(self) -> dict[str, Any] | None:
        """The new report's ``reused``: the file, the command that made it and the runs taken from it (and the
        flag records it lacked, if any); None when no run was taken."""
        if not self.reused:
            return None
        record: dict[str, Any] = {"file": str(self.file), "command": self.command, "runs": self.reused}
        if self.unchecked_flags:
            record["unchecked_flags"] = self.unchecked_flags
        return record


def recorded_runs(path: Path, shared: dict[str, list[str]], arms: dict[str, list[str]],
                  unrecorded_ok: bool = False) -> RecordedRuns:
    """The finished runs (``runs``: arm -> seed -> metric -> [[step, value], ...]) and the command of an earlier
    report at ``path``. Each entry of ``shared`` (report key -> the script's current flags, e.g. ``budget``) must
    equal the report's, and each recorded arm's flags (the report's ``arms``) the script's ``arms``, or a
    ``ValueError`` names the file and the key or arm: its runs are not these arms'. A report without one of
    these records is refused, unless ``unrecorded_ok`` (then it is listed in ``unchecked_flags``)."""
    report = json.loads(path.read_text())
    unchecked = []
    for key, flags in {**shared, "arms": arms}.items():
        if key not in report:
            if not unrecorded_ok:
                raise ValueError(f"{path}: the report records no {key!r}, so its runs' flags cannot be checked")
            unchecked.append(key)
        elif key != "arms" and report[key] != flags:
            raise ValueError(f"{path}: {key} {report[key]} is not this script's {key} {flags}")
    if "arms" in report:
        for arm in report["runs"]:
            if report["arms"].get(arm) != arms.get(arm):
                raise ValueError(f"{path}: arm {arm!r} ran with flags {report['arms'].get(arm)}, not {arms.get(arm)}")
    runs = {arm: {int(seed): {key: [(step, value) for step, value in curve] for key, curve in run.items()}
                  for seed, run in per_seed.items()}
            for arm, per_seed in report["runs"].items()}
    return RecordedRuns(path, report["command"], runs, unchecked)


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
                     ylabel: str = "held-out greedy accuracy", mean_width: float | None = None,
                     sd_band: bool = False) -> None:
    """One PNG at ``path``: per arm (colours C0, C1, ... in order) every seed's curve at ``alpha`` and the mean
    (``mean_curve``) opaque with markers and line width ``mean_width`` (None: matplotlib's), labelled
    ``label.format(arm=..., n=seeds)``; with ``sd_band`` also the mean +- the sample standard deviation over
    seeds, shaded, for arms of two seeds or more; ``decorate(ax)`` may add reference lines before the legend
    (``legend`` holds its keyword arguments)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=figsize)
    for i, (arm, series) in enumerate(curves_by_arm.items()):
        color = f"C{i}"
        for curve in series:
            ax.plot(*zip(*curve), color=color, alpha=alpha)
        mean = mean_curve(series)
        ax.plot(*zip(*mean), color=color, marker="o", linewidth=mean_width, label=label.format(arm=arm, n=len(series)))
        if sd_band and len(series) > 1:
            sd = [statistics.stdev(curve[i][1] for curve in series) for i in range(len(mean))]
            steps = [step for step, _ in mean]
            ax.fill_between(steps, [m - s for (_, m), s in zip(mean, sd)], [m + s for (_, m), s in zip(mean, sd)],
                            color=color, alpha=alpha / 2, linewidth=0)
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
