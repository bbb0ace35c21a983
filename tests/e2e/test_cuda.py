"""The CUDA tier: the rollout engines and the real entry point on a GPU (every test here is marked ``gpu``
and skipped without CUDA; ``make test`` never runs them, ``pytest -m gpu`` on a GPU machine does).

What the CPU suite proves for the CPU, these prove for CUDA: the KV-cached engine's sampling log-probs are
the trainer's log-probs and its greedy output is ``generate``'s, the diffusion sampler runs on the device,
and ``deepspeed posttrain/train.py`` trains a causal model (GRPO, ZeRO-0 and ZeRO-3 in bf16, PPO with its
critic) and a diffusion model (ESPO) over NCCL, writing the same metrics and checkpoints.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch

from posttrain.common.padding import left_pad
from posttrain.engines.base import SamplingParams
from posttrain.engines.hf import HFRolloutEngine
from posttrain.models.likelihood import causal_token_logprobs
from posttrain.models.tiny import RECIPES, build_model, build_tokenizer
from tests.e2e.conftest import deepspeed_launcher, run_entry
from tests.e2e.test_train import SMALL, check_run, weights_changed

pytestmark = pytest.mark.gpu

PROMPTS = ["12+7=", "a", "hello there", "x*y", "99-3=", "The cat"]


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


@pytest.fixture(scope="module")
def prompt_ids(tokenizer) -> list[list[int]]:
    return [tokenizer(p, add_special_tokens=False)["input_ids"] for p in PROMPTS]


@pytest.mark.parametrize("dtype,atol", [(torch.float32, 1e-3), (torch.bfloat16, 0.1)])
def test_hf_engine_sampling_logprobs_equal_training_logprobs_on_cuda(tokenizer, prompt_ids, dtype, atol):
    model = build_model(RECIPES.get("causal-arithmetic"), tokenizer).to("cuda", dtype).eval()
    engine = HFRolloutEngine(copy.deepcopy(model), tokenizer, device="cuda")
    out = engine.generate(prompt_ids, SamplingParams(max_new_tokens=12, temperature=1.0, seed=3))
    assert out.completion_ids and all(out.completion_ids)
    rows = [p + c for p, c in zip(out.prompt_ids, out.completion_ids)]
    ids, mask = (t.to("cuda") for t in left_pad(rows, tokenizer.pad_token_id))
    with torch.no_grad():
        train_logprobs, _ = causal_token_logprobs(model, ids, mask)
    width = ids.size(1)
    for i, completion in enumerate(out.completion_ids):
        expected = train_logprobs[i, width - len(completion) - 1:].float().cpu()
        assert len(out.logprobs[i]) == len(completion)
        torch.testing.assert_close(torch.tensor(out.logprobs[i]), expected, atol=atol, rtol=0)


def test_hf_engine_greedy_matches_generate_on_cuda(tokenizer, prompt_ids):
    model = build_model(RECIPES.get("causal-arithmetic"), tokenizer).to("cuda").eval()
    engine = HFRolloutEngine(copy.deepcopy(model), tokenizer, device="cuda")
    out = engine.generate(prompt_ids, SamplingParams(max_new_tokens=10, temperature=0.0))
    ids, mask = (t.to("cuda") for t in left_pad(prompt_ids, tokenizer.pad_token_id))
    with torch.no_grad():
        reference = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=10, do_sample=False)
    for i, completion in enumerate(out.completion_ids):
        expected = reference[i, ids.size(1):].tolist()
        if tokenizer.eos_token_id in expected:
            expected = expected[: expected.index(tokenizer.eos_token_id) + 1]
        assert completion == expected


def test_diffusion_sampler_on_cuda(tiny_diffusion: Path):
    from posttrain.engines.diffusion import DiffusionRolloutEngine, DiffusionSampling
    from posttrain.models.diffusion import load_diffusion_lm
    from posttrain.models.loading import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_diffusion))
    engine = DiffusionRolloutEngine(load_diffusion_lm(tiny_diffusion), tokenizer, device="cuda",
                                    sampling=DiffusionSampling(block_length=8, steps=16))
    prompts = [tokenizer("1.3.|.2..|", add_special_tokens=False)["input_ids"]] * 3
    out = engine.generate(prompts, SamplingParams(max_new_tokens=16, temperature=0.0))
    assert len(out.completion_ids) == 3 and all(len(c) <= 16 for c in out.completion_ids)
    assert out.completion_ids[0] == out.completion_ids[1] == out.completion_ids[2]  # greedy is deterministic
    assert all(engine.mask_token_id not in completion for completion in out.completion_ids)


@pytest.mark.parametrize("extra", [[], ["--zero_stage", "3", "--precision", "bf16", "--kl_coef", "0.05"]],
                         ids=["zero0-fp32", "zero3-bf16"])
def test_grpo_trains_on_cuda(tiny_arithmetic: Path, tmp_path: Path, extra: list[str]):
    out = tmp_path / "run"
    result = run_entry(["--algo", "grpo", "--model", str(tiny_arithmetic), "--output_dir", str(out), *SMALL, *extra],
                       launcher=deepspeed_launcher(1))
    rows = check_run(result, out)
    assert weights_changed(tiny_arithmetic, out, 2)
    assert all(r["perf/peak_memory_mb"] > 0 for r in rows if r["step"] > 0)


def test_ppo_with_critic_trains_on_cuda(tiny_arithmetic: Path, tmp_path: Path):
    out = tmp_path / "ppo"
    result = run_entry(["--algo", "ppo", "--model", str(tiny_arithmetic), "--output_dir", str(out), *SMALL],
                       launcher=deepspeed_launcher(1))
    check_run(result, out)
    assert (out / "checkpoints" / "step_2" / "ds_critic").is_dir()
    assert weights_changed(tiny_arithmetic, out, 2)


def test_espo_trains_on_cuda(tiny_diffusion: Path, tmp_path: Path):
    out = tmp_path / "espo"
    result = run_entry(["--algo", "espo", "--model", str(tiny_diffusion), "--output_dir", str(out), "--task", "sudoku",
                        "--reward", "tests.e2e.rewards:digit_fraction", "--steps", "2", "--prompts_per_step", "2",
                        "--group_size", "4", "--micro_batch_size", "4", "--max_new_tokens", "20", "--block_length",
                        "10", "--eval_every", "2", "--eval_examples", "8", "--progress", "false"],
                       launcher=deepspeed_launcher(1))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["step"] == 2 and all(torch.isfinite(torch.tensor(r["train/loss"])) for r in rows if r["step"] > 0)
