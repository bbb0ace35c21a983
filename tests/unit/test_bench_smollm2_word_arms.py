"""``bench_smollm2_learning.py --task multistep-word``'s arm table is structural: every arm's command parses and
validates as its algorithm's config, shares the task's budget, and ``--print_commands`` prints one
``posttrain/train.py`` line per (arm, seed) without running anything."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from benchmarks import bench_smollm2_learning as bench
from benchmarks import smollm2_word_arms as word
from posttrain.algos import get_algorithm
from posttrain.config import build_config, requested_algo
from posttrain.tasks.multistep_word import SOLUTION_TEMPLATE


@pytest.mark.parametrize("arm", list(word.ARMS))
def test_every_arm_builds_a_valid_config(arm: str, tmp_path: Path) -> None:
    argv = [*word.COMMON, "--steps", str(word.STEPS), *word.ARMS[arm], "--seed", "0", "--output_dir", str(tmp_path)]
    config = build_config(get_algorithm(requested_algo(argv)).config_class, argv)
    config.validate(1)
    assert (config.task, config.prompts_per_step, config.group_size, config.max_new_tokens) == (
        "multistep-word", 8, 4, 64)
    assert (config.eval_every, config.eval_examples, config.steps, config.resume) == (10, 256, 100, "auto")


def test_gpo_guider_sees_the_worked_solution() -> None:
    argv = [*word.COMMON, *word.ARMS["gpo"]]
    assert build_config(get_algorithm("gpo").config_class, argv).privileged_template == SOLUTION_TEMPLATE


def test_print_commands_prints_one_train_command_per_arm_and_seed(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--task", "multistep-word", "--arms", "grpo-vllm", "gpo", "--seeds", "0", "1",
                       "--runs", str(tmp_path), "--print_commands"]) == 0
    lines = capsys.readouterr().out.strip().split("\n")
    assert len(lines) == 4
    first = shlex.split(lines[0])
    assert first[:2] == ["HF_HUB_OFFLINE=1", "OMP_NUM_THREADS=1"] and first[3].endswith("posttrain/train.py")
    assert first[-4:] == ["--seed", "0", "--output_dir", str(tmp_path / "grpo-vllm" / "seed0")]
    assert "--privileged_template $'{prompt}\\nWorked solution: {solution}'" in lines[2]
    assert not list(tmp_path.iterdir())


def test_an_arm_of_another_task_is_refused() -> None:
    with pytest.raises(SystemExit):
        bench.main(["--task", "multistep-word", "--arms", "grpo-vllm-lora-lr2e-4", "--print_commands"])


def test_lora_is_set_against_full_fine_tuning() -> None:
    def arm(seconds: float, peak: float) -> dict:
        return {"seconds_per_step_mean": {"mean": seconds}, "peak_memory_mb": {"mean": peak}}

    summaries = {"grpo-vllm": arm(10.0, 2000.0), "grpo-vllm-lora": arm(8.0, 1500.0)}
    assert bench.lora_against_full(summaries) == {"seconds_per_step_mean_lora_over_full": 0.8,
                                                  "peak_memory_mb_lora_over_full": 0.75}
    assert bench.lora_against_full({"grpo-vllm": arm(10.0, 2000.0)}) is None


def test_prefix_rl_samples_its_target_at_the_shared_temperature() -> None:
    config = build_config(get_algorithm("prefix-rl").config_class, [*word.COMMON, *word.ARMS["prefix-rl"]])
    assert config.target_temperature == config.temperature == 0.8
