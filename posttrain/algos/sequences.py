"""Pack prompts and completions into padded training tensors.

Prompts are left-padded to a common length P and completions right-padded to C, so every
completion starts at column P and ``causal_token_logprobs(..., last=C)`` scores exactly the
completion tokens. ``completion_mask`` ([B, C]) marks real completion tokens.
"""

from __future__ import annotations

import torch


def pack_sequences(prompt_ids: list[list[int]], completion_ids: list[list[int]], pad_id: int) -> dict[str, torch.Tensor]:
    if len(prompt_ids) != len(completion_ids):
        raise ValueError(f"{len(prompt_ids)} prompts but {len(completion_ids)} completions")
    batch = len(prompt_ids)
    prompt_len = max(len(p) for p in prompt_ids)
    completion_len = max(1, max(len(c) for c in completion_ids))
    input_ids = torch.full((batch, prompt_len + completion_len), pad_id, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    completion_mask = torch.zeros(batch, completion_len, dtype=torch.float32)
    for i, (prompt, completion) in enumerate(zip(prompt_ids, completion_ids)):
        input_ids[i, prompt_len - len(prompt) : prompt_len] = torch.tensor(prompt, dtype=torch.long)
        attention_mask[i, prompt_len - len(prompt) : prompt_len] = 1
        if completion:
            input_ids[i, prompt_len : prompt_len + len(completion)] = torch.tensor(completion, dtype=torch.long)
            attention_mask[i, prompt_len : prompt_len + len(completion)] = 1
            completion_mask[i, : len(completion)] = 1.0
    return {"input_ids": input_ids, "attention_mask": attention_mask, "completion_mask": completion_mask}
