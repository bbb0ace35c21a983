"""The chunked token log-prob and entropy of ``posttrain.models.likelihood`` equal the plain full-vocabulary
computations (values and gradients), across chunk boundaries, temperatures, dtypes and non-contiguous views."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F

from posttrain.models import likelihood
from posttrain.models.likelihood import entropy_from_logits, logprobs_from_logits
from posttrain.models.loading import disable_dropout
from posttrain.models.tiny import RECIPES, build_model, build_tokenizer


@pytest.fixture(params=[2**24, 2 * 17 * 5, 7 * 5], ids=["one-chunk", "two-rows-a-chunk", "position-chunks"])
def chunk_elements(request, monkeypatch) -> int:
    """Whole batch at once; two rows of 17 x 5 a chunk; 7 positions of a 5-token vocabulary a chunk."""
    monkeypatch.setattr(likelihood, "_CHUNK_ELEMENTS", request.param)
    return request.param


def test_hand_computed_value():
    logits = torch.tensor([[[0.0, math.log(3.0)]]])  # softmax = (1/4, 3/4)
    assert logprobs_from_logits(logits, torch.tensor([[1]])).item() == pytest.approx(math.log(0.75))
    assert logprobs_from_logits(logits, torch.tensor([[0]]), temperature=0.5).item() == pytest.approx(math.log(0.1))
    assert entropy_from_logits(logits).item() == pytest.approx(-(0.25 * math.log(0.25) + 0.75 * math.log(0.75)))


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_values_and_gradients_equal_the_plain_computation(chunk_elements, temperature, dtype):
    generator = torch.Generator().manual_seed(0)
    full = (3 * torch.randn(3, 17, 5, generator=generator)).to(dtype).requires_grad_()
    targets = torch.randint(0, 5, (3, 16), generator=generator)
    weights = torch.randn(3, 16, generator=generator)

    logits = full[:, :-1]  # non-contiguous, as in causal_token_logprobs
    ours = logprobs_from_logits(logits, targets, temperature)
    (ours * weights).sum().backward()
    grad_ours, full.grad = full.grad.clone(), None

    plain = torch.gather(F.log_softmax(full[:, :-1].float() / temperature, -1), -1, targets.unsqueeze(-1)).squeeze(-1)
    (plain * weights).sum().backward()
    assert ours.dtype == torch.float32
    torch.testing.assert_close(ours, plain, atol=1e-6, rtol=0)
    torch.testing.assert_close(grad_ours, full.grad, atol=1e-6 if dtype == torch.float32 else 1e-2, rtol=0)

    expected_entropy = -(F.softmax(logits.float() / temperature, -1) * F.log_softmax(logits.float() / temperature, -1)).sum(-1)
    entropy = entropy_from_logits(logits, temperature)
    assert not entropy.requires_grad
    torch.testing.assert_close(entropy, expected_entropy, atol=1e-5, rtol=0)


def test_two_dimensional_logits(chunk_elements):
    logits = torch.randn(9, 5, generator=torch.Generator().manual_seed(1))
    targets = torch.arange(9) % 5
    expected = F.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(logprobs_from_logits(logits, targets), expected)
    assert entropy_from_logits(logits).shape == (9,)


def _tiny_causal_lm(kind: str) -> torch.nn.Module:
    """A randomly initialised 2-layer Llama or Qwen2 (sdpa attention) of a 37-token vocabulary."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    config_class, model_class = (LlamaConfig, LlamaForCausalLM) if kind == "llama" else (Qwen2Config, Qwen2ForCausalLM)
    torch.manual_seed(0)
    config = config_class(vocab_size=37, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                          attn_implementation="sdpa")
    return model_class(config).float().eval()


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
@pytest.mark.parametrize("last", [None, 4])
def test_padding_free_equals_padded_values_and_gradients(kind, last):
    """Packed (one row, positions restarting per sequence) and padded (left-padded prompts, right-padded
    completions) log-probs and entropies agree within 1e-5 on every scored token, and so do the gradients of
    the same masked loss; a packed forward that let sequences attend to each other would fail this."""
    from posttrain.algos.sequences import pack_sequences
    from posttrain.models.likelihood import causal_token_logprobs

    model = _tiny_causal_lm(kind)
    prompts = [[1, 2, 3], [4, 5], [6, 7, 8, 9], [10]]
    completions = [[11, 12, 13, 14], [15], [16, 17], [18, 19, 20]]
    batch = pack_sequences(prompts, completions, pad_id=0)
    width = batch["completion_mask"].shape[1]
    results = []
    for padding_free in (False, True):
        model.zero_grad()
        logp, entropy = causal_token_logprobs(model, batch["input_ids"], batch["attention_mask"], temperature=0.7,
                                              with_entropy=True, last=last, padding_free=padding_free)
        real = batch["attention_mask"][:, 1:].bool() & batch["attention_mask"][:, :-1].bool()
        mask = (batch["completion_mask"] if last else real).float()
        weights = torch.linspace(-1.0, 1.0, mask.numel()).view_as(mask)
        (logp * mask * weights).sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        results.append((logp * mask, entropy * mask, grads))
    (padded, padded_entropy, padded_grads), (packed, packed_entropy, packed_grads) = results
    assert packed.shape == padded.shape == (4, width if last else batch["input_ids"].shape[1] - 1)
    assert padded.abs().sum() > 0
    torch.testing.assert_close(packed, padded, atol=1e-5, rtol=0)
    torch.testing.assert_close(packed_entropy, padded_entropy, atol=1e-5, rtol=0)
    for packed_grad, padded_grad in zip(packed_grads, padded_grads):
        torch.testing.assert_close(packed_grad, padded_grad, atol=1e-5, rtol=1e-4)


