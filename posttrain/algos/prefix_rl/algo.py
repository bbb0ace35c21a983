"""``--algo prefix-rl``: Prefix-RL ("Parameter-Efficient Reinforcement Learning using Prefix Optimization",
ICLR 2026): RL on a small adapter that writes only the first k tokens of the answer of a frozen target.

Roles (``posttrain.algos.roles``): the policy is the adapter g_theta (``--model``, or the task's embedded
adapter); ``target`` is the frozen f_ref (``--target_model``; unset = the ``--model`` checkpoint itself, the
paper's self-prefix form, or without ``--model`` the task's embedded target), served by its own engine
(``--target_rollout`` hf or vllm), never synced; ``reference`` is a frozen copy of the initial adapter when
``kl_coef > 0``. The two models share one tokenizer (checked at start-up, naming ``target_model``).

Per step and prompt, G prefixes y_{1:k} ~ g_theta(.|x) of exactly ``prefix_tokens`` tokens (early stop only
at EOS, no other stop token); the target continues each from the same token ids, y_{k+1:m} ~ f_ref(.|x,
y_{1:k}) (one completion per prefix, as the paper's estimate of R(x, y_{1:k})), for at most m - k tokens
(``--max_new_tokens`` is m, the whole answer's budget, prefix included, as ``posttrain prefix-cluster``'s); the
task's reward scores the whole decoded answer y_{1:m}. From there the step is GRPO's (``posttrain.algos.pg``),
unchanged: group advantages over the G prefixes of a prompt (``--advantage grpo | dr_grpo | rloo``), the
clipped surrogate and the KL to the initial adapter on the k prefix tokens only (``pack_sequences`` packs the
adapter's tokens, ``generation.adapter_prefixes``), so the target's tokens never carry the loss. Held-out
evaluation answers the same way (adapter prefix, target continuation; ``generation.PrefixThenTarget``), greedily.

Deviations from the paper: group advantages (GRPO/RLOO) instead of OpenRLHF's PPO with a critic and GAE,
which is ``--algo prefix-rl-ppo`` (``posttrain.algos.prefix_rl.ppo``: ``--algo ppo`` with the same
``PrefixAnswering``).
Here the KL is the k3 estimator in the loss (``kl_estimator``), not a per-token penalty folded into the reward,
and there is no entropy bonus.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from posttrain.algos.base import ALGORITHMS
from posttrain.algos.pg import GRPO, GRPOConfig
from posttrain.algos.prefix_rl.generation import PrefixThenTarget, adapter_prefixes
from posttrain.algos.roles import CHECKPOINT, ModelRole
from posttrain.config import opt
from posttrain.engines.base import Rollouts, SamplingParams
from posttrain.engines.spec import EngineSpec
from posttrain.models.tiny import default_recipe_for, vllm_variant

TARGET = "target"
"""The frozen target's role name."""
PAPER_PREFIX_TOKENS = 32
"""The paper's general default k (it also uses 64; 16 for Prefix Clustering)."""
EMBEDDED_PREFIX_TOKENS = 8
"""k on the embedded default (``--task answer-format``, no ``--model``): its two answer formats share their
first 6 tokens and part at the 7th, so 8 is the shortest power of two whose prefix chooses the format, and
it leaves every answer's result to the target (the direct answer is 8 tokens of marker, then the number)."""
TARGET_ROLLOUTS = ("hf", "vllm")
ADAPTER_RECIPES = {"answer-format": "causal-answer-format-adapter"}
"""The embedded adapter of a task that has one; other tasks' embedded default is the self-prefix form (the
task's tiny model as both adapter and target)."""


