"""Masked-diffusion model support: bidirectional attention on every allowed implementation, marking,
save/load round trip, mask-id resolution, Dream's logit shift, and the masked-diffusion SFT loss."""

from __future__ import annotations

import types

import pytest
import torch

from posttrain.models.diffusion import (
    diffusion_logits,
    diffusion_mask_token_id,
    diffusion_sft_loss,
    is_diffusion_model,
    load_diffusion_lm,
    resolve_mask_token_id,
    sft_batch,
    tiny_diffusion_model,
    uses_shifted_logits,
)
from posttrain.models.tiny import build_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


def _last_token_changes_first_logits(model, attention_mask=None) -> bool:
    ids = torch.randint(10, 60, (2, 9), generator=torch.Generator().manual_seed(0))
    other = ids.clone()
    other[:, -1] = (other[:, -1] + 7) % 60 + 10
    with torch.no_grad():
        a = diffusion_logits(model, ids, attention_mask)[:, 2]  # position 2: real in both rows below
        b = diffusion_logits(model, other, attention_mask)[:, 2]
    return bool(((a - b).abs().amax(-1) > 1e-6).all())


PADDINGS = {
    "none": None,
    "all-ones": torch.ones(2, 9, dtype=torch.long),
    "left-padded": torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1, 1], [1] * 9]),
}


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("arch", ["qwen2", "llama"])
@pytest.mark.parametrize("padding", list(PADDINGS))
def test_attention_is_bidirectional(tokenizer, attn, arch, padding):
    model = tiny_diffusion_model(tokenizer, arch=arch, attn_implementation=attn)
    assert model.config._attn_implementation == attn
    assert _last_token_changes_first_logits(model, PADDINGS[padding])


@pytest.mark.gpu
def test_attention_is_bidirectional_flash_attention_2(tokenizer):
    pytest.importorskip("flash_attn")
    model = tiny_diffusion_model(tokenizer, attn_implementation="flash_attention_2").to("cuda", torch.bfloat16)
    ids = torch.randint(10, 60, (2, 9), device="cuda")
    other = ids.clone()
    other[:, -1] = (other[:, -1] + 7) % 60 + 10
    with torch.no_grad():
        assert (diffusion_logits(model, ids)[:, 0] != diffusion_logits(model, other)[:, 0]).any()


def test_the_check_detects_a_causal_model(tokenizer):
    """Control: without make_bidirectional the same check fails, so the test above is meaningful."""
    from transformers import AutoModelForCausalLM

    causal = tiny_diffusion_model(tokenizer)
    config = causal.config.to_dict()
    for key in ("is_causal", "posttrain_kind", "posttrain_mask_token_id", "posttrain_logit_shift"):
        config.pop(key, None)
    plain = AutoModelForCausalLM.from_config(type(causal.config)(**config), attn_implementation="sdpa").eval()
    assert not is_diffusion_model(plain)
    assert not _last_token_changes_first_logits(plain)


def test_save_and_load_keeps_it_bidirectional(tokenizer, tmp_path):
    model = tiny_diffusion_model(tokenizer, arch="llama", attn_implementation="eager")
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    for attn in ("eager", "sdpa"):
        loaded = load_diffusion_lm(tmp_path, attn_implementation=attn)
        assert is_diffusion_model(loaded)
        assert diffusion_mask_token_id(loaded) == tokenizer.mask_token_id
        assert not uses_shifted_logits(loaded)
        assert all(not m.is_causal for m in loaded.modules() if hasattr(m, "is_causal") and isinstance(m.is_causal, bool))
        assert _last_token_changes_first_logits(loaded.eval())
        ids = torch.randint(10, 60, (1, 7))
        with torch.no_grad():
            assert torch.allclose(diffusion_logits(loaded, ids), diffusion_logits(model, ids), atol=1e-5)
    with pytest.raises(ValueError, match="not allowed"):
        load_diffusion_lm(tmp_path, attn_implementation="paged_attention")


def test_left_padding_gives_the_unpadded_logits(tokenizer):
    model = tiny_diffusion_model(tokenizer)
    ids = torch.randint(10, 60, (1, 6))
    padded = torch.cat([torch.full((1, 3), tokenizer.pad_token_id), ids], dim=1)
    am = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1, 1]])
    with torch.no_grad():
        plain = diffusion_logits(model, ids)
        both = diffusion_logits(model, torch.cat([padded, torch.cat([ids, ids[:, :3]], 1)]),
                                torch.cat([am, torch.ones_like(am)]))
        kept = diffusion_logits(model, padded, am, keep=torch.tensor([4, 8]))
    assert torch.allclose(both[0, 3:], plain[0], atol=1e-5)
    assert torch.allclose(kept[0], plain[0, [1, 5]], atol=1e-5)


