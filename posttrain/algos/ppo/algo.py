"""``--algo ppo``: PPO with a learned critic for causal LMs, in the RLHF form of Ziegler et al. 2019 / Ouyang et
al. 2022 that TRL 0.11's ``PPOTrainer`` implements and Text2Grad (arXiv 2505.22338) builds on.

Per step: sample completions (``group_size`` per prompt, 1 by default: PPO needs no group), score them, and
build per-token rewards r_t = dense_t - beta * KL_t plus the task's scalar reward on the last token
(``core.token_rewards``; ``dense`` is 0 here, Text2Grad's span rewards in ``posttrain.algos.ppo.text2grad``,
both from the ``rewards`` component's ``reward_terms``).
The critic's values V_t (``posttrain.models.value``) and GAE(gamma, lambda) give advantages, whitened over the
response mask, and returns. Then ``mu`` epochs (the paper's 4) over micro-batches: the policy takes GRPO's
clipped surrogate on the token advantages (``posttrain.algos.policy_loss``), the critic the clipped value
loss, each with its own optimizer (the critic is a trained model role, checkpointed and resumed with the run).
A micro-batch whose mean ratio exceeds ``ratio_threshold`` is skipped (``policy_loss.PolicyLoss.skip``, logged as
``skipped_batch``; ``LossOutput.skip``: the trainer zeroes both losses, as TRL).
A sample without a reward (a reward function that returned None; Text2Grad's unparsable feedback) stays in the
batch with its KL term and no reward: it is trained on like the others (so the KL still holds it back) and
counted (``ppo/unrewarded_fraction``). ``rewards.trained_tokens`` picks the completion tokens PPO trains on (all
here; Text2Grad drops punctuation): rewards, KL, GAE, whitening and both losses see only those, and a token left out
ends the GAE recursion like the end of the answer (as in Text2Grad's trainer, which masks its GAE).

KL: ``kl_estimator`` full (the exact full-vocabulary KL at every position, Text2Grad's choice) or k1/k2/k3
from the sampled tokens; ``kl_mode`` reward (folded into r_t, the default) or loss (added to the policy loss
like GRPO's, never in the rewards). beta adapts (``core.AdaptiveKLController``, target ``kl_target``, horizon
``kl_horizon`` samples, or a tenth of the run's samples when 0, never below ``kl_floor``) unless ``kl_target``
is 0.

Deviations from TRL 0.11, stated: the critic is a separate model (its own copy of the backbone, or
``--critic_model``) rather than a value head sharing the policy's LoRA backbone, so ``vf_coef`` only scales
the critic's gradient (under AdamW that mostly rescales nothing: it is kept for the paper's loss, and
``critic_lr`` is the knob that matters); micro-batches are taken in order each epoch, not reshuffled;
whitening is per rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from posttrain.algos.base import ALGORITHMS, Experience, LossOutput
from posttrain.algos.core import KL_ESTIMATORS, kl_estimate, masked_mean, masked_sum
from posttrain.algos.pg import ClippedPolicyGradient, GRPOConfig, _right_padded, policy_loss_incompatibilities
from posttrain.algos.policy_loss import PolicyLossOptions
from posttrain.algos.ppo.core import (
    AdaptiveKLController,
    clipped_value_loss,
    full_kl,
    gae,
    token_rewards,
    whiten,
)
from posttrain.algos.roles import (
    CHECKPOINT,
    INITIAL_POLICY,
    REFERENCE,
    ModelRole,
    policy_role,
    reference_role,
)
from posttrain.algos.scoring import score_groups
from posttrain.algos.sequences import pack_sequences
from posttrain.common.padding import left_padded_positions
from posttrain.config import defaults, opt
from posttrain.dist import all_reduce_mean
from posttrain.engines.base import Rollouts
from posttrain.models.likelihood import logprobs_from_logits
from posttrain.models.value import token_values
from posttrain.tasks.base import Example

CRITIC = "critic"
"""The critic's role name (``ctx.models["critic"]`` is its current module; ``role_loss`` trains it)."""
PPO_KL_ESTIMATORS = ("full", *KL_ESTIMATORS)
RUN_HORIZON_FRACTION = 10
"""``--kl_horizon 0``: the horizon is the run's samples over this (beta moves by at most e^(0.2 x 10) in a run)."""


