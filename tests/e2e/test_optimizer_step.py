"""One optimizer step of the trainer's DeepSpeed-wrapped model is torch AdamW after clipping once, on ZeRO 0-3, and the
gradient norm it reports is the one torch's ``clip_grad_norm_`` returns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import run_entry
from tests.e2e.optimizer_step_check import MAX_GRAD_NORM

CHECK = Path(__file__).parent / "optimizer_step_check.py"


def test_deepspeed_steps_equal_torch_adamw_after_one_clip_and_report_its_norm_on_every_zero_stage(tmp_path: Path) -> None:
    out = tmp_path / "steps.json"
    result = run_entry([str(out)], script=CHECK, timeout=300, env={"CUDA_VISIBLE_DEVICES": ""})  # CPU steps
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    stages = json.loads(out.read_text())["stages"]
    assert sorted(stages) == ["0", "1", "2", "3"]
    for stage, found in stages.items():
        assert min(found["grad_norms"]) > MAX_GRAD_NORM, (stage, found["grad_norms"])  # every step is clipped
        assert found["unclipped_reference_difference"] > 1e-3, stage  # so a missing clip would show
        assert found["max_difference"] < 1e-6, (stage, found["max_difference"])
        assert found["reported_grad_norms"] == pytest.approx(found["grad_norms"], rel=1e-6), stage
        assert found["optimizer"] == {"class": "AdamW", "fused": True, "foreach": None}, (stage, found["optimizer"])