def test_mask_token_resolution(tokenizer):
    assert resolve_mask_token_id(tokenizer) == tokenizer.convert_tokens_to_ids("<mask>")
    no_mask = types.SimpleNamespace(mask_token_id=None, get_vocab=lambda: {"a": 0, "<|mdm_mask|>": 126336})
    assert resolve_mask_token_id(no_mask, types.SimpleNamespace(mask_token_id=None)) == 126336
    assert resolve_mask_token_id(no_mask, types.SimpleNamespace(mask_token_id=151666)) == 151666
    generation = types.SimpleNamespace(generation_config=types.SimpleNamespace(mask_token_id=5))
    assert resolve_mask_token_id(None, generation) == 5
    bare = types.SimpleNamespace(mask_token_id=None, get_vocab=lambda: {"a": 0})
    with pytest.raises(ValueError, match="mask token"):
        resolve_mask_token_id(bare, types.SimpleNamespace())


class _ShiftedToy(torch.nn.Module):
    """Stands in for Dream: its logit for position i sits at position i-1 (one-hot of the next id)."""

    def __init__(self) -> None:
        super().__init__()
        self.config = types.SimpleNamespace(model_type="Dream")

    def forward(self, input_ids, attention_mask=None, position_ids=None):
        nxt = torch.roll(input_ids, -1, dims=1)
        return types.SimpleNamespace(logits=torch.nn.functional.one_hot(nxt, 50).float())


def test_dream_logits_are_unshifted():
    toy = _ShiftedToy()
    assert is_diffusion_model(toy) and uses_shifted_logits(toy)
    ids = torch.tensor([[3, 7, 9, 11]])
    logits = diffusion_logits(toy, ids)
    assert logits[0, 1:].argmax(-1).tolist() == [7, 9, 11]  # position i now predicts token i
    assert diffusion_logits(toy, ids, keep=torch.tensor([2, 3]))[0].argmax(-1).tolist() == [9, 11]


def test_sft_loss_masks_only_the_response_and_weights_by_inverse_t(tokenizer):
    model = tiny_diffusion_model(tokenizer)
    seen = {}
    original = model.forward

    def spy(*args, **kwargs):
        seen["ids"] = kwargs["input_ids"].clone()
        return original(*args, **kwargs)

    model.forward = spy
    prompts = [[20, 21, 22], [23]]
    responses = [[30, 31, tokenizer.eos_token_id], [32, tokenizer.eos_token_id]]
    ids, am, resp = sft_batch(prompts, responses, tokenizer.pad_token_id, tokenizer.eos_token_id, length=5)
    assert ids.shape == (2, 8) and resp.sum().item() == 10
    assert ids[1].tolist() == [tokenizer.pad_token_id] * 2 + [23, 32, tokenizer.eos_token_id] + [tokenizer.eos_token_id] * 3
    mask = tokenizer.mask_token_id
    for seed in range(20):
        loss, _ = diffusion_sft_loss(model, ids, resp, mask, torch.Generator().manual_seed(seed), am)
        noisy = seen["ids"]
        assert torch.equal(noisy[resp == 0], ids[resp == 0])  # prompt and pads never masked
        assert ((noisy == mask) | (noisy == ids)).all()
    # the loss by hand, with the same draws
    g = torch.Generator().manual_seed(3)
    loss, _ = diffusion_sft_loss(model, ids, resp, mask, g, am)
    g = torch.Generator().manual_seed(3)
    t = torch.rand(2, generator=g)
    p = (1 - 1e-3) * t + 1e-3
    masked = (torch.rand(ids.shape, generator=g) < p[:, None]) & resp.bool()
    with torch.no_grad():
        logp = torch.log_softmax(diffusion_logits(model, torch.where(masked, mask, ids), am).float(), -1)
    nll = -logp.gather(-1, ids.unsqueeze(-1)).squeeze(-1)
    expected = ((nll * masked / p[:, None]).sum(-1) / resp.sum(-1)).mean()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    loss.backward()
    assert any(p.grad is not None for p in model.parameters())


@pytest.fixture(scope="module")
def remote_code_dir(tmp_path_factory):
    from tests.remote_code_model import write_remote_code_model

    return write_remote_code_model(tmp_path_factory.mktemp("remote") / "tiny-llada")


def test_remote_code_checkpoint_loads_bidirectional_with_the_tokenizer_mask(remote_code_dir, tokenizer):
    model = load_diffusion_lm(remote_code_dir, trust_remote_code=True)
    assert type(model).__name__ == "TinyLLaDAModel" and is_diffusion_model(model)
    assert diffusion_mask_token_id(model) == tokenizer.mask_token_id and not uses_shifted_logits(model)
    assert _last_token_changes_first_logits(model)
    assert _last_token_changes_first_logits(model, PADDINGS["left-padded"])
    with pytest.raises(ValueError, match="trust_remote_code"):
        load_diffusion_lm(remote_code_dir)


def test_config_names_the_flag_a_remote_code_checkpoint_needs(remote_code_dir):
    from posttrain.algos.espo import ESPOConfig
    from posttrain.config import ConfigError, build_config

    with pytest.raises(ConfigError, match="trust_remote_code"):
        build_config(ESPOConfig, ["--model", str(remote_code_dir)]).validate()
    build_config(ESPOConfig, ["--model", str(remote_code_dir), "--trust_remote_code", "true"]).validate()
