"""Packing prompts and completions, and completion-only log-probs on a left-padded batch."""

from __future__ import annotations

import torch

from posttrain.algos.sequences import pack_sequences
from posttrain.models.likelihood import causal_token_logprobs


def test_pack_layout() -> None:
    packed = pack_sequences([[5, 6], [7]], [[1, 2, 3], []], pad_id=0)
    assert packed["input_ids"].tolist() == [[5, 6, 1, 2, 3], [0, 7, 0, 0, 0]]
    assert packed["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [0, 1, 0, 0, 0]]
    assert packed["completion_mask"].tolist() == [[1, 1, 1], [0, 0, 0]]


def test_last_tokens_match_full_logprobs() -> None:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=20, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1)).eval()
    packed = pack_sequences([[3, 4, 5], [6]], [[7, 8], [9, 10]], pad_id=0)
    full, _ = causal_token_logprobs(model, packed["input_ids"], packed["attention_mask"])
    last, _ = causal_token_logprobs(model, packed["input_ids"], packed["attention_mask"], last=2)
    torch.testing.assert_close(last, full[:, -2:])
    # the short prompt's completion scores the same as without padding
    alone, _ = causal_token_logprobs(model, torch.tensor([[6, 9, 10]]), torch.ones(1, 3, dtype=torch.long))
    torch.testing.assert_close(last[1], alone[0, -2:], atol=1e-5, rtol=1e-5)
