"""A tiny *remote-code* masked-diffusion checkpoint, as LLaDA and Dream ship theirs: a config and a model
class in a ``modeling_*.py`` next to the weights, found through ``auto_map`` and loaded only with
``trust_remote_code=True``. Tests use it to drive the remote-code loading path without a download."""

from __future__ import annotations

import json
from pathlib import Path

MODELING_SOURCE = '''
"""Tiny LLaDA-style model: a bidirectional transformer encoder with an LM head (no causal mask)."""
import torch
from transformers import PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput


class TinyLLaDAConfig(PretrainedConfig):
    model_type = "tiny_llada"

    def __init__(self, vocab_size=64, hidden_size=32, num_layers=1, num_heads=2, max_positions=128,
                 mask_token_id=None, **kwargs):
        self.vocab_size, self.hidden_size, self.num_layers = vocab_size, hidden_size, num_layers
        self.num_heads, self.max_positions, self.mask_token_id = num_heads, max_positions, mask_token_id
        super().__init__(**kwargs)


class TinyLLaDAModel(PreTrainedModel):
    config_class = TinyLLaDAConfig

    def __init__(self, config):
        super().__init__(config)
        self.embed = torch.nn.Embedding(config.vocab_size, config.hidden_size)
        self.positions = torch.nn.Embedding(config.max_positions, config.hidden_size)
        layer = torch.nn.TransformerEncoderLayer(config.hidden_size, config.num_heads, 2 * config.hidden_size,
                                                 dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, config.num_layers, enable_nested_tensor=False)
        self.lm_head = torch.nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, position_ids=None, **kwargs):
        if position_ids is None:
            position_ids = torch.arange(input_ids.shape[1], device=input_ids.device).expand_as(input_ids)
        hidden = self.embed(input_ids) + self.positions(position_ids)
        padding = None if attention_mask is None else attention_mask == 0
        return CausalLMOutput(logits=self.lm_head(self.encoder(hidden, src_key_padding_mask=padding)))
'''


def write_remote_code_model(directory: Path, seed: int = 0) -> Path:
    """Save a randomly initialised remote-code diffusion model with the project's char tokenizer."""
    import torch

    from posttrain.models.tiny import build_tokenizer

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "modeling_tiny_llada.py").write_text(MODELING_SOURCE)
    tokenizer = build_tokenizer()
    tokenizer.save_pretrained(directory)
    config = {
        "model_type": "tiny_llada", "architectures": ["TinyLLaDAModel"],
        "auto_map": {"AutoConfig": "modeling_tiny_llada.TinyLLaDAConfig",
                     "AutoModel": "modeling_tiny_llada.TinyLLaDAModel"},
        "vocab_size": len(tokenizer), "hidden_size": 32, "num_layers": 1, "num_heads": 2, "max_positions": 128,
        "mask_token_id": tokenizer.mask_token_id,
    }
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    from transformers import AutoConfig, AutoModel

    torch.manual_seed(seed)
    model = AutoModel.from_config(AutoConfig.from_pretrained(directory, trust_remote_code=True),
                                  trust_remote_code=True)
    model.save_pretrained(directory)
    return directory