@dataclass
@defaults(temperature=0.7)
class PPOConfig(GRPOConfig):
    """PPO with a critic: GAE advantages on per-token rewards, clipped policy and value losses, adaptive KL.

    It extends ``GRPOConfig`` for the fields the two share (clip range, TIS, loss aggregation, rollout engine); the
    fields redeclared here change their meaning or choices for PPO (``advantage`` is GAE only, ``kl_estimator``
    adds ``full``, ``kl_coef`` is beta's start, ``group_size`` needs no group); the rollouts' temperature defaults to
    0.7 (Text2Grad's 0.6-0.7)."""

    group_size: int = opt(1, "Completions sampled per prompt; PPO's critic is the baseline, so 1 is enough.")
    advantage: str = opt("gae", "Advantage estimator: GAE with the critic's values (PPO has no group baseline).",
                         ["gae"])
    mu: int = opt(4, "PPO epochs: optimizer passes over each step's batch (TRL's ppo_epochs, the paper's 4).")
    gamma: float = opt(1.0, "GAE discount (TRL's default 1: the episode is one answer).")
    lam: float = opt(0.95, "GAE lambda.")
    whiten_advantages: bool = opt(True, "Whiten advantages over the response tokens of the batch (mean 0, std 1).")
    value_clip: float = opt(0.2, "Value clip range around the old values (TRL's cliprange_value); 0 = no clip.")
    vf_coef: float = opt(0.1, "Weight of the value loss (the paper's 0.1); see the module docstring.")
    critic_lr: float | None = opt(None, "Peak learning rate of the critic's AdamW; unset = --lr.")
    critic_model: str | None = opt(None, "The critic's starting weights: a causal LM checkpoint (path, hub id or "
                                         "alias) whose backbone gets a fresh value head; unset = a copy of the "
                                         "initial policy. It must share the policy's tokenizer.")
    kl_coef: float = opt(0.05, "Initial KL coefficient beta (adapted when --kl_target > 0; Text2Grad's 0.05-0.2); "
                               "0 = no KL and no reference model.")
    kl_estimator: str = opt("k1", "Per-token KL(pi || ref): full (exact over the vocabulary, as Text2Grad) or the "
                                  "k1/k2/k3 estimators from the sampled tokens (TRL's default is k1).",
                            PPO_KL_ESTIMATORS)
    kl_mode: str = opt("reward", "Where the KL goes: folded into the per-token rewards (PPO's usual form) or "
                                 "added to the policy loss.", ["reward", "loss"])
    kl_target: float = opt(6.0, "Adaptive KL controller's target per-sequence KL (TRL's default 6); 0 = fixed beta.")
    kl_horizon: float = opt(10000.0, "Adaptive KL controller's horizon, in sequences (TRL's 10,000: beta moves by at "
                                     "most 22% per horizon of samples); 0 = a tenth of the run's samples (steps x "
                                     "prompts_per_step x group_size / 10), so beta can move by up to e^2 = 7.4x "
                                     "within the run and no further.")
    kl_floor: float = opt(0.0, "Smallest beta the adaptive controller may reach (0 = none, as TRL; capped at "
                                "--kl_coef).")
    ratio_threshold: float = opt(10.0, "Skip a micro-batch (zero losses) whose mean ratio exceeds this; 0 = never.")

    def incompatibilities(self) -> list[tuple[str, Any, str]]:
        bad = policy_loss_incompatibilities(self)
        for name in ("kl_coef", "kl_target", "kl_floor", "value_clip", "vf_coef", "ratio_threshold"):
            if getattr(self, name) < 0:
                bad.append((name, getattr(self, name), "must be >= 0"))
        for name in ("gamma", "lam"):
            if not 0 <= getattr(self, name) <= 1:
                bad.append((name, getattr(self, name), "must be in [0, 1]"))
        if self.kl_horizon < 0:
            bad.append(("kl_horizon", self.kl_horizon, "must be >= 0 (0 = a tenth of the run's samples)"))
        if self.critic_lr is not None and self.critic_lr <= 0:
            bad.append(("critic_lr", self.critic_lr, "must be > 0 (unset = --lr)"))
        if self.kl_mode == "loss" and self.kl_estimator == "full":
            bad.append(("kl_estimator", "full", "with --kl_mode loss use k1, k2 or k3 (full is a reward term)"))
        if self.rollout.kind == "diffusion":
            bad.append(("rollout", self.rollout, "ppo trains causal LMs: use hf or vllm"))
        if self.tis_cap is not None and self.tis_cap < 0:
            bad.append(("tis_cap", self.tis_cap, "must be unset (auto), 0 (off) or > 0 (the cap C)"))
        return bad

    @property
    def uses_kl(self) -> bool:
        """Whether a KL term is on (and so the frozen reference is needed): beta starts above 0 (the adaptive
        controller only ever multiplies it)."""
        return self.kl_coef > 0


