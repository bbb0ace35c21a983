"""The one left-padding helper: token-id lists -> a padded batch, as every generation and scoring path
lays it out (prompts right-aligned, positions from the attention mask, see ``left_padded_positions``)."""

from __future__ import annotations

import torch


def left_pad(sequences: list[list[int]], pad_id: int, width: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask)``, both ``[B, width]`` long tensors, each row right-aligned.

    ``width`` defaults to the longest sequence; a sequence longer than ``width`` raises."""
    if not sequences:
        raise ValueError("left_pad needs at least one sequence")
    longest = max(len(s) for s in sequences)
    width = longest if width is None else width
    if longest > width:
        raise ValueError(f"a sequence of {longest} tokens does not fit width {width}")
    input_ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        if seq:
            input_ids[row, width - len(seq):] = torch.tensor(seq, dtype=torch.long)
            attention_mask[row, width - len(seq):] = 1
    return input_ids, attention_mask


def left_padded_positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """Position ids of a left-padded batch: ``cumsum(mask) - 1``, pads clamped to 0."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
