"""The span critic's stored evaluation, kept beside its build, and the check ``--algo text2grad --span_oracle false``
makes before trusting it (Text2Grad, arXiv 2505.22338; issue 41: a critic at chance collapses every learned arm).

``posttrain text2grad-eval --store`` (``rewards.text2grad.evaluate``) writes its JSON summary as ``EVAL_FILE`` in
the critic's directory (for an embedded recipe, ``posttrain.models.tiny.recipe_dir``: the cache key covers the
build, so a rebuilt critic has no stale evaluation). ``critic_problem`` reads it and says, with the numbers, why
the critic cannot be trusted (no evaluation, or one whose ``verdict`` says it does not beat chance), or None.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

EVAL_FILE = "text2grad_eval.json"


def write_stored_eval(model_dir: Path, summary: dict[str, Any]) -> Path:
    """Write ``summary`` (``text2grad-eval``'s JSON) beside the critic at ``model_dir``; returns the file."""
    from posttrain.common.files import atomic_write_text

    target = Path(model_dir) / EVAL_FILE
    atomic_write_text(target, json.dumps(summary, indent=2) + "\n")
    return target


def read_stored_eval(model_dir: Path) -> dict[str, Any] | None:
    """The stored evaluation beside the critic at ``model_dir``, or None when there is none; a file without a
    ``verdict`` raises, naming it."""
    path = Path(model_dir) / EVAL_FILE
    if not path.is_file():
        return None
    summary = json.loads(path.read_text())
    if not isinstance(summary, dict) or "beats_chance" not in summary.get("verdict", {}):
        raise ValueError(f"{path}: no verdict.beats_chance field (not a text2grad-eval summary)")
    return summary


def critic_problem(model_dir: Path, name: str) -> str | None:
    """Why the critic ``name`` at ``model_dir`` should not be trusted, with its numbers, or None when its stored
    evaluation says it beats chance."""
    summary = read_stored_eval(model_dir)
    if summary is None:
        return (f"the span critic {name} has no stored evaluation ({Path(model_dir) / EVAL_FILE}); nothing says it "
                "beats chance. Run `posttrain text2grad-eval --store` to measure it.")
    v = summary["verdict"]
    if v["beats_chance"]:
        return None
    return (f"the span critic {name} does NOT beat chance on held-out policy samples: poor-span token precision / "
            f"recall {v['precision']:.3f} / {v['recall']:.3f} against a random flagger's {v['random_precision']:.3f}"
            f" / {v['random_recall']:.3f} (needs both {v['margin']} above; {Path(model_dir) / EVAL_FILE}). PPO on "
            "its rewards follows noise (benchmarks/text2grad.md).")
