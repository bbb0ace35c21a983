"""The held-out label-free test's measurement at several seeds: DuPO with the back-translation dual trains on 16
sentences without answers (``tests/e2e/test_dupo.py``'s ``TRAIN_FLAGS``), and the mean log-prob margin of the
right translation over the warm start's error (the word order unreversed) is measured on the 64 held-out
sentences before and after; the test's ``MARGIN_GAIN`` is set from these numbers.

    OMP_NUM_THREADS=1 python benchmarks/dupo_held_out_margin.py --seeds 0 1 2

Writes ``benchmarks/results/dupo_held_out_margin.json`` (keeping its ``math_memorised`` section, the earlier
math-dual measurement, as it is).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from posttrain.common.cli_help import CommandParser


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "dupo_held_out_margin.json")
    args = parser.parse_args(argv)

    import torch

    from posttrain.common.files import atomic_write_text
    from posttrain.models.tiny import build_tiny
    from tests.e2e.test_dupo import (
        HELD_OUT_SENTENCES,
        MARGIN_GAIN,
        TRAIN_FLAGS,
        TRAIN_SENTENCES,
        train_translation_without_answers,
        translation_margin,
    )

    torch.set_num_threads(1)
    model = build_tiny("causal-word-translation")
    before = {"trained": translation_margin(model, TRAIN_SENTENCES),
              "held_out": translation_margin(model, HELD_OUT_SENTENCES)}
    after = {}
    with tempfile.TemporaryDirectory() as scratch:
        for seed in args.seeds:
            started = time.monotonic()
            tuned = train_translation_without_answers(model, Path(scratch) / f"seed{seed}", seed)
            after[seed] = {"trained": translation_margin(tuned, TRAIN_SENTENCES),
                           "held_out": translation_margin(tuned, HELD_OUT_SENTENCES),
                           "wall_s": round(time.monotonic() - started, 1)}
            print(seed, after[seed], flush=True)
    previous = json.loads(args.out.read_text()) if args.out.exists() else {}
    report = {
        "what": ("DuPO --dual_task translation on 16 training sentences with answers removed (TRAIN_FLAGS of "
                 "tests/e2e/test_dupo.py: 3 steps, 8 x 8, lr 5e-4, the warm start as back-translator); margin = mean "
                 "log p(right Zed) - log p(words unreversed) in nats, on the trained and the 64 held-out sentences"),
        "command": " ".join(["OMP_NUM_THREADS=1", "python", *sys.argv]),
        "model": str(model),
        "train_flags": TRAIN_FLAGS,
        "before": before,
        "after": after,
        "held_out_gain": {seed: a["held_out"] - before["held_out"] for seed, a in after.items()},
        "test_margin_gain": MARGIN_GAIN,
        "wall_s_note": "per seed, on 2 shared cores under load (other agents' runs), not a timing claim",
        "math_memorised": previous.get("math_memorised", previous),
    }
    atomic_write_text(args.out, json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
