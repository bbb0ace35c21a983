"""Behaviour of the telemetry helpers: timers, memory, JSONL/TensorBoard sinks, resume truncation."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from posttrain.metrics import MetricsLogger, PhaseTimer, ProgressBar, parse_sinks, peak_memory_mb


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_timer_accumulates_nested_phases_and_resets() -> None:
    timer = PhaseTimer()
    for _ in range(2):
        with timer.phase("step"), timer.phase("generate"):
            pass
    times = timer.pop()
    assert set(times) == {"time/step", "time/generate"}
    assert times["time/step"] >= times["time/generate"] >= 0.0  # outer phase contains the inner one
    assert timer.pop() == {}


def test_timer_counts_a_phase_that_raises_and_rejects_self_nesting() -> None:
    timer = PhaseTimer()
    with pytest.raises(RuntimeError), timer.phase("reward"):
        raise RuntimeError("boom")
    assert "time/reward" in timer.pop()
    with pytest.raises(ValueError, match="generate"), timer.phase("generate"), timer.phase("generate"):
        pass


def test_peak_memory_on_cpu_is_positive() -> None:
    assert peak_memory_mb("cpu") > 0


def test_jsonl_lines_and_truncate_after(tmp_path: Path) -> None:
    logger = MetricsLogger(tmp_path, "jsonl", rank=0, run_name="t", config={})
    for step in (1, 2, 3):
        logger.log(step, {"loss": step / 2})
    assert read_jsonl(tmp_path / "metrics.jsonl") == [
        {"step": 1, "loss": 0.5}, {"step": 2, "loss": 1.0}, {"step": 3, "loss": 1.5}]
    logger.truncate_after(2)  # resumed from the step-2 checkpoint; step 3 is redone
    logger.log(3, {"loss": 9.0})
    logger.close()
    assert read_jsonl(tmp_path / "metrics.jsonl") == [
        {"step": 1, "loss": 0.5}, {"step": 2, "loss": 1.0}, {"step": 3, "loss": 9.0}]


def test_truncate_drops_a_torn_last_line_but_rejects_corruption(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "loss": 1.0}\n{"step": 2, "lo')  # killed mid-write
    logger = MetricsLogger(tmp_path, "jsonl", rank=0, run_name="t", config={})
    logger.truncate_after(5)
    assert read_jsonl(path) == [{"step": 1, "loss": 1.0}]
    path.write_text('garbage\n{"step": 1, "loss": 1.0}\n')
    with pytest.raises(ValueError, match="line 1"):
        logger.truncate_after(5)


def test_log_rejects_non_scalars_and_step_key(tmp_path: Path) -> None:
    logger = MetricsLogger(tmp_path, "jsonl", rank=0, run_name="t", config={})
    with pytest.raises(ValueError, match="'acc'"):
        logger.log(1, {"acc": [1, 2]})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="step"):
        logger.log(1, {"step": 1.0})
    logger.close()


def test_tensorboard_event_file_is_written(tmp_path: Path) -> None:
    logger = MetricsLogger(tmp_path, "jsonl,tensorboard", rank=0, run_name="t", config={"lr": 0.1})
    logger.log(1, {"loss": 0.5})
    logger.truncate_after(0)  # reopens the writer with purge_step=1, hiding step 1 from TensorBoard
    logger.log(1, {"loss": 0.4})
    logger.close()
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))
    assert read_jsonl(tmp_path / "metrics.jsonl") == [{"step": 1, "loss": 0.4}]


def test_unknown_sink_is_named() -> None:
    with pytest.raises(ValueError, match="mlflow"):
        parse_sinks("jsonl, mlflow")
    with pytest.raises(ValueError, match="csv"):
        MetricsLogger("unused", "csv", rank=1, run_name="t", config={})


@pytest.mark.skipif(importlib.util.find_spec("wandb") is not None, reason="wandb is installed")
def test_missing_wandb_fails_at_construction(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="wandb is not installed"):
        MetricsLogger(tmp_path, "jsonl,wandb", rank=0, run_name="t", config={})


def test_non_zero_rank_writes_nothing(tmp_path: Path) -> None:
    logger = MetricsLogger(tmp_path / "out", "jsonl,tensorboard", rank=1, run_name="t", config={})
    logger.log(1, {"loss": 0.5})
    logger.truncate_after(0)
    logger.close()
    assert not (tmp_path / "out").exists()


def test_progress_bar_shows_steps_and_postfix(capsys: pytest.CaptureFixture[str]) -> None:
    bar = ProgressBar(total=3, initial=1, enabled=True)
    bar.update({"loss": 0.25})
    bar.close()
    shown = capsys.readouterr().err
    assert "2/3" in shown and "loss=0.25" in shown
    silent = ProgressBar(total=3, initial=0, enabled=False)
    silent.update({"loss": 0.25})
    silent.close()
    assert capsys.readouterr().err == ""
