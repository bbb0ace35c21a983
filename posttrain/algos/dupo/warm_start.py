"""The warm start of DuPO's embedded default (recipe ``causal-word-arithmetic``): supervised fine-tuning on the
primal *and* dual questions of the recipe's task, so the one tiny model can play both roles from step 0.

It is ``posttrain.models.tiny.sft_warm_start`` on the task named ``<recipe.task>-sft`` (for word-arithmetic:
``word-arithmetic-sft``, see ``posttrain.tasks.word_arithmetic``), with the recipe's label noise on both
directions, so the policy starts partly right and DuPO has room to improve it. The recipe itself keeps the
primal task as its ``task``, which is how ``--task word-arithmetic`` finds it.
"""

from __future__ import annotations

import dataclasses

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from posttrain.models.tiny import TinyRecipe, sft_warm_start
from posttrain.tasks.base import TASKS


def warm_start(model: PreTrainedModel, tokenizer: PreTrainedTokenizerFast, recipe: TinyRecipe,
               generator: torch.Generator) -> None:
    """SFT on ``<recipe.task>-sft`` (primal + dual questions), in place."""
    sft_task = f"{recipe.task}-sft"
    if sft_task not in TASKS:
        raise ValueError(f"recipe {recipe.name!r}: the DuPO warm start needs a task {sft_task!r} with primal and "
                         f"dual questions; registered tasks: {TASKS.names()}")
    sft_warm_start(model, tokenizer, dataclasses.replace(recipe, task=sft_task), generator)
