"""Config parsing, precedence, validation messages and --help."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from posttrain.algos.pg import GRPOConfig, RLOOConfig
from posttrain.config import ConfigError, TrainConfig, build_config, defaults, help_text, requested_algo
from posttrain.dist import deepspeed_config, lr_lambda
from posttrain.engines.spec import DiffusionSpec, HFSpec


def test_precedence_defaults_yaml_cli(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"lr": 0.5, "group_size": 4, "kl_estimator": "k2"}))
    cfg = build_config(GRPOConfig, ["--config", str(path), "--lr", "0.25", "--progress", "false"])
    assert cfg.lr == 0.25 and cfg.group_size == 4 and cfg.kl_estimator == "k2" and cfg.progress is False
    assert cfg.clip_low == 0.2  # default untouched


def test_equals_form_bare_bool_and_none() -> None:
    cfg = build_config(GRPOConfig, ["--lr=0.1", "--gradient_checkpointing", "--model", "none"])
    assert cfg.lr == 0.1 and cfg.gradient_checkpointing is True and cfg.model is None


def test_output_dir_defaults_to_algo_and_task() -> None:
    assert build_config(RLOOConfig, ["--algo", "rloo", "--task", "sudoku"]).output_dir == "outputs/rloo-sudoku"


@pytest.mark.parametrize("argv,field,fragment", [
    (["--lr", "abc"], "lr", "expected a float"),
    (["--group_sise", "4"], "group_sise", "did you mean ['group_size']"),
    (["--loss_agg", "sum"], "loss_agg", "choose one of ['token-mean', 'seq-mean', 'seq-mean-token-sum', 'constant']"),
    (["--steps"], "steps", "needs a value"),
])
def test_parse_errors_name_the_field(argv: list[str], field: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        build_config(GRPOConfig, argv).validate(1)
    assert err.value.field_name == field and fragment in str(err.value)


def test_micro_batch_error_lists_valid_sizes() -> None:
    cfg = build_config(GRPOConfig, ["--prompts_per_step", "6", "--group_size", "4", "--micro_batch_size", "5"])
    with pytest.raises(ConfigError, match=r"valid micro-batch sizes: \[1, 2, 3, 4, 6, 8, 12, 24\]"):
        cfg.validate(1)
    with pytest.raises(ConfigError, match=r"prompts_per_step.*2 ranks.*valid values include \[2, 4, 6"):
        build_config(GRPOConfig, ["--prompts_per_step", "3"]).validate(2)


def test_algorithm_specific_checks() -> None:
    with pytest.raises(ConfigError, match="group_size"):
        build_config(GRPOConfig, ["--group_size", "1", "--micro_batch_size", "1"]).validate(1)
    with pytest.raises(ConfigError, match="lora_r"):
        build_config(GRPOConfig, ["--lora_r", "8", "--zero_stage", "3"]).validate(1)


def test_yaml_must_be_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        build_config(GRPOConfig, ["--config", str(path)])


def test_resolved_config_round_trips(tmp_path: Path) -> None:
    cfg = build_config(GRPOConfig, ["--lr", "0.3"])
    saved = yaml.safe_load(cfg.save(tmp_path).read_text())
    assert build_config(GRPOConfig, [f"--{k}={v}" for k, v in saved.items() if v is not None]) == cfg


def test_help_documents_every_field() -> None:
    text = help_text(GRPOConfig)
    for name in ("--clip_high", "--kl_coef", "--zero_stage", "--resume"):
        assert name in text
    assert "{k1, k2, k3}" in text


def test_model_kind_follows_the_rollout_engine() -> None:
    from posttrain.algos.espo import ESPOConfig
    from posttrain.algos.sft import SFTConfig

    espo = build_config(ESPOConfig, ["--algo", "espo"])
    assert (espo.task, espo.rollout, espo.model_kind) == ("sudoku", DiffusionSpec(), "diffusion")
    assert espo.output_dir == "outputs/espo-sudoku"
    old_flags = build_config(ESPOConfig, ["--block_length", "8", "--diffusion_steps", "12"]).rollout
    assert old_flags == DiffusionSpec(block_length=8, steps=12, remasking="low_confidence")
    assert build_config(ESPOConfig, ["--rollout.block_length", "8", "--rollout.steps", "12"]).rollout == old_flags
    assert build_config(SFTConfig, ["--rollout", "diffusion"]).model_kind == "diffusion"
    assert build_config(SFTConfig, []).model_kind == "causal" and build_config(SFTConfig, []).rollout == HFSpec()
    with pytest.raises(ConfigError, match="rollout"):
        build_config(GRPOConfig, ["--rollout", "diffusion"]).validate()
    with pytest.raises(ConfigError, match="rollout.block_length"):
        build_config(ESPOConfig, ["--block_length", "0"])
    with pytest.raises(ConfigError, match="'rollout.block_length'.*the hf engine has no such option"):
        build_config(GRPOConfig, ["--block_length", "8"])


def test_algo_comes_from_the_flag_then_the_config_file_then_grpo(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"algo": "rloo", "steps": 3}))
    assert requested_algo(["--config", str(path)]) == "rloo"
    assert requested_algo(["--config", str(path), "--algo", "sft"]) == "sft"  # the flag wins, as every flag does
    assert requested_algo(["--algo=espo", "--lr", "0.1"]) == "espo"
    assert requested_algo(["--lr", "0.1"]) == "grpo"
    with pytest.raises(ConfigError, match="needs a value"):
        requested_algo(["--config", str(path), "--algo"])
    path.write_text(yaml.safe_dump({"algo": 3}))
    with pytest.raises(ConfigError, match="algorithm name"):
        requested_algo(["--config", str(path)])


def test_train_entry_honours_algo_in_the_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from posttrain.train import main

    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"algo": "rloo", "kl_coef": 0.02}))
    assert main(["--config", str(path), "--help"]) == 0
    out = capsys.readouterr().out
    assert "Options of --algo rloo (RLOOConfig)" in out and '--algo (str, default "rloo")' in out
    path.write_text(yaml.safe_dump({"algo": "sft", "kl_coef": 0.02}))  # kl_coef is no SFT option
    assert main(["--config", str(path)]) == 2
    assert "unknown option for --algo sft" in capsys.readouterr().err


def test_no_embedded_model_for_the_task_fails_at_start_up_naming_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    from posttrain.algos.sft import SFTConfig
    from posttrain.train import main

    with pytest.raises(ConfigError) as err:
        build_config(SFTConfig, ["--rollout", "diffusion"]).validate()
    assert err.value.field_name == "task"
    assert "no embedded tiny diffusion model" in str(err.value) and "--task countdown or --task sudoku" in str(err.value)
    build_config(SFTConfig, ["--rollout", "diffusion", "--task", "sudoku"]).validate()
    build_config(SFTConfig, ["--rollout", "diffusion", "--model", "my/diffusion-lm"]).validate()
    assert main(["--algo", "sft", "--rollout", "diffusion"]) == 2  # the README's row: one line, no traceback
    assert "--task countdown or --task sudoku" in capsys.readouterr().err


def test_steps_count_rollout_batches_of_mu_optimizer_steps() -> None:
    # The LR schedule spans steps x mu optimizer steps: steps 3, mu 2, linear decay -> 1 - s / 6.
    cfg = build_config(GRPOConfig, ["--steps", "3", "--mu", "2", "--lr_scheduler", "linear"])
    factor = lr_lambda(cfg)
    assert [factor(s) for s in (0, 3, 6)] == [1.0, 0.5, 0.0]
    warm = lr_lambda(build_config(GRPOConfig, ["--steps", "3", "--mu", "2", "--lr_scheduler", "linear",
                                               "--warmup_steps", "2"]))
    assert [warm(s) for s in (0, 1, 2, 4, 6)] == [0.5, 1.0, 1.0, 0.5, 0.0]
    # One pass over a step's samples is exactly one optimizer step (micro-batch x accumulation = the rank's
    # samples), so the trainer's mu passes per step are mu optimizer steps.
    for argv, world in ([], 1), (["--micro_batch_size", "8"], 2), (["--micro_batch_size", "512"], 1):
        cfg = build_config(GRPOConfig, argv)
        ds = deepspeed_config(cfg, world)
        assert ds["train_micro_batch_size_per_gpu"] * ds["gradient_accumulation_steps"] == cfg.per_rank_samples(world)


def test_defaults_change_inherited_defaults_and_keep_help_and_choices() -> None:
    @dataclasses.dataclass
    @defaults(steps=7, rollout="diffusion")
    class Short(TrainConfig):
        """A config that only changes two defaults."""

    fields = {f.name: f for f in dataclasses.fields(Short)}
    base = {f.name: f for f in dataclasses.fields(TrainConfig)}
    assert Short().steps == 7 and Short().rollout.kind == "diffusion" and TrainConfig().steps == 200
    assert fields["steps"].metadata == base["steps"].metadata and fields["rollout"].metadata == base["rollout"].metadata
    assert list(fields) == list(base)  # every field keeps its place
    assert Short(steps=3).steps == 3
    with pytest.raises(TypeError, match="inherited fields only, not 'no_such_field'"):
        defaults(no_such_field=1)(type("Bad", (TrainConfig,), {}))
