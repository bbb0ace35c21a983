"""``--algo gpo`` (LLM setting) end to end: plain-python entry point on the embedded tiny model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from posttrain.algos.gpo.llm import GPO, GPOConfig
from posttrain.tasks.base import Example
from tests.e2e.conftest import REPO, deepspeed_launcher, run_entry, train_in_process

ARGS = ["--reward", "tests.e2e.rewards:digit_fraction", "--steps", "2", "--prompts_per_step", "2", "--group_size", "4",
        "--micro_batch_size", "8", "--eval_every", "2", "--eval_examples", "8", "--pass_k", "1", "--max_new_tokens", "6",
        "--progress", "false"]


def _run(args: list[str]) -> subprocess.CompletedProcess:
    code = "import sys; from posttrain.train import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600, check=False)


def test_gpo_llm_runs_and_logs_its_terms(tiny_arithmetic: Path, tmp_path: Path) -> None:
    """The clip variant (the penalty variant: tests/e2e/test_resume_gpo.py's runs)."""
    out = tmp_path / "clip"
    result = _run(["--algo", "gpo", "--gpo_variant", "clip", "--model", str(tiny_arithmetic),
                   "--output_dir", str(out), *ARGS])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["step"] > 0]
    assert len(train) == 2 and "eval/accuracy" in rows[-1]
    assert all(r["gpo/kl_guider_learner"] >= 0 for r in train)
    assert all(r["gpo/alpha"] == 2.0 and 0 <= r["gpo/backtrack_fraction"] <= 1 for r in train)
    assert (out / "checkpoints" / "step_2" / "COMPLETE").exists()


@pytest.mark.slow
@pytest.mark.distributed
def test_default_gpo_run_learns(tmp_path: Path) -> None:
    """``deepspeed posttrain/train.py --algo gpo`` with nothing else but a shorter budget (25 of its 200 steps,
    no pass@k): the embedded default must not get worse. Its warm start must have seen the guider's hinted
    prompts: the plain arithmetic warm start (the default before) had a guider at 0.05 accuracy on step 1,
    and its learner fell from 0.234 to 0.039 over the 200 steps."""
    out = tmp_path / "gpo"
    result = run_entry(["--algo", "gpo", "--output_dir", str(out), "--steps", "25", "--eval_every", "25",
                        "--pass_k", "1", "--progress", "false"], launcher=deepspeed_launcher(1), timeout=1500)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    start, end = rows[0]["eval/accuracy"], rows[-1]["eval/accuracy"]
    train = [r for r in rows if r["step"] > 0]
    assert rows[-1]["step"] == 25 and end >= start, (start, end)
    # the guider (hinted prompts) is a better policy than the learner from the first step on
    assert train[0]["train/guider_accuracy"] > start + 0.1
    # and it does not read the answer off the hint: most groups disagree, so GPO gets an RL signal
    assert sum(r["gpo/zero_advantage_groups"] for r in train) / len(train) < 0.7


def test_guider_prompt_template_and_validation() -> None:
    cfg = GPOConfig(algo="gpo", privileged_template="{prompt} [{answer}|{unit}]")
    algo = GPO.__new__(GPO)
    algo.config = cfg
    ex = Example(prompt="2+2=", answer="4", columns={"unit": "apples"})
    assert algo.guider_examples([ex])[0].prompt == "2+2= [4|apples]"
    with pytest.raises(ValueError, match="column 'unit'"):
        algo.guider_examples([Example(prompt="1+1=", answer="2")])
    bad = {name for name, _, _ in GPOConfig(algo="gpo", inner_clip=1.5, privileged_template="x",
                                            clip_low=0.2, kl_coef=0.5).incompatibilities()}
    assert {"inner_clip", "privileged_template", "clip_low", "kl_coef"} <= bad
    for template in ("{prompt} {}", "{prompt} {0}", "{prompt} {hint"):  # positional or broken fields
        assert [n for n, _, _ in GPOConfig(algo="gpo", privileged_template=template).incompatibilities()] == \
            ["privileged_template"]
    assert not GPOConfig(algo="gpo").incompatibilities()


def test_kl_coef_is_rejected_at_start_up(tmp_path: Path, capsys: pytest.CaptureFixture,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """GPO has no frozen reference: --kl_coef used to be accepted and ignored."""
    assert train_in_process(["--algo", "gpo", "--kl_coef", "0.5", "--steps", "1", "--output_dir", str(tmp_path)],
                            monkeypatch) == 2
    stderr = capsys.readouterr().err
    assert "'kl_coef' = 0.5" in stderr and "no frozen reference" in stderr
