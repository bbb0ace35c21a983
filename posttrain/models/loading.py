"""Load tokenizers and causal LMs (real checkpoints or the embedded tiny ones) through transformers.

``resolve_cli_model`` turns a subcommand's ``--model`` into a model path: the name when set (a packaged alias
such as ``smollm2-135m`` becomes its converted folder, see ``posttrain.models.pretrained``), otherwise the
cached build of the task's tiny recipe (built on first use); ``posttrain.config.resolve_model_path`` does the
same for a training run's config.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
)

from posttrain.models.pretrained import resolve_model_name
from posttrain.models.tiny import build_tiny, default_recipe_for, vllm_variant

logger = logging.getLogger(__name__)


DTYPES: dict[str, torch.dtype | str] = {"auto": "auto", "fp32": torch.float32, "bf16": torch.bfloat16,
                                        "fp16": torch.float16}
"""The ``--dtype`` names of the commands that load a model (``serve``, ``vision``); ``auto``: the checkpoint's own
(each command says what that means for it)."""

GENERIC_TOKENIZER_CLASSES = ("TokenizersBackend", "PreTrainedTokenizerFast")
"""``tokenizer_class`` values of a tokenizer saved as a plain ``tokenizers`` pipeline (our tiny models')."""


def saved_as_generic_tokenizer(path_or_id: str) -> bool:
    """Whether the local folder ``path_or_id`` holds a tokenizer saved as a generic fast tokenizer."""
    config = Path(path_or_id) / "tokenizer_config.json"
    if not config.is_file():
        return False
    return json.loads(config.read_text()).get("tokenizer_class") in GENERIC_TOKENIZER_CLASSES


def load_tokenizer(path_or_id: str, trust_remote_code: bool = False) -> PreTrainedTokenizerBase:
    """The tokenizer at ``path_or_id``, with a pad token (the EOS if it had none) and left padding.

    A tokenizer saved as a generic fast tokenizer (our tiny models', with or without their
    ``recipe.json``) loads as that, ``PreTrainedTokenizerFast``: ``AutoTokenizer`` would follow the model
    type (qwen2) to ``Qwen2Tokenizer``, whose pre-tokenizer silently drops spaces and newlines.
    """
    if saved_as_generic_tokenizer(path_or_id):
        tokenizer = PreTrainedTokenizerFast.from_pretrained(path_or_id)
    else:
        tokenizer = AutoTokenizer.from_pretrained(path_or_id, trust_remote_code=trust_remote_code)
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ValueError(f"tokenizer {path_or_id!r} has neither a pad token nor an EOS token to pad with")
        tokenizer.pad_token = tokenizer.eos_token
        logger.info("tokenizer %s has no pad token; padding with the EOS token %r", path_or_id, tokenizer.eos_token)
    tokenizer.padding_side = "left"
    return tokenizer


def load_causal_lm(
    path_or_id: str, dtype: torch.dtype = torch.float32, trust_remote_code: bool = False
) -> PreTrainedModel:
    """A causal LM from ``path_or_id`` in ``dtype``, in eval mode."""
    model = AutoModelForCausalLM.from_pretrained(path_or_id, dtype=dtype, trust_remote_code=trust_remote_code)
    model.eval()
    return model


def disable_dropout(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with every dropout off, in train mode too: each ``nn.Dropout``'s p and every module's
    ``attention_dropout`` rate (the functional dropout of HF attention layers) set to 0. An RL step computes its
    old-policy log-probs in eval mode and its loss in train mode; with dropout on, the ratio starts away from 1
    before any update (TRL's ``disable_dropout``, on by default)."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        if isinstance(getattr(module, "attention_dropout", None), float):
            module.attention_dropout = 0.0
    return model


def resolve_cli_model(model: str | None, task: str, engine: str) -> str:
    """A subcommand's ``--model`` (aliases resolved), or the directory of ``task``'s embedded tiny causal model
    (its vLLM-servable twin when ``engine`` is ``vllm``; built if needed)."""
    if model:
        return resolve_model_name(model)
    recipe = default_recipe_for(task, "causal")
    return str(build_tiny(vllm_variant(recipe) if engine == "vllm" else recipe))
