"""Group policy-gradient baselines for causal LMs: GRPO (Shao et al. 2024, DeepSeekMath) and RLOO
(Ahmadian et al. 2024, "Back to Basics"), with Dr.GRPO advantages (Liu et al. 2025) as an option.

Per step and prompt, G completions are sampled; rewards become group-relative advantages; the loss
is the PPO clipped surrogate (separate low/high clip, DAPO) on token log-prob ratios, plus an
optional KL penalty to a frozen reference, aggregated by token-mean, seq-mean or a constant.
When ``mu == 1`` the old policy equals the current one, so its log-probs are the current ones
detached (no extra forward), as in TRL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from posttrain.algos.base import ALGORITHMS, Algorithm, Experience
from posttrain.algos.core import (
    AGGREGATIONS,
    KL_ESTIMATORS,
    aggregate_loss,
    clipped_surrogate,
    group_advantages,
    kl_estimate,
    masked_mean,
)
from posttrain.algos.scoring import rollout_metrics, score_rollouts
from posttrain.algos.sequences import pack_sequences
from posttrain.config import TrainConfig, opt
from posttrain.models.likelihood import causal_token_logprobs
from posttrain.tasks.base import Example
from posttrain.tasks.prompts import encode_prompts


def group_pg_incompatibilities(cfg: Any) -> list[tuple[str, Any, str]]:
    """Checks shared by every clipped group policy-gradient config (GRPO, RLOO, ESPO, ...)."""
    bad = []
    if cfg.group_size < 2:
        bad.append(("group_size", cfg.group_size, "group advantages need at least 2 completions per prompt"))
    if not 0 <= cfg.clip_low < 1:
        bad.append(("clip_low", cfg.clip_low, "must be in [0, 1)"))
    if cfg.clip_high < 0:
        bad.append(("clip_high", cfg.clip_high, "must be >= 0"))
    if cfg.kl_coef < 0:
        bad.append(("kl_coef", cfg.kl_coef, "must be >= 0"))
    return bad


@dataclass
class GRPOConfig(TrainConfig):
    """GRPO: group-normalised advantages, clipped token-level surrogate, optional KL to the reference."""

    rollout: str = opt("hf", "Rollout engine (causal LMs; masked-diffusion models train with --algo espo).",
                       ["hf", "vllm"])
    advantage: str = opt("grpo", "Advantage estimator over each group of G completions.", ["grpo", "dr_grpo", "rloo"])
    clip_low: float = opt(0.2, "Lower clip epsilon: ratios below 1 - clip_low are clipped.")
    clip_high: float = opt(0.2, "Upper clip epsilon (DAPO clip-higher uses e.g. 0.28).")
    kl_coef: float = opt(0.0, "Weight of the KL penalty to the frozen reference model (beta); 0 = no reference.")
    kl_estimator: str = opt("k3", "Per-token KL estimator (Schulman): k1, k2 or k3.", KL_ESTIMATORS)
    loss_agg: str = opt("token-mean", "How token losses are averaged.", AGGREGATIONS)

    def incompatibilities(self) -> list[tuple[str, Any, str]]:
        return group_pg_incompatibilities(self)


@dataclass
class RLOOConfig(GRPOConfig):
    """RLOO: leave-one-out baseline, no std scaling."""

    advantage: str = opt("rloo", "Advantage estimator over each group of G completions.", ["grpo", "dr_grpo", "rloo"])


@ALGORITHMS.register("grpo")
class GRPO(Algorithm):
    config_class = GRPOConfig
    config: GRPOConfig

    @property
    def needs_reference(self) -> bool:
        return self.config.kl_coef > 0

    def make_experience(self, examples: list[Example], policy: torch.nn.Module) -> tuple[Experience, dict[str, float]]:
        cfg, ctx = self.config, self.ctx
        group = [ex for ex in examples for _ in range(cfg.group_size)]
        encoded = encode_prompts(ctx.tokenizer, examples, cfg.system_prompt, cfg.max_prompt_tokens)
        prompt_ids = [ids for ids in encoded for _ in range(cfg.group_size)]
        with ctx.timer.phase("generate"):
            rollouts = ctx.rollout.generate(prompt_ids, self.sampling_params())
        reward_tensor, valid, correct = score_rollouts(ctx, group, rollouts)
        advantages = group_advantages(reward_tensor, cfg.group_size, cfg.advantage, valid=valid)
        tensors = pack_sequences(prompt_ids, rollouts.completion_ids, ctx.tokenizer.pad_token_id)
        tensors["advantages"] = advantages
        tensors["valid"] = valid.float()
        completion_len = tensors["completion_mask"].shape[1]
        with torch.no_grad():
            if cfg.mu > 1:
                with ctx.timer.phase("old_logprobs"):
                    tensors["old_logprobs"] = self._logprobs(policy, tensors, completion_len)
            if self.needs_reference:
                with ctx.timer.phase("reference"):
                    tensors["ref_logprobs"] = self._logprobs(ctx.reference, tensors, completion_len)
        metrics = rollout_metrics(reward_tensor, valid, correct, rollouts)
        return Experience(tensors), metrics

    def _logprobs(self, model: torch.nn.Module, tensors: dict[str, torch.Tensor], completion_len: int) -> torch.Tensor:
        device = self.ctx.device
        logprobs, _ = causal_token_logprobs(model, tensors["input_ids"].to(device), tensors["attention_mask"].to(device),
                                            temperature=self.config.temperature, last=completion_len)
        return logprobs.float().cpu()

    def loss(self, policy: torch.nn.Module, batch: Experience) -> tuple[torch.Tensor, dict[str, float]]:
        cfg = self.config
        mask = batch["completion_mask"] * batch["valid"].unsqueeze(-1)
        logp, entropy = causal_token_logprobs(policy, batch["input_ids"], batch["attention_mask"],
                                              temperature=cfg.temperature, with_entropy=True,
                                              last=mask.shape[1])
        logp = logp.float()
        old = batch["old_logprobs"] if "old_logprobs" in batch.tensors else logp.detach()
        per_token, clipped, ratio = clipped_surrogate(logp, old, batch["advantages"], cfg.clip_low, cfg.clip_high)
        metrics = {
            "clip_fraction": float(masked_mean(clipped.float(), mask)),
            "entropy": float(masked_mean(entropy.detach(), mask)),
            "ratio_mean": float(masked_mean(ratio.detach(), mask)),
        }
        if self.needs_reference:
            kl = kl_estimate(logp, batch["ref_logprobs"], cfg.kl_estimator)
            per_token = per_token + cfg.kl_coef * kl
            metrics["kl"] = float(masked_mean(kl.detach(), mask))
        loss = aggregate_loss(per_token, mask, cfg.loss_agg, constant=float(cfg.max_new_tokens))
        return loss, metrics


@ALGORITHMS.register("rloo")
class RLOO(GRPO):
    config_class = RLOOConfig
