"""Per-phase timing of one GRPO step for ``bench_grpo_vs_trl.py``, on both sides, by pass-through wrappers (they
time a call and return its result; no computation changes), and each phase's useful FLOPs as a fraction of the
machine's matmul peak.

Phases: ``generation`` (sampling), ``reward``, ``logprobs`` (no-grad log-prob forwards: old policy, reference),
``forward`` (the training forward and loss), ``backward``, ``optimizer`` (the AdamW step), ``sync`` (weights to
the rollout engine), ``other`` (the rest of the step: data, prompt encoding, advantages, logging).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch

PHASES = ("generation", "reward", "logprobs", "forward", "backward", "optimizer", "sync", "other")

FLOPS_PER_PARAM_TOKEN = {"generation": 2, "logprobs": 2, "forward": 2, "backward": 4}
"""Useful FLOPs per parameter and (prompt + completion) token of the step's batch, per phase: 2N for a forward,
4N for a backward; the other phases do no matmul work worth counting (``logprobs`` counts one forward per
no-grad pass it timed)."""


class PhaseClock:
    """Seconds per phase, accumulated over a step (``pop`` returns and resets them)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def wrap(self, owner: Any, attribute: str, phase: str, when: Callable[[], bool] = lambda: True) -> None:
        """Replace ``owner.attribute`` (a callable) by a pass-through that adds its seconds to ``phase`` whenever
        ``when()`` holds at the call."""
        original = getattr(owner, attribute)

        def timed(*args: Any, **kwargs: Any) -> Any:
            if not when():
                return original(*args, **kwargs)
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[phase] += time.perf_counter() - start
                self.calls[phase] += 1

        setattr(owner, attribute, timed)

    def start(self, phase: str) -> None:
        """Open ``phase`` (closed by ``stop``), for phases bounded by callbacks rather than one call."""
        self.seconds[f"_open_{phase}"] = time.perf_counter()

    def stop(self, phase: str) -> None:
        opened = self.seconds.pop(f"_open_{phase}", None)
        if opened is None:
            raise RuntimeError(f"phase {phase!r} stopped without being started")
        self.seconds[phase] += time.perf_counter() - opened
        self.calls[phase] += 1

    def pop(self, step_seconds: float) -> dict[str, Any]:
        """This step's phases (``other`` = ``step_seconds`` minus the timed ones) and no-grad forward count."""
        phases = {p: self.seconds.get(p, 0.0) for p in PHASES if p != "other"}
        phases["other"] = step_seconds - sum(phases.values())
        out = {"seconds": phases, "logprob_passes": self.calls.get("logprobs", 0)}
        self.seconds.clear()
        self.calls.clear()
        return out


def no_grad_now() -> bool:
    """Whether autograd is off at this call (a log-prob forward outside the training loss)."""
    return not torch.is_grad_enabled()


def phase_peak_fractions(steps: list[dict[str, Any]], params: int, peak_flops: float | None) -> dict[str, Any]:
    """Median seconds per phase over ``steps`` and, for the matmul phases, the useful FLOP/s they reach as a
    fraction of ``peak_flops`` (``FLOPS_PER_PARAM_TOKEN`` x params x the step's tokens; ``logprobs`` once per
    no-grad pass it timed, each pass over the whole batch on both sides)."""
    import statistics

    timed = [s for s in steps if "phases" in s and "seconds" in s["phases"]]
    out: dict[str, Any] = {}
    for phase in PHASES:
        seconds = [s["phases"]["seconds"][phase] for s in timed]
        if not seconds:
            continue
        entry: dict[str, Any] = {"median_seconds": statistics.median(seconds)}
        if phase in FLOPS_PER_PARAM_TOKEN and peak_flops:
            fractions = []
            for s in timed:
                passes = s["phases"]["logprob_passes"] if phase == "logprobs" else 1
                secs = s["phases"]["seconds"][phase]
                if secs > 0 and passes > 0:
                    fractions.append(FLOPS_PER_PARAM_TOKEN[phase] * params * s["tokens"] * passes / secs / peak_flops)
            entry["median_fraction_of_peak"] = statistics.median(fractions) if fractions else None
        out[phase] = entry
    return out


def main(argv: list[str] | None = None) -> int:
    """Add ``phase_breakdown`` to a partial results file of ``bench_grpo_vs_trl.py`` (one stopped before its
    matmul-peak measurement), against a peak measured apart (``--peak_flops``, its source recorded)."""
    import json
    from pathlib import Path

    from posttrain.common.cli_help import CommandParser

    parser = CommandParser(description=main.__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="bench_grpo_vs_trl.py --out file.")
    parser.add_argument("--params", type=int, required=True, help="Model parameters (tied embedding counted once).")
    parser.add_argument("--peak_flops", type=float, required=True, help="Matmul peak FLOP/s to divide by.")
    parser.add_argument("--peak_source", required=True, help="Where and when --peak_flops was measured (recorded).")
    args = parser.parse_args(argv)
    report = json.loads(args.results.read_text())
    report["phase_breakdown"] = {side: phase_peak_fractions([s for r in rs for s in r["steps"]], args.params,
                                                            args.peak_flops)
                                 for side, rs in report["runs"].items() if rs}
    report["phase_breakdown_peak"] = {"peak_flops": args.peak_flops, "source": args.peak_source}
    args.results.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["phase_breakdown"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