class TaskRewards:
    """PPO's rewards (its ``rewards`` component): the task's (or ``--reward``'s) scalar on the last token, no dense
    part, every completion token trained. Text2Grad's ``SpanRewards`` is the other one."""

    def __init__(self, config: PPOConfig, ctx: Any) -> None:
        self.config, self.ctx = config, ctx

    @staticmethod
    def roles(config: PPOConfig) -> tuple[ModelRole, ...]:
        """The roles the rewards need besides PPO's (Text2Grad's span reward model): none."""
        return ()

    def reward_terms(self, group: list[Example], rollouts: Rollouts, completion_len: int, reward: torch.Tensor,
                     valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, dict[str, float]]:
        """The rewards besides the KL: ``(dense [B, C], terminal [B] or None, rewarded [B], metrics)``. ``reward``
        / ``valid`` are the task reward and whether it exists (``score_rollouts``); ``rewarded`` says which
        samples have a reward: the others keep their KL term and their place in both losses, with no reward
        (module docstring)."""
        return torch.zeros(len(rollouts), completion_len), reward, valid, {}

    def trained_tokens(self, rollouts: Rollouts, completion_mask: torch.Tensor) -> torch.Tensor:
        """The completion tokens PPO trains on (rewards, KL, GAE, whitening, both losses): all of them."""
        return completion_mask


