"""The warm starts of the tiny recipes (``posttrain.models.tiny``): short supervised training that leaves a model
partly right, a starting point RL can improve. They train with the algorithms' losses on the tasks' data, so they
live above both; the factory names them by "module:function" in each recipe and imports them only to build.

``sft_warm_start`` (causal SFT on a task's train split), ``sft_task_warm_start`` (the same on ``<task>-sft``),
``diffusion_warm_start`` (the masked-diffusion SFT of the diffusion recipes) and ``sft_warm_start_pair`` (the
prompt and target one visit of an example learns: label noise and GPO's hinted prompts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from posttrain.algos.core import sft_loss
from posttrain.algos.gpo.hint import privileged_examples
from posttrain.algos.sequences import pack_sequences
from posttrain.models.diffusion import (
    diffusion_sft_loss,
    make_bidirectional,
    resolve_mask_token_id,
    sft_batch,
)
from posttrain.models.likelihood import causal_token_logprobs
from posttrain.models.tiny import TinyRecipe, WarmStartProgress, warm_start_update
from posttrain.tasks import TASKS
from posttrain.tasks.base import Example, Task
from posttrain.tasks.prompts import encode_prompts


def sft_warm_start_pair(
    task: Task, example: Example, recipe: TinyRecipe, noise_generator: torch.Generator,
    hint_generator: torch.Generator,
) -> tuple[Example, str]:
    """One visit of ``example`` in the SFT warm start: the (prompt example, target text) to learn.

    With probability ``recipe.hint_fraction`` (drawn from ``hint_generator``) the prompt is GPO's hinted
    guider prompt (``recipe.hint_template``) and the target the clean answer. Otherwise the prompt is
    plain and, with probability ``recipe.target_noise`` (drawn from ``noise_generator``), the target is the
    task's distractor: the policy learns the error at that rate on every problem. A fraction of 0 draws
    nothing, so recipes without hints see exactly the draws they always did.
    """
    if recipe.hint_fraction and torch.rand((), generator=hint_generator).item() < recipe.hint_fraction:
        return privileged_examples([example], recipe.hint_template)[0], example.answer
    noisy = bool(recipe.target_noise) and torch.rand((), generator=noise_generator).item() < recipe.target_noise
    return example, task.distractor(example) if noisy else example.answer


def label_generators(recipe: TinyRecipe) -> tuple[torch.Generator, torch.Generator]:
    """The warm start's label-noise and hint generators, seeded ``recipe.seed + 1`` and ``+ 2``. Not
    ``common.seeds.derive_seed``: the cached tiny models (keyed by the recipe and ``CODE_VERSION``) were built from
    these streams, and new ones would change the warm starts without invalidating a cached build."""
    return torch.Generator().manual_seed(recipe.seed + 1), torch.Generator().manual_seed(recipe.seed + 2)


TargetWeights = Callable[[str, list[int]], list[float]]
"""``(target text, target ids with EOS) -> one loss weight per id``: which target tokens count more in the SFT loss."""


def sft_warm_start(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerFast, recipe: TinyRecipe, generator: torch.Generator,
    examples: Sequence[Example] | None = None, target_weights: TargetWeights | None = None,
) -> None:
    """Supervised fine-tuning on the train split of ``recipe.task`` (prompt tokens masked), in place.

    Plain AdamW for ``recipe.warm_start_steps`` steps of ``recipe.batch_size`` examples drawn with
    ``generator``; the learning rate decays linearly to zero. Deliberately short, so the model ends
    partly right: a starting point that RL can improve. ``examples`` replaces the train split (a warm start that
    builds its own data, e.g. the span critic's over policy samples); ``target_weights`` makes the loss the
    weighted token mean (unset: every target token weighs 1).
    """
    if recipe.task is None:
        raise ValueError(f"recipe {recipe.name!r}: sft_warm_start needs a task")
    task = TASKS.get(recipe.task)()
    examples = list(examples) if examples is not None else task.split("train")
    noise_generator, hint_generator = label_generators(recipe)
    encoded: dict[tuple[str, str], tuple[list[int], list[int], list[float]]] = {}

    def encode(i: int) -> tuple[list[int], list[int], list[float]]:
        example, answer = sft_warm_start_pair(task, examples[i], recipe, noise_generator, hint_generator)
        if (example.prompt, answer) not in encoded:
            prompt = encode_prompts(tokenizer, [example], None, recipe.max_position_embeddings)[0]
            target = tokenizer(answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            weights = target_weights(answer, target) if target_weights is not None else [1.0] * len(target)
            if len(weights) != len(target):
                raise ValueError(f"recipe {recipe.name!r}: target_weights gave {len(weights)} weights for "
                                 f"{len(target)} target tokens of {answer[:60]!r}")
            encoded[(example.prompt, answer)] = (prompt, target, weights)
        return encoded[(example.prompt, answer)]

    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: 1.0 - step / max(1, recipe.warm_start_steps))
    model.train()
    progress = WarmStartProgress(recipe.name, recipe.warm_start_steps)
    for _ in range(recipe.warm_start_steps):
        pairs = [encode(i) for i in torch.randint(len(examples), (recipe.batch_size,), generator=generator).tolist()]
        batch = pack_sequences([p for p, _, _ in pairs], [t for _, t, _ in pairs], tokenizer.pad_token_id)
        mask = batch["completion_mask"]
        for row, (_, _, weights) in enumerate(pairs):
            mask[row, : len(weights)] = torch.tensor(weights)
        logprobs, _ = causal_token_logprobs(model, batch["input_ids"], batch["attention_mask"], last=mask.shape[1])
        loss = sft_loss(logprobs, mask)
        warm_start_update(model, optimizer, scheduler, loss)
        progress.update(loss.item())
    progress.close()
    model.eval()


def sft_task_warm_start(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerFast, recipe: TinyRecipe, generator: torch.Generator
) -> None:
    """``sft_warm_start`` on the task ``<recipe.task>-sft``: the recipe's own task names the data it is the
    default of, while its warm-start targets (e.g. formatted answers) come from that companion task."""
    sft_task = f"{recipe.task}-sft"
    if sft_task not in TASKS:
        raise ValueError(f"recipe {recipe.name!r}: sft_task_warm_start needs a task {sft_task!r}; registered "
                         f"tasks: {TASKS.names()}")
    sft_warm_start(model, tokenizer, dataclasses.replace(recipe, task=sft_task), generator)


def diffusion_warm_start(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, recipe: TinyRecipe, generator: torch.Generator
) -> None:
    """Warm start of the tiny diffusion recipes: make the causal tiny model bidirectional, then train it
    with ``diffusion_sft_loss`` on ``recipe.task``'s train split, in place.

    Responses are ``answer + <eos>`` EOS-padded to the batch's longest answer plus 0-4 extra EOS (drawn
    from ``generator``), so the model learns to write EOS into any unused tail of a fixed-length canvas.
    AdamW at ``recipe.lr`` decaying linearly to 0 over ``recipe.warm_start_steps`` steps of
    ``recipe.batch_size`` examples. Each visit of an example draws its target as the causal SFT warm
    start does (``sft_warm_start_pair``): with ``recipe.target_noise`` the task's
    distractor replaces the answer at that rate.
    """
    if recipe.task is None:
        raise ValueError(f"recipe {recipe.name!r}: the diffusion warm start needs a task")
    mask_id = resolve_mask_token_id(tokenizer, model.config)
    make_bidirectional(model, mask_token_id=mask_id)
    task = TASKS.get(recipe.task)()
    examples = task.split("train")
    prompts = encode_prompts(tokenizer, examples, None, recipe.max_position_embeddings)
    noise_generator, hint_generator = label_generators(recipe)
    encoded: dict[str, list[int]] = {}

    def target(i: int) -> list[int]:
        _, answer = sft_warm_start_pair(task, examples[i], recipe, noise_generator, hint_generator)
        if answer not in encoded:
            encoded[answer] = tokenizer(answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        return encoded[answer]

    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=0.0)
    total = max(1, recipe.warm_start_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 - step / total)
    model.train()
    bar = tqdm(range(recipe.warm_start_steps), desc=f"warm start {recipe.name}", leave=False)
    for _ in bar:
        index = torch.randint(len(examples), (recipe.batch_size,), generator=generator).tolist()
        extra = int(torch.randint(0, 5, (1,), generator=generator))
        batch_answers = [target(i) for i in index]
        length = max(len(a) for a in batch_answers) + extra
        input_ids, attention_mask, response_mask = sft_batch(
            [prompts[i] for i in index], batch_answers, tokenizer.pad_token_id, tokenizer.eos_token_id, length)
        loss, _ = diffusion_sft_loss(model, input_ids, response_mask, mask_id, generator, attention_mask)
        warm_start_update(model, optimizer, scheduler, loss)
        bar.set_postfix(loss=f"{loss.item():.3f}")
    model.eval()
