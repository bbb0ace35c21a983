"""A tiny random Llama saved as a checkpoint folder that vLLM's CPU build can serve (attention head size
32, one of its CPU kernels), with the embedded character tokenizer; the embeddings are scaled up so the
next-token distributions are peaked (greedy decoding has no near-ties)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch


def save_tiny_llama(path: Path, num_layers: int, seed: int) -> str:
    """Build the model into ``path`` (a fresh folder) and return it as a string."""
    from posttrain.models.tiny import RECIPES, build_model, build_tokenizer

    tok = build_tokenizer()
    recipe = dataclasses.replace(RECIPES.get("corpus-lm"), arch="llama", hidden_size=64, num_layers=num_layers,
                                 num_heads=2, num_kv_heads=1, intermediate_size=128, seed=seed)
    model = build_model(recipe, tok).eval()
    with torch.no_grad():
        model.get_input_embeddings().weight.mul_(4.0)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)
