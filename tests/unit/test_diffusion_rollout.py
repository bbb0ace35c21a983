"""The diffusion sampler engine: schedule, Gumbel-max sampling, agreement with a straightforward
LLaDA-style loop, EOS stopping, padding invariance, seeding and weight sync."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from posttrain.engines.base import RolloutEngine, SamplingParams
from posttrain.engines.diffusion import (
    DiffusionRolloutEngine,
    DiffusionSampling,
    fixed_length_completions,
    gumbel_candidates,
    transfer_schedule,
)
from posttrain.models.diffusion import diffusion_logits, tiny_diffusion_model
from posttrain.models.tiny import build_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


@pytest.fixture(scope="module")
def model(tokenizer):
    return tiny_diffusion_model(tokenizer, seed=4)


def _prompts(tokenizer):
    return [tokenizer(t, add_special_tokens=False)["input_ids"] for t in ("12+3=", "7", "abc*d")]


def reference_generate(model, prompt, length, block_length, steps, mask_id):
    """LLaDA's ``generate`` at temperature 0, low-confidence remasking, one unpadded row, full logits."""
    x = torch.full((1, len(prompt) + length), mask_id, dtype=torch.long)
    x[0, : len(prompt)] = torch.tensor(prompt)
    num_blocks = length // block_length
    steps_per_block = steps // num_blocks
    for b in range(num_blocks):
        lo, hi = len(prompt) + b * block_length, len(prompt) + (b + 1) * block_length
        n = (x[:, lo:hi] == mask_id).sum()
        counts = [int(n // steps_per_block) + (1 if i < n % steps_per_block else 0) for i in range(steps_per_block)]
        for i in range(steps_per_block):
            mask_index = x == mask_id
            with torch.no_grad():
                logits = diffusion_logits(model, x)
            logits[..., mask_id] = float("-inf")
            x0 = logits.argmax(-1)
            p = F.softmax(logits.double(), -1).gather(-1, x0.unsqueeze(-1)).squeeze(-1)
            p[:, hi:] = float("-inf")
            confidence = torch.where(mask_index, p, torch.tensor(float("-inf"), dtype=p.dtype))
            if counts[i]:
                idx = torch.topk(confidence[0], counts[i]).indices
                x[0, idx] = x0[0, idx]
    return x[0, len(prompt):].tolist()


def test_transfer_schedule_spreads_the_remainder_first():
    sched = transfer_schedule(torch.tensor([7, 4, 0]), 3)
    assert sched.tolist() == [[3, 2, 2], [2, 1, 1], [0, 0, 0]]


def test_gumbel_max_samples_the_tempered_softmax():
    logits = torch.tensor([1.0, 0.0, -1.0, 2.0]).expand(20000, -1)
    g = torch.Generator().manual_seed(0)
    for temperature in (0.5, 1.0):
        draws = gumbel_candidates(logits, temperature, g)
        freq = torch.bincount(draws, minlength=4).double() / draws.numel()
        assert torch.allclose(freq, torch.softmax(logits[0].double() / temperature, -1), atol=0.015)
    assert gumbel_candidates(logits[:2], 0.0, g).tolist() == [3, 3]
    top1 = gumbel_candidates(logits[:500], 1.0, g, top_k=1)
    assert (top1 == 3).all()


def test_greedy_matches_the_straightforward_llada_loop(model, tokenizer):
    length, block, steps = 8, 4, 8
    engine = DiffusionRolloutEngine(copy.deepcopy(model), tokenizer,
                                    DiffusionSampling(block_length=block, steps=steps, stop_after_eos=False))
    assert isinstance(engine, RolloutEngine)
    prompts = _prompts(tokenizer)
    out = engine.generate(prompts, SamplingParams(max_new_tokens=length, temperature=0.0))
    for row, prompt in enumerate(prompts):
        expected = reference_generate(model, prompt, length, block, steps, tokenizer.mask_token_id)
        full = fixed_length_completions([out.completion_ids[row]], length, tokenizer.eos_token_id)[0].tolist()
        if out.finish_reasons[row] == "stop":
            cut = expected.index(tokenizer.eos_token_id) + 1
            assert out.completion_ids[row] == expected[:cut]
        else:
            assert full == expected
        assert len(out.logprobs[row]) == len(out.completion_ids[row])
        assert all(lp <= 0 for lp in out.logprobs[row])
    assert engine.forward_calls == steps  # one forward per step for the whole batch


def test_seeded_sampling_is_repeatable_and_padding_invariant(model, tokenizer):
    engine = DiffusionRolloutEngine(copy.deepcopy(model), tokenizer, DiffusionSampling(block_length=4, steps=4))
    prompts = _prompts(tokenizer)
    params = SamplingParams(max_new_tokens=8, temperature=1.0, seed=11)
    a = engine.generate(prompts, params)
    b = engine.generate(prompts, params)
    c = engine.generate(prompts, SamplingParams(max_new_tokens=8, temperature=1.0, seed=12))
    assert a.completion_ids == b.completion_ids and a.logprobs == b.logprobs
    assert a.completion_ids != c.completion_ids
    greedy = SamplingParams(max_new_tokens=8, temperature=0.0)
    batched = engine.generate(prompts, greedy).completion_ids
    alone = [engine.generate([p], greedy).completion_ids[0] for p in prompts]
    assert batched == alone
    random = DiffusionRolloutEngine(copy.deepcopy(model), tokenizer,
                                    DiffusionSampling(block_length=8, steps=8, remasking="random"))
    out = random.generate(prompts, params)
    assert all(tokenizer.mask_token_id not in ids for ids in out.completion_ids)


class _EosAfter(torch.nn.Module):
    """A model that writes token 50 then EOS everywhere: completion [50, <eos>] at the first block."""

    def __init__(self, eos: int, prompt_len: int, vocab: int) -> None:
        super().__init__()
        self.config = type("C", (), {"posttrain_kind": "diffusion", "posttrain_mask_token_id": 4,
                                     "posttrain_logit_shift": False, "model_type": "toy"})()
        self.eos, self.prompt_len, self.vocab = eos, prompt_len, vocab
        self.calls = 0

    def forward(self, input_ids, attention_mask=None, position_ids=None):
        self.calls += 1
        b, t = input_ids.shape
        target = torch.full((b, t), self.eos)
        target[:, self.prompt_len] = 50
        return type("O", (), {"logits": F.one_hot(target, self.vocab).float() * 5})()


def test_rows_stop_after_eos_and_the_tail_is_eos(tokenizer):
    prompt = [20, 21, 22]
    toy = _EosAfter(tokenizer.eos_token_id, len(prompt), len(tokenizer))
    engine = DiffusionRolloutEngine(toy, tokenizer, DiffusionSampling(block_length=4, steps=16))
    out = engine.generate([prompt], SamplingParams(max_new_tokens=16, temperature=1.0, seed=0))
    assert out.completion_ids == [[50, tokenizer.eos_token_id]] and out.finish_reasons == ["stop"]
    assert engine.forward_calls == 4  # first block only (4 steps); the other 3 blocks are skipped
    full = DiffusionRolloutEngine(toy, tokenizer, DiffusionSampling(block_length=4, steps=16, stop_after_eos=False))
    again = full.generate([prompt], SamplingParams(max_new_tokens=16, temperature=1.0, seed=0))
    assert again.completion_ids == out.completion_ids and full.forward_calls == 16


def test_update_weights_syncs_the_policy(model, tokenizer):
    engine = DiffusionRolloutEngine(tiny_diffusion_model(tokenizer, seed=99), tokenizer,
                                    DiffusionSampling(block_length=8, steps=8))
    prompts = _prompts(tokenizer)
    greedy = SamplingParams(max_new_tokens=8, temperature=0.0)
    target = DiffusionRolloutEngine(copy.deepcopy(model), tokenizer, DiffusionSampling(block_length=8, steps=8))
    assert engine.generate(prompts, greedy).completion_ids != target.generate(prompts, greedy).completion_ids
    engine.update_weights((f"module.{n}", p.detach()) for n, p in model.named_parameters())
    assert engine.weight_version == 1
    assert engine.generate(prompts, greedy).completion_ids == target.generate(prompts, greedy).completion_ids
    with pytest.raises(KeyError, match="no parameter"):
        engine.update_weights([("model.nope.weight", torch.zeros(1))])
