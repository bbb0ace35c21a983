"""The critic of ``--algo ppo``: a causal LM's backbone with a scalar value head, one value per response token.

``ValueModel`` keeps the transformer of a causal LM (``base_model``: every Hugging Face decoder exposes it)
and replaces the vocabulary head by ``Linear(hidden, 1)``, as TRL's ``AutoModelForCausalLMWithValueHead`` and
OpenRLHF's critic do. The head starts at zero, so every value is 0 before training (a neutral baseline: GAE
then begins from plain discounted returns).

Alignment (the same as ``posttrain.models.likelihood.causal_token_logprobs``): ``token_values(critic, ids,
mask, last=C)[:, t]`` is read at the position *before* completion token t, i.e. V(state = prompt + y_<t),
the state in which token t is chosen and its log-prob computed.
"""

from __future__ import annotations

import torch

from posttrain.common.padding import left_padded_positions


class ValueModel(torch.nn.Module):
    """``backbone`` (a decoder without its LM head) and ``value_head``; ``forward`` returns ``[B, T]`` values."""

    def __init__(self, causal_lm: torch.nn.Module) -> None:
        super().__init__()
        backbone = getattr(causal_lm, "base_model", None)
        if backbone is None or backbone is causal_lm:
            raise TypeError(f"{type(causal_lm).__name__} has no separate base_model to put a value head on")
        self.backbone = backbone
        self.config = causal_lm.config
        hidden = causal_lm.config.get_text_config().hidden_size
        self.value_head = torch.nn.Linear(hidden, 1)
        torch.nn.init.zeros_(self.value_head.weight)
        torch.nn.init.zeros_(self.value_head.bias)
        self.value_head.to(dtype=next(backbone.parameters()).dtype)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                position_ids: torch.Tensor | None = None) -> torch.Tensor:
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask,
                               position_ids=position_ids).last_hidden_state
        return self.value_head(hidden).squeeze(-1)


def token_values(critic: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                 last: int) -> torch.Tensor:
    """Values of the final ``last`` tokens' states (``[B, last]``, float32): entry t is read one position
    before token ``-(last) + t``, the state that token was chosen in (module docstring)."""
    values = critic(input_ids=input_ids, attention_mask=attention_mask,
                    position_ids=left_padded_positions(attention_mask))
    return values[:, -(last + 1):-1].float()
