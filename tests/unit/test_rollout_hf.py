"""HFRolloutEngine: sampling log-probs agree with training log-probs, greedy agrees with HF, stopping,
determinism, and weight sync through DDP / PEFT names."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from posttrain.common.padding import left_pad
from posttrain.engines.base import RolloutEngine, SamplingParams
from posttrain.engines.build import build_engine
from posttrain.engines.hf import HFRolloutEngine, inverse_cdf_sample
from posttrain.engines.spec import HFSpec
from posttrain.engines.weight_sync.weights import canonical_name, is_adapter_tensor
from posttrain.models.likelihood import causal_token_logprobs
from posttrain.models.tiny import TinyRecipe, build_model, build_tokenizer

PROMPTS = ["12+7=", "a", "hello there", "x*y", "99-3=", "The cat"]


def _recipe(seed: int) -> TinyRecipe:
    return TinyRecipe(name="test-rollout", kind="causal", arch="qwen2", hidden_size=32, num_layers=2, num_heads=4,
                      num_kv_heads=2, intermediate_size=64, max_position_embeddings=128, task=None,
                      warm_start=None, warm_start_steps=0, lr=0.0, batch_size=1, seed=seed)


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


@pytest.fixture(scope="module")
def model(tokenizer) -> PreTrainedModel:
    return build_model(_recipe(0), tokenizer).eval()


@pytest.fixture(scope="module")
def other_model(tokenizer) -> PreTrainedModel:
    return build_model(_recipe(1), tokenizer).eval()


@pytest.fixture(scope="module")
def prompt_ids(tokenizer) -> list[list[int]]:
    return [tokenizer(p, add_special_tokens=False)["input_ids"] for p in PROMPTS]


def _engine(model: PreTrainedModel, tokenizer, **kwargs) -> HFRolloutEngine:
    return HFRolloutEngine(copy.deepcopy(model), tokenizer, **kwargs)



@pytest.mark.parametrize("max_batch_size", [2, 64])
def test_sampling_logprobs_equal_training_logprobs(model, tokenizer, prompt_ids, max_batch_size):
    engine = _engine(model, tokenizer, max_batch_size=max_batch_size)
    out = engine.generate(prompt_ids, SamplingParams(max_new_tokens=12, temperature=1.0, seed=3))
    rows = [p + c for p, c in zip(out.prompt_ids, out.completion_ids)]
    ids, mask = left_pad(rows, tokenizer.pad_token_id)
    with torch.no_grad():
        train_logprobs, _ = causal_token_logprobs(model, ids, mask)
    width = ids.size(1)
    for i, (prompt, completion) in enumerate(zip(out.prompt_ids, out.completion_ids)):
        start = width - len(completion) - 1  # logprob at t predicts token t + 1
        expected = train_logprobs[i, start:]
        assert len(out.logprobs[i]) == len(completion) == expected.numel()
        torch.testing.assert_close(torch.tensor(out.logprobs[i]), expected, atol=1e-4, rtol=0)


def _hand_processed_logprobs(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> dict[int, float]:
    """Log-probs of the kept tokens, written the slow obvious way."""
    scaled = (logits.double() / temperature).tolist()
    ranked = sorted(range(len(scaled)), key=lambda t: -scaled[t])[:top_k]
    probs = torch.tensor([scaled[t] for t in ranked]).softmax(0).tolist()
    kept, mass = [], 0.0
    for token, p in zip(ranked, probs):
        if mass >= top_p:
            break
        kept.append(token)
        mass += p
    kept_logits = torch.tensor([scaled[t] for t in kept])
    return dict(zip(kept, torch.log_softmax(kept_logits, 0).tolist()))


@pytest.mark.parametrize("top_p", [1.0, 0.8])
def test_processed_logprobs_match_hand_computation(model, tokenizer, prompt_ids, top_p):
    temperature, top_k = 0.7, 5
    params = SamplingParams(max_new_tokens=6, temperature=temperature, top_k=top_k, top_p=top_p, seed=11)
    out = _engine(model, tokenizer).generate(prompt_ids, params)
    for prompt, completion, logprobs in zip(out.prompt_ids, out.completion_ids, out.logprobs):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([prompt + completion])).logits[0]
        for step, (token, logprob) in enumerate(zip(completion, logprobs)):
            kept = _hand_processed_logprobs(logits[len(prompt) - 1 + step], temperature, top_k, top_p)
            assert token in kept, f"sampled token {token} outside the top-k/top-p set {sorted(kept)}"
            assert logprob == pytest.approx(kept[token], abs=1e-4)


def test_greedy_matches_hf_generate(model, tokenizer, prompt_ids):
    new = 10
    out = _engine(model, tokenizer).generate(prompt_ids, SamplingParams(max_new_tokens=new, temperature=0.0))
    ids, mask = left_pad(prompt_ids, tokenizer.pad_token_id)
    with torch.no_grad():
        reference = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new, do_sample=False)
    for i, completion in enumerate(out.completion_ids):
        expected = reference[i, ids.size(1):].tolist()
        if tokenizer.eos_token_id in expected:
            expected = expected[: expected.index(tokenizer.eos_token_id) + 1]
        assert completion == expected
        # greedy log-probs are those of the unscaled model distribution
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([prompt_ids[i] + completion])).logits[0]
        unscaled = F.log_softmax(logits[len(prompt_ids[i]) - 1 : -1], -1)
        torch.testing.assert_close(torch.tensor(out.logprobs[i]),
                                   unscaled.gather(-1, torch.tensor(completion)[:, None])[:, 0], atol=1e-4, rtol=0)


def test_seeded_determinism(model, tokenizer, prompt_ids):
    engine = _engine(model, tokenizer, max_batch_size=4)
    params = SamplingParams(max_new_tokens=8, seed=5)
    first, second = engine.generate(prompt_ids, params), engine.generate(prompt_ids, params)
    assert first.completion_ids == second.completion_ids
    assert first.logprobs == second.logprobs
    other = engine.generate(prompt_ids, SamplingParams(max_new_tokens=8, seed=6))
    assert other.completion_ids != first.completion_ids


def test_stop_tokens_finish_reasons_and_max_new_tokens(model, tokenizer, prompt_ids):
    engine = _engine(model, tokenizer)
    greedy = SamplingParams(max_new_tokens=10, temperature=0.0)
    free = engine.generate(prompt_ids, greedy)
    assert all(len(c) == 10 and r == "length" for c, r in zip(free.completion_ids, free.finish_reasons))
    stop = free.completion_ids[0][3]
    stopped = engine.generate(prompt_ids, SamplingParams(max_new_tokens=10, temperature=0.0, stop_token_ids=(stop,)))
    assert stopped.finish_reasons[0] == "stop"
    for full, cut, reason in zip(free.completion_ids, stopped.completion_ids, stopped.finish_reasons):
        if stop in full:  # cut right after the first stop token, which is kept
            assert cut == full[: full.index(stop) + 1] and reason == "stop"
        else:  # rows sharing the batch with finished ones are unaffected
            assert cut == full and reason == "length"
    assert stopped.texts == tokenizer.batch_decode(stopped.completion_ids, skip_special_tokens=True)


def test_tokenizer_eos_stops(model, prompt_ids):
    greedy = SamplingParams(max_new_tokens=10, temperature=0.0)
    tokenizer = build_tokenizer()
    first = _engine(model, tokenizer).generate(prompt_ids[:1], greedy).completion_ids[0]
    tokenizer.eos_token = tokenizer.convert_ids_to_tokens(first[2])
    out = _engine(model, tokenizer).generate(prompt_ids[:1], greedy)
    cut = first[: first.index(first[2]) + 1]
    assert out.completion_ids[0] == cut and out.finish_reasons == ["stop"]


def _ddp_names(model: PreTrainedModel) -> list[tuple[str, torch.Tensor]]:
    return [(f"module.{name}", tensor) for name, tensor in model.state_dict().items()]


def test_update_weights_from_ddp_names_matches_source_model(model, other_model, tokenizer, prompt_ids):
    engine = _engine(model, tokenizer)
    params = SamplingParams(max_new_tokens=8, seed=2)
    reference = _engine(other_model, tokenizer).generate(prompt_ids, params)
    assert engine.generate(prompt_ids, params).completion_ids != reference.completion_ids
    engine.update_weights(_ddp_names(other_model))
    synced = engine.generate(prompt_ids, params)
    assert engine.weight_version == 1
    assert synced.completion_ids == reference.completion_ids
    assert synced.logprobs == reference.logprobs


def test_update_weights_from_merged_peft_model(model, other_model, tokenizer, prompt_ids):
    peft = pytest.importorskip("peft")
    trained = peft.get_peft_model(copy.deepcopy(other_model), peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for name, tensor in trained.named_parameters():
            if "lora_B" in name:
                tensor.normal_(generator=torch.Generator().manual_seed(0))
    trained.merge_adapter()
    names = [name for name, _ in trained.named_parameters()]
    assert any(".base_layer." in n for n in names) and any("lora_A" in n for n in names)
    engine = _engine(model, tokenizer)
    engine.update_weights(trained.named_parameters())
    ids = torch.tensor([prompt_ids[2]])
    with torch.no_grad():  # a merged PEFT model computes with the merged base weights
        torch.testing.assert_close(engine.model(input_ids=ids).logits, trained(input_ids=ids).logits)
        assert not torch.allclose(engine.model(input_ids=ids).logits, other_model(input_ids=ids).logits)


def test_update_weights_casts_and_accepts_either_tied_name(model, other_model, tokenizer):
    engine = HFRolloutEngine(copy.deepcopy(model).to(torch.bfloat16), tokenizer)
    source = other_model.lm_head.weight
    assert model.lm_head.weight is model.model.embed_tokens.weight  # the tiny recipe ties them
    engine.update_weights([("lm_head.weight", source)])
    torch.testing.assert_close(engine.model.model.embed_tokens.weight, source.to(torch.bfloat16))
    assert engine.model.lm_head.weight.dtype == torch.bfloat16
    engine.update_weights([("model.embed_tokens.weight", model.lm_head.weight)])
    torch.testing.assert_close(engine.model.lm_head.weight, model.lm_head.weight.to(torch.bfloat16))
    assert engine.weight_version == 2


def test_update_weights_errors_name_the_parameter(model, other_model, tokenizer, prompt_ids):
    engine = _engine(model, tokenizer)
    with pytest.raises(KeyError, match="model.not_a_layer.weight"):
        engine.update_weights([("module.model.not_a_layer.weight", torch.zeros(3))])
    with pytest.raises(ValueError, match="model.norm.weight"):
        engine.update_weights([("model.norm.weight", torch.zeros(7))])
    assert engine.weight_version == 0
    engine.generate(prompt_ids, SamplingParams(max_new_tokens=2, seed=0))  # nothing was copied: still usable
    good = list(other_model.state_dict().items())[:3]
    with pytest.raises(KeyError, match="bogus"):
        engine.update_weights(good + [("bogus.weight", torch.zeros(1))])
    with pytest.raises(RuntimeError, match="bogus"):  # half-updated model refuses to generate
        engine.generate(prompt_ids, SamplingParams(max_new_tokens=2, seed=0))
    engine.update_weights(other_model.state_dict().items())
    assert engine.weight_version == 1
    engine.generate(prompt_ids, SamplingParams(max_new_tokens=2, seed=0))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("module.model.norm.weight", "model.norm.weight"),
        ("module.module.lm_head.weight", "lm_head.weight"),
        ("base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight", "model.layers.0.self_attn.q_proj.weight"),
        ("module.base_model.model.lm_head.modules_to_save.default.weight", "lm_head.weight"),
        ("_orig_mod.model.embed_tokens.weight", "model.embed_tokens.weight"),
    ],
)
def test_canonical_name(name, expected):
    assert canonical_name(name) == expected
    assert not is_adapter_tensor(name)


@pytest.mark.parametrize("name", ["base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight",
                                  "model.layers.0.mlp.up_proj.lora_magnitude_vector.default.weight",
                                  "base_model.model.lm_head.original_module.weight"])
def test_adapter_tensors_are_recognised(name):
    assert is_adapter_tensor(name)


def test_registry_and_input_validation(model, tokenizer):
    engine = build_engine(HFSpec(), model=copy.deepcopy(model), tokenizer=tokenizer)
    assert isinstance(engine, HFRolloutEngine) and isinstance(engine, RolloutEngine)
    with pytest.raises(ValueError, match="prompt 1 is empty"):
        engine.generate([[5], []], SamplingParams())
    assert len(engine.generate([], SamplingParams())) == 0
    with pytest.raises(ValueError, match="max_batch_size"):
        HFRolloutEngine(model, tokenizer, max_batch_size=0)


def test_inverse_cdf_sample_follows_the_distribution() -> None:
    """Frequencies of 20k seeded draws match the row's probabilities (an unnormalised row too); zero-probability
    entries, leading, inner or trailing, are never drawn; a one-hot row always gives its token."""
    probs = torch.tensor([[0.0, 0.2, 0.0, 0.3, 0.5, 0.0], [0.0, 0.0, 0.0, 2.0, 0.0, 0.0]])
    generator = torch.Generator().manual_seed(0)
    draws = torch.stack([inverse_cdf_sample(probs, generator) for _ in range(20000)])  # [N, 2]
    counts = torch.bincount(draws[:, 0], minlength=6).double() / len(draws)
    assert counts[[0, 2, 5]].tolist() == [0.0, 0.0, 0.0]
    assert torch.allclose(counts[[1, 3, 4]], torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64), atol=0.015)
    assert draws[:, 1].eq(3).all()


def test_inverse_cdf_sample_clamps_a_draw_on_the_total(monkeypatch) -> None:
    """A uniform that rounds onto the row's total (u * total == total) gives the last token with positive
    probability, not the index past the vocabulary or a trailing zero-probability token."""
    probs = torch.tensor([[0.25, 0.75, 0.0, 0.0]])
    monkeypatch.setattr(torch, "rand", lambda *size, **kwargs: torch.ones(*size, dtype=torch.float64))
    assert inverse_cdf_sample(probs, torch.Generator()).tolist() == [1]


def test_identical_prompts_are_prefilled_once(model, tokenizer, prompt_ids) -> None:
    """A group's G copies of a prompt share one prefill: the first forward sees the distinct prompts only, and
    every copy still gets a full completion."""
    engine = _engine(model, tokenizer)
    batch_sizes: list[int] = []
    handle = engine.model.register_forward_pre_hook(
        lambda module, args, kwargs: batch_sizes.append(kwargs["input_ids"].shape[0]), with_kwargs=True)
    try:
        grouped = [p for p in prompt_ids[:2] for _ in range(3)]
        rollouts = engine.generate(grouped, SamplingParams(max_new_tokens=4, temperature=1.0, seed=0))
    finally:
        handle.remove()
    assert batch_sizes[0] == 2 and set(batch_sizes[1:]) == {6}
    assert len(rollouts.completion_ids) == 6 and all(1 <= len(ids) <= 4 for ids in rollouts.completion_ids)