def test_padding_free_scores_only_real_tokens():
    """A position whose target or context is a pad is 0 in the packed output (the padded one holds a number
    there that callers mask out)."""
    from posttrain.models.likelihood import causal_token_logprobs

    model = _tiny_causal_lm("llama")
    input_ids = torch.tensor([[0, 1, 2, 3], [0, 0, 4, 5]])
    attention_mask = torch.tensor([[0, 1, 1, 1], [0, 0, 1, 1]])
    with torch.no_grad():
        logp, _ = causal_token_logprobs(model, input_ids, attention_mask, padding_free=True)
    assert logp.shape == (2, 3)
    assert (logp[:, 0] == 0).all() and logp[1, 1] == 0
    assert (logp[0, 1:] < 0).all() and logp[1, 2] < 0


def test_padding_free_refuses_a_model_that_may_not_separate_packed_sequences():
    """A model outside transformers' own classes (e.g. remote code) gets an error naming the option, not numbers
    computed with sequences attending to each other."""
    from posttrain.models.likelihood import causal_token_logprobs

    class Custom(torch.nn.Module):
        def forward(self, **kwargs):
            raise AssertionError("never called")

    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match="padding_free"):
        causal_token_logprobs(Custom(), ids, torch.ones_like(ids), padding_free=True)
    eager = _tiny_causal_lm("llama")
    eager.config._attn_implementation = "some_kernel"
    with pytest.raises(ValueError, match="padding_free"):
        causal_token_logprobs(eager, ids, torch.ones_like(ids), padding_free=True)


def test_disable_dropout_makes_train_mode_log_probs_equal_eval_modes() -> None:
    """With dropout on, the loss's train-mode forward differs from the eval-mode old log-probs (ratio != 1 before
    any update); ``disable_dropout`` turns nn.Dropout and the attention layers' functional dropout off."""
    torch.manual_seed(0)
    model = build_model(dataclasses.replace(RECIPES.get("causal-arithmetic"), seed=0), build_tokenizer())
    for module in model.modules():
        if hasattr(module, "attention_dropout"):
            module.attention_dropout = 0.5
    model.add_module("extra_dropout", torch.nn.Dropout(0.5))  # an nn.Dropout (outside the forward: its p is checked)
    ids = torch.randint(3, 50, (2, 8))
    mask = torch.ones_like(ids)

    def logprobs(train: bool) -> torch.Tensor:
        model.train(train)
        with torch.no_grad():
            return likelihood.causal_token_logprobs(model, ids, mask, last=4)[0]

    assert not torch.allclose(logprobs(True), logprobs(False))
    disable_dropout(model)
    assert model.extra_dropout.p == 0.0
    torch.testing.assert_close(logprobs(True), logprobs(False))
