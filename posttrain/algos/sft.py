"""Supervised fine-tuning on (prompt, target) pairs, for causal and masked-diffusion LMs.

The target is the example's ``target`` column when the dataset has one, else its ``answer``; the
tokenizer's eos token is appended so the model learns to stop. Prompt tokens are never trained on.
Plain-text examples (``TextExample``, the dataset task's ``--text_column``) are language modelling: the
document (with the tokenizer's usual special tokens and EOS) is trained on at every token but its first,
which has nothing to predict it from. No packing: each document is one row, so a long-context sequence
(EntropyLong's) keeps its contexts and its document in one window; ``max_target_tokens`` bounds its length.

- Causal LMs (``--rollout hf|vllm``): mean token NLL of the target given the prompt.
- Masked-diffusion LMs (``--rollout diffusion``): LLaDA's SFT loss (``diffusion_sft_loss``: response
  tokens masked with probability t ~ U(0,1), cross-entropy on masked tokens weighted by 1/t, prompt
  never masked). Targets are EOS-padded to the fixed generation length ``max_new_tokens``, so the model
  learns to fill an unused canvas tail with EOS exactly as the sampler will ask it to. The masks come
  from the algorithm's checkpointed generator, so a resumed run draws the same ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from posttrain.algos.base import ALGORITHMS, Algorithm, Experience, LossOutput
from posttrain.algos.core import sft_loss
from posttrain.algos.roles import ModelRole, policy_role
from posttrain.algos.sequences import pack_sequences
from posttrain.config import TrainConfig, opt
from posttrain.models.diffusion import diffusion_mask_token_id, diffusion_sft_loss, sft_batch
from posttrain.models.likelihood import causal_token_logprobs
from posttrain.tasks.base import Example
from posttrain.tasks.prompts import TextExample, encode_prompts


def sft_target(example: Example) -> str:
    return str(example.columns.get("target", example.answer))


def split_text_examples(tokenizer: PreTrainedTokenizerBase, examples: list[Example],
                        max_tokens: int) -> tuple[list[list[int]], list[list[int]]]:
    """Plain-text documents as (first token, every later token + EOS) pairs: the "prompt" is the one
    token nothing predicts, the "target" all the others, so the causal loss covers every token."""
    firsts, rests = [], []
    for index, example in enumerate(examples):
        if not isinstance(example, TextExample):
            raise ValueError(f"example {index} has a prompt; a batch is either all plain text or all prompts")
        ids = list(tokenizer(example.text)["input_ids"]) + [tokenizer.eos_token_id]
        if len(ids) > max_tokens:
            raise ValueError(f"plain-text example {index} ({example.text[:40]!r}...): {len(ids)} tokens with EOS, "
                             f"over max_target_tokens={max_tokens}")
        firsts.append(ids[:1])
        rests.append(ids[1:])
    return firsts, rests


@dataclass
class SFTConfig(TrainConfig):
    """Supervised fine-tuning: every step trains on ``prompts_per_step`` (prompt, target) pairs."""

    group_size: int = opt(1, "Must be 1 for SFT (no sampling).")
    lr: float = opt(1e-3, "Peak learning rate (AdamW).")
    max_target_tokens: int = opt(256, "Targets (plain-text documents, with --text_column) longer than this are "
                                      "rejected with an error.")

    def incompatibilities(self) -> list[tuple[str, Any, str]]:
        found = [("group_size", self.group_size, "must be 1 for sft")] if self.group_size != 1 else []
        if self.text_column and self.model_kind == "diffusion":
            found.append(("text_column", self.text_column, "plain-text language modelling is for causal models"))
        return found


@ALGORITHMS.register("sft")
class SFT(Algorithm):
    config_class = SFTConfig
    config: SFTConfig

    @classmethod
    def declared_roles(cls, config: SFTConfig) -> tuple[ModelRole, ...]:
        """The policy without a rollout engine: SFT samples nothing (the trainer still builds one to evaluate)."""
        return (policy_role(None),)

    def make_experience(self, examples: list[Example], policy: torch.nn.Module,
                        step: int) -> tuple[Experience, dict[str, float]]:
        cfg, tokenizer = self.config, self.ctx.tokenizer
        if examples and isinstance(examples[0], TextExample):
            firsts, rests = split_text_examples(tokenizer, examples, cfg.max_target_tokens)
            tensors = pack_sequences(firsts, rests, tokenizer.pad_token_id)
            return Experience(tensors), {"train/target_tokens": float(tensors["completion_mask"].sum())}
        prompt_ids = encode_prompts(tokenizer, examples, cfg.system_prompt, cfg.max_prompt_tokens)
        diffusion = cfg.model_kind == "diffusion"
        limit, limit_name = (cfg.max_new_tokens, "max_new_tokens") if diffusion else (cfg.max_target_tokens,
                                                                                    "max_target_tokens")
        targets = []
        for index, example in enumerate(examples):
            ids = tokenizer(sft_target(example), add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            if len(ids) > limit:
                raise ValueError(f"example {index} ({example.prompt[:40]!r}...): target has {len(ids)} tokens "
                                 f"with EOS, over {limit_name}={limit}")
            targets.append(ids)
        if diffusion:
            input_ids, attention_mask, response_mask = sft_batch(
                prompt_ids, targets, tokenizer.pad_token_id, tokenizer.eos_token_id, cfg.max_new_tokens)
            tensors = {"input_ids": input_ids, "attention_mask": attention_mask, "response_mask": response_mask}
            return Experience(tensors), {"train/target_tokens": float(sum(len(t) for t in targets))}
        tensors = pack_sequences(prompt_ids, targets, tokenizer.pad_token_id)
        return Experience(tensors), {"train/target_tokens": float(tensors["completion_mask"].sum())}

    def loss(self, policy: torch.nn.Module, batch: Experience, iteration: int) -> LossOutput:
        if "response_mask" in batch.tensors:
            loss, metrics = diffusion_sft_loss(policy, batch["input_ids"], batch["response_mask"],
                                               diffusion_mask_token_id(policy), self.generator,
                                               batch["attention_mask"])
            return LossOutput(loss, {"nll": float(loss.detach()), **{k.split("/")[-1]: v for k, v in metrics.items()}})
        mask = batch["completion_mask"]
        logp, _ = causal_token_logprobs(policy, batch["input_ids"], batch["attention_mask"], last=mask.shape[1])
        loss = sft_loss(logp.float(), mask)
        return LossOutput(loss, {"nll": float(loss.detach())})
