"""``--algo gpo``: a run killed with SIGKILL after its step-2 checkpoint and resumed with ``--resume auto``
ends with the same weights and metrics as an uninterrupted run (GPO's own state, alpha and the KL
accumulator, travels in the checkpoint through ``state_dict`` / ``load_state_dict``).

The dataset rows have ``prompt``, ``answer`` and the ``hint`` column that the default guider template
``{prompt}\\nHint: {hint}.`` reads. The penalty variant is used because its
alpha changes every step from the previous step's KL, so a resume that lost that state would diverge. The
runs are also CI's run of the penalty variant (``test_gpo_llm.py`` runs the clip variant): the guider-learner
KL is logged and alpha starts at 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.resume import assert_same_end, kill_and_resume


def _args(model: Path, out: Path, data: Path, variant: str) -> list[str]:
    return ["--algo", "gpo", "--gpo_variant", variant, "--model", str(model), "--output_dir", str(out),
            "--task", "dataset", "--dataset", str(data), "--test_fraction", "0.2",
            "--reward", "tests.e2e.rewards:digit_fraction", "--steps", "4", "--save_every", "2", "--eval_every", "2",
            "--prompts_per_step", "4", "--group_size", "4", "--micro_batch_size", "8", "--mu", "2",
            "--max_new_tokens", "6", "--pass_k", "2", "--progress", "false", "--keep_last", "3"]


@pytest.mark.parametrize("variant", ["penalty"])
def test_gpo_sigkill_and_resume_equals_uninterrupted(tiny_arithmetic: Path, tmp_path: Path, variant: str) -> None:
    data = tmp_path / "problems.jsonl"
    # 10 rows, 2 held out: 8 training prompts = 2 steps of 4, so the step-2 checkpoint is an epoch boundary.
    data.write_text("".join(json.dumps({"prompt": f"{a}+{a + 1}", "answer": str(2 * a + 1),
                                        "hint": f"{a}+{a + 2}={2 * a + 2}"}) + "\n" for a in range(10)))
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    kill_and_resume(lambda out: _args(tiny_arithmetic, out, data, variant), straight, killed, kill_after=2, final=4)
    rows = assert_same_end(tiny_arithmetic, straight, killed, final=4)
    train = [r for r in rows if r["step"] > 0]
    assert all(r["gpo/kl_guider_learner"] >= 0 and "gpo/alpha" in r for r in train)
    assert train[0]["gpo/alpha"] == 0.0  # adapted from the first step's KL before the second
    assert train[2]["gpo/alpha"] != 0.0  # step 3 used an alpha adapted from step 2's KL, restored on resume