@dataclass
class PrefixRLConfig(GRPOConfig):
    """Prefix-RL: the adapter writes k tokens, the frozen target the rest; the reward scores the whole answer."""

    task: str = opt("answer-format", "Built-in task or 'dataset' (--dataset); prefix-rl's default is answer-format, "
                                     "whose accuracy depends on how the answer opens.")
    prefix_tokens: int | None = opt(None, "k: tokens the adapter writes before the target takes over (exactly k, "
                                          f"fewer only at EOS); unset = {EMBEDDED_PREFIX_TOKENS} on the embedded "
                                          f"default, {PAPER_PREFIX_TOKENS} (the paper's) with --model.")
    target_model: str | None = opt(None, "The frozen target: path, hub id or alias (smollm2-135m); unset = the "
                                         "--model checkpoint itself (self-prefix), or without --model the task's "
                                         "embedded target. It must share the adapter's tokenizer.")
    target_rollout: EngineSpec = opt("hf", "Engine that serves the target, an engine spec (never synced: its "
                                               "weights never change); its options are --target_rollout.OPTION value.",
                                     TARGET_ROLLOUTS)
    target_temperature: float = opt(0.7, "The target's sampling temperature (greedy at evaluation).")
    temperature: float = opt(0.7, "The adapter's sampling temperature (the paper's 0.7).")
    kl_coef: float = opt(0.001, "Weight of the KL to the initial adapter (the paper's beta 0.001); 0 = none.")
    advantage: str = opt("grpo", "Advantage estimator over the G prefixes of a prompt (the paper's PPO with a "
                                 "critic is --algo prefix-rl-ppo).", ["grpo", "dr_grpo", "rloo"])
    max_new_tokens: int = opt(40, "The whole answer's budget in tokens, prefix included (as prefix-cluster's): the "
                                  "adapter writes --prefix_tokens tokens, the target at most the rest.")
    lr: float = opt(1e-3, "Peak learning rate (AdamW) of the adapter.")
    steps: int = opt(40, "Training steps (each: prompts_per_step prompts x group_size prefixes, mu optimizer steps).")
    eval_every: int = opt(10, "Evaluate on the held-out split every N steps (and at start and end); 0 = never.")
    pass_k: int = opt(1, "k for pass@k at evaluation (sampled at the rollout temperatures); 1 = off.")

    def prefix_length(self) -> int:
        """k in force: ``prefix_tokens``, or its default for the run (see the field's help)."""
        if self.prefix_tokens is not None:
            return self.prefix_tokens
        return PAPER_PREFIX_TOKENS if self.model else EMBEDDED_PREFIX_TOKENS

    def continuation_length(self) -> int:
        """The most tokens the target writes after the prefix: the answer's budget less k."""
        return self.max_new_tokens - self.prefix_length()

    def tiny_recipe(self, kind: str) -> str:
        """The adapter: the task's embedded adapter where it has one, else the task's tiny model (self-prefix)."""
        if kind == "causal" and self.task in ADAPTER_RECIPES:
            return ADAPTER_RECIPES[self.task]
        return super().tiny_recipe(kind)

    def target_recipe(self) -> str:
        """The embedded target of a run without ``--model`` and ``--target_model``: the task's tiny model (its
        vLLM-servable twin under ``--target_rollout vllm``)."""
        name = default_recipe_for(self.task, "causal")
        return vllm_variant(name) if self.target_rollout.kind == "vllm" else name

    def target_role(self) -> ModelRole:
        """The frozen target as a model role (see ``target_model``)."""
        checkpoint = self.target_model or self.model
        return ModelRole(TARGET, CHECKPOINT, engine=self.target_rollout, checkpoint=checkpoint,
                         recipe=None if checkpoint else self.target_recipe(), config_field="target_model")

    def incompatibilities(self) -> list[tuple[str, Any, str]]:
        bad = super().incompatibilities()
        if self.prefix_tokens is not None and self.prefix_tokens < 1:
            bad.append(("prefix_tokens", self.prefix_tokens, "must be >= 1 (unset = the default k)"))
        if self.continuation_length() < 1:
            why = (f"must exceed the prefix length k = {self.prefix_length()}: it is the whole answer's budget, "
                   "prefix included, and the target writes the rest")
            bad.append(("max_new_tokens", self.max_new_tokens, why))
        if self.target_temperature <= 0:
            bad.append(("target_temperature", self.target_temperature, "must be > 0 (evaluation is greedy anyway)"))
        if self.rollout.kind == "diffusion":
            bad.append(("rollout", self.rollout, "prefix-rl's adapter is a causal LM: use hf or vllm"))
        if self.target_rollout.location:
            bad.append(("target_rollout", str(self.target_rollout),
                        "the target's checkpoint is --target_model; name the engine kind without a path"))
        # the engine's own check on the target's checkpoint (for vLLM: installed, the model servable)
        target = dataclasses.replace(self, model=self.target_model or self.model, rollout=self.target_rollout)
        problem = self.target_rollout.config_problem(target)
        if problem:
            bad.append(("target_rollout", str(self.target_rollout), problem))
        return bad


class PrefixAnswering:
    """What Prefix-RL changes in a clipped policy-gradient algorithm, whose experience and losses stay its own (GRPO's
    for ``prefix-rl``, PPO's for ``prefix-rl-ppo``, the class that follows this one in the bases): the frozen
    target's role, the adapter's sampling settings, the answer engine (``PrefixThenTarget``: the adapter's prefix,
    then the target's continuation, in training and evaluation) and the ``trained_rollouts`` hook (the adapter's k
    tokens of each whole answer)."""

    config: PrefixRLConfig

    @classmethod
    def declared_roles(cls, config: PrefixRLConfig) -> tuple[ModelRole, ...]:
        """The algorithm's roles and the frozen target with its engine."""
        return (*super().declared_roles(config), config.target_role())

    def sampling_params(self, step: int) -> SamplingParams:
        """The adapter's: exactly ``prefix_length()`` new tokens, stopping early only at EOS."""
        return dataclasses.replace(super().sampling_params(step), max_new_tokens=self.config.prefix_length(),
                                   stop_token_ids=())

    def answer_engine(self) -> PrefixThenTarget:
        """Adapter prefix, then target continuation (the same engines every step)."""
        cfg = self.config
        return PrefixThenTarget(self.ctx.rollout, self.ctx.engines[TARGET], cfg.prefix_length(),
                                cfg.continuation_length(), cfg.target_temperature)

    def trained_rollouts(self, rollouts: Rollouts) -> tuple[Rollouts, dict[str, float]]:
        """The adapter's prefixes of the whole answers (``adapter_prefixes``), with the answers' length and the
        fraction of prefixes that ended at EOS (answers no longer than k: the target writes at least one token)."""
        k = self.config.prefix_length()
        lengths = torch.tensor([len(ids) for ids in rollouts.completion_ids], dtype=torch.float32)
        metrics = {"prefix_rl/answer_length_mean": float(lengths.mean()),
                   "prefix_rl/prefix_eos_fraction": float((lengths <= k).float().mean())}
        return adapter_prefixes(rollouts, k), metrics


@ALGORITHMS.register("prefix-rl")
class PrefixRL(PrefixAnswering, GRPO):
    """GRPO answering through ``PrefixAnswering``."""

    config_class = PrefixRLConfig
    config: PrefixRLConfig
    supports_async_rollouts = False  # two engines per step (adapter, then target)
