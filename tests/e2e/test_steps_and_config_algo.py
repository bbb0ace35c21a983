"""Through the real entry point: a --config file's ``algo:`` is the run's algorithm, and ``steps`` counts
training steps of ``mu`` optimizer steps each (the learning-rate schedule spans steps x mu of them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import run_entry


def test_config_file_algo_and_optimizer_steps_per_training_step(tmp_path: Path, tiny_arithmetic: Path) -> None:
    run = tmp_path / "run.yaml"
    # 2 prompts x 2 samples in micro-batches of 2: two micro-batches (gradient accumulation 2) per pass.
    run.write_text(yaml.safe_dump({"algo": "rloo", "steps": 3, "mu": 2, "lr": 1e-3, "lr_scheduler": "linear",
                                   "prompts_per_step": 2, "group_size": 2, "micro_batch_size": 2,
                                   "max_new_tokens": 4, "eval_every": 0, "save_every": 0, "progress": False,
                                   "report_to": "jsonl"}))
    out = tmp_path / "out"
    result = run_entry(["--config", str(run), "--model", str(tiny_arithmetic), "--output_dir", str(out)])
    assert result.returncode == 0, result.stderr[-3000:]
    resolved = yaml.safe_load((out / "config.yaml").read_text())
    assert resolved["algo"] == "rloo" and resolved["advantage"] == "rloo"
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    lrs = [row["train/lr"] for row in rows if "train/lr" in row]
    # Linear decay over 3 x 2 = 6 optimizer steps, read after each training step's 2 optimizer steps:
    # 1e-3 x (1 - 2/6, 1 - 4/6, 1 - 6/6).
    assert lrs == pytest.approx([1e-3 * 2 / 3, 1e-3 / 3, 0.0], abs=1e-9)