@ALGORITHMS.register("ppo")
class PPO(ClippedPolicyGradient):
    """GAE advantages on per-token rewards (``rewards``: ``rewards_class``), the critic as a trained role, the
    clipped surrogate and value losses, adaptive beta."""

    config_class = PPOConfig
    config: PPOConfig
    rewards_class: ClassVar[type[TaskRewards]] = TaskRewards
    supports_async_rollouts = False  # not run asynchronously yet: its experience adapts beta from each batch

    def __init__(self, config: PPOConfig, ctx: Any) -> None:
        super().__init__(config, ctx)
        self.rewards = self.rewards_class(config, ctx)
        self.kl_controller = AdaptiveKLController(config.kl_coef, config.kl_target or None, self.kl_horizon(),
                                                  config.kl_floor)

    def kl_horizon(self) -> float:
        """``kl_horizon`` in samples, or a tenth of the run's samples when it is 0."""
        cfg = self.config
        return cfg.kl_horizon or cfg.steps * cfg.prompts_per_step * cfg.group_size / RUN_HORIZON_FRACTION

    @classmethod
    def declared_roles(cls, config: PPOConfig) -> tuple[ModelRole, ...]:
        """The policy, the critic (a trained value model), the frozen reference when a KL term is on, and what
        ``rewards_class`` needs."""
        cfg = config
        critic = ModelRole(CRITIC, CHECKPOINT if cfg.critic_model else INITIAL_POLICY, trains=True, head="value",
                           checkpoint=cfg.critic_model, config_field="critic_model", lr=cfg.critic_lr)
        reference = (reference_role(),) if cfg.uses_kl else ()
        return (policy_role(cfg.rollout), critic, *reference, *cls.rewards_class.roles(cfg))

    def state_dict(self) -> dict[str, Any]:
        return {"kl_controller": self.kl_controller.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "kl_controller" in state:
            self.kl_controller.load_state_dict(state["kl_controller"])

    # -- experience ---------------------------------------------------------------------------------
    def experience_from_rollouts(self, examples: list[Example], rollouts: Rollouts, policy: torch.nn.Module,
                                 step: int) -> tuple[Experience, dict[str, float]]:
        cfg, ctx = self.config, self.ctx
        rollouts, answer_metrics = self.trained_rollouts(rollouts)
        scored = score_groups(ctx, examples, rollouts, cfg.group_size, advantage=None)
        group, reward, reward_valid = scored.examples, scored.rewards, scored.valid
        tensors = pack_sequences(rollouts.prompt_ids, rollouts.completion_ids, ctx.tokenizer.pad_token_id)
        completion_len = tensors["completion_mask"].shape[1]
        with ctx.timer.phase("reward_terms"):
            dense, terminal, rewarded, metrics = self.rewards.reward_terms(group, rollouts, completion_len, reward,
                                                                           reward_valid)
        real = tensors["completion_mask"]
        mask = tensors["completion_mask"] = self.rewards.trained_tokens(rollouts, real)
        has_reward = rewarded.float()
        dense = torch.nan_to_num(dense) * has_reward.unsqueeze(-1)
        terminal = None if terminal is None else torch.nan_to_num(terminal) * has_reward
        with torch.no_grad():
            with ctx.timer.phase("old_logprobs"):
                old_logprobs, logits = self._policy_terms(policy, tensors, completion_len)
            kl = torch.zeros_like(old_logprobs)
            if cfg.uses_kl:
                with ctx.timer.phase("reference"):
                    ref_logprobs, ref_logits = self._policy_terms(ctx.models[REFERENCE], tensors, completion_len)
                tensors["ref_logprobs"] = ref_logprobs
                kl = (full_kl(logits, ref_logits).cpu() if cfg.kl_estimator == "full"
                      else kl_estimate(old_logprobs, ref_logprobs, cfg.kl_estimator))
            with ctx.timer.phase("values"):
                values = self._values(ctx.models[CRITIC], tensors, completion_len)
        beta = self.kl_controller.value
        in_reward = beta if cfg.kl_mode == "reward" else 0.0
        rewards = token_rewards(dense, kl, in_reward, mask, terminal)
        advantages, returns = gae(rewards, values, mask, cfg.gamma, cfg.lam)
        if cfg.whiten_advantages:
            advantages = whiten(advantages, mask)
        tensors.update(advantages=advantages, returns=returns, old_values=values, old_logprobs=old_logprobs,
                       valid=torch.ones(len(rollouts)),
                       sampling_logprobs=_right_padded(rollouts.logprobs, completion_len))
        sequence_kl = float(masked_sum(kl, mask) / len(rollouts))
        shared = all_reduce_mean({"kl": sequence_kl}, ctx.world_size)  # every rank adapts beta the same way
        self.kl_controller.update(shared["kl"], len(rollouts) * ctx.world_size)
        metrics.update(scored.metrics)
        metrics.update(answer_metrics)
        metrics["ppo/unrewarded_fraction"] = float(1 - has_reward.mean())
        metrics["ppo/trained_token_fraction"] = float(mask.sum() / real.sum().clamp(min=1))
        metrics.update({"ppo/kl_coef": beta, "ppo/sequence_kl": sequence_kl,
                        "ppo/token_reward_mean": float(masked_mean(rewards, mask)),
                        "ppo/value_mean": float(masked_mean(values, mask)),
                        "ppo/return_mean": float(masked_mean(returns, mask))})
        return Experience(tensors), metrics

    def _policy_terms(self, model: torch.nn.Module, tensors: dict[str, torch.Tensor], completion_len: int
                      ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Log-probs of the completion tokens (at the sampling temperature, like the loss's) and, for the
        full KL, the completion positions' logits (float32, left on the device: the full KL is reduced there, so
        no [B, C, V] tensor crosses to the host)."""
        if self.config.kl_estimator != "full" or not self.config.uses_kl:
            return self.logprobs(model, tensors, completion_len), None
        device = self.ctx.device
        ids, attention = tensors["input_ids"].to(device), tensors["attention_mask"].to(device)
        logits = model(input_ids=ids, attention_mask=attention, position_ids=left_padded_positions(attention),
                       logits_to_keep=completion_len + 1).logits[:, :-1].float()
        if self.config.temperature > 0:
            logits = logits / self.config.temperature
        return logprobs_from_logits(logits, ids[:, -completion_len:]).cpu(), logits

    def _values(self, critic: torch.nn.Module, tensors: dict[str, torch.Tensor], completion_len: int) -> torch.Tensor:
        device = self.ctx.device
        return token_values(critic, tensors["input_ids"].to(device), tensors["attention_mask"].to(device),
                            completion_len).cpu()

    # -- losses -------------------------------------------------------------------------------------
    def loss_options(self) -> PolicyLossOptions:
        """The config's options with the KL in the loss only under ``--kl_mode loss`` (beta the adaptive
        controller's current value; in reward mode the KL is in the rewards), and the ``ratio_threshold`` skip."""
        cfg = self.config
        in_loss = cfg.kl_mode == "loss" and cfg.uses_kl
        return self.policy_loss_options(self.kl_controller.value if in_loss else 0.0, skip_ratio=cfg.ratio_threshold)

    def role_loss(self, name: str, model: torch.nn.Module, batch: Experience, iteration: int) -> LossOutput:
        """The critic's clipped value loss on the micro-batch the policy just used (the trainer zeroes it when
        ``loss`` skipped the micro-batch)."""
        if name != CRITIC:
            raise ValueError(f"{type(self).__name__} trains no role {name!r}: its trained roles are the policy and "
                             f"the {CRITIC}")
        cfg = self.config
        mask = batch["completion_mask"] * batch["valid"].unsqueeze(-1)
        values = token_values(model, batch["input_ids"], batch["attention_mask"], mask.shape[1])
        per_token, clipped = clipped_value_loss(values, batch["old_values"], batch["returns"], cfg.value_clip)
        loss = cfg.vf_coef * masked_mean(per_token, mask)
        metrics = {"critic/value_loss": float(masked_mean(per_token.detach(), mask)),
                   "critic/clip_fraction": float(masked_mean(clipped.float(), mask))}
        return LossOutput(loss, metrics)
