"""Group policy-gradient baselines for causal LMs: GRPO (Shao et al. 2024, DeepSeekMath) and RLOO
(Ahmadian et al. 2024, "Back to Basics"), with Dr.GRPO advantages (Liu et al. 2025) as an option.

Per step and prompt, G completions are sampled; rewards become group-relative advantages; the loss
is the PPO clipped surrogate (separate low/high clip, DAPO) on token log-prob ratios, plus an
optional KL penalty to a frozen reference, aggregated by token-mean, seq-mean or a constant.
When ``mu == 1`` the old policy equals the current one, so its log-probs are the current ones
detached (no extra forward), as in TRL.

Off-policy correction (``posttrain.algos.policy_loss``, the decoupled objective of AReaL and verl): the ratio is
pi_theta / pi_prox, pi_prox being the trainer's own log-probs when the step's experience is made (recomputed
when ``mu > 1``; at ``mu == 1`` the policy's log-probs detached, which equal them), never the sampler's, even for
stale rollouts. The sampler's log-probs enter only through truncated importance sampling, each token's loss
weighted min(pi_prox / pi_sampler, C) (``tis_cap``), and the mismatch metrics (``rollout/logprob_abs_diff``,
``rollout/logprob_kl``, pi_prox against pi_sampler), logged every step.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any

import torch

from posttrain.algos.base import (
    ALGORITHMS,
    Algorithm,
    Experience,
    GenerationRequest,
    LossOutput,
)
from posttrain.algos.core import AGGREGATIONS, KL_ESTIMATORS, masked_mean
from posttrain.algos.policy_loss import IS_LEVELS, RATIO_LEVELS, PolicyLossOptions, PolicyTokens, policy_loss
from posttrain.algos.roles import REFERENCE, ModelRole, policy_role, reference_role
from posttrain.algos.scoring import ScoredGroups, score_groups
from posttrain.algos.sequences import pack_sequences
from posttrain.config import VLLM_EMBEDDED_HELP, TrainConfig, defaults, opt
from posttrain.engines.base import GenerationEngine, Rollouts
from posttrain.engines.spec import VLLM_KINDS, EngineSpec
from posttrain.models.likelihood import causal_token_logprobs
from posttrain.tasks.base import Example
from posttrain.tasks.prompts import encode_prompts

log = logging.getLogger("posttrain")


def policy_loss_incompatibilities(cfg: Any) -> list[tuple[str, Any, str]]:
    """Checks of the policy-loss fields every clipped policy-gradient config has (GRPO's family, PPO's, ESPO's)."""
    bad = []
    if not 0 <= cfg.clip_low < 1:
        bad.append(("clip_low", cfg.clip_low, "must be in [0, 1)"))
    if cfg.clip_high < 0:
        bad.append(("clip_high", cfg.clip_high, "must be >= 0"))
    if cfg.dual_clip != 0 and cfg.dual_clip <= 1:
        bad.append(("dual_clip", cfg.dual_clip, "must be 0 (off) or > 1 (the bound c of c |A|)"))
    if cfg.kl_clamp < 0:
        bad.append(("kl_clamp", cfg.kl_clamp, "must be 0 (no clamp) or > 0"))
    return bad


def group_pg_incompatibilities(cfg: Any) -> list[tuple[str, Any, str]]:
    """Checks shared by every clipped group policy-gradient config (GRPO, RLOO, ESPO, ...)."""
    bad = policy_loss_incompatibilities(cfg)
    if cfg.group_size < 2:
        bad.append(("group_size", cfg.group_size, "group advantages need at least 2 completions per prompt"))
    if cfg.kl_coef < 0:
        bad.append(("kl_coef", cfg.kl_coef, "must be >= 0"))
    return bad


DEFAULT_TIS_CAP = 2.0
"""Default truncation C of the per-token weight min(pi_prox / pi_sampler, C): the C = 2 of Yao et al. (2025) and
verl's rollout-correction threshold (2.0). The weights of a well-synced engine sit near 1, so C only bounds the
rare tokens the two sides disagree on. Not TRL's default: TRL 1.16 (``vllm_importance_sampling_mode
"sequence_mask"``, ``vllm_importance_sampling_cap`` 3) takes one ratio per sequence and drops the sequences whose
ratio exceeds 3, where we keep every token and truncate its weight."""


def rollouts_may_lag(cfg: Any) -> bool:
    """Whether the rollouts' sampler can differ from pi_prox beyond rounding: a vLLM engine (other kernels), or
    weights older than the trainer's (``--async_rollouts``, or ``--sync_every`` above 1)."""
    return cfg.rollout.kind in VLLM_KINDS or cfg.async_rollouts or cfg.sync_every > 1


def tis_cap(cfg: Any) -> float:
    """The truncated-importance-sampling cap in force: ``cfg.tis_cap``, or when unset ``DEFAULT_TIS_CAP`` where
    the rollouts may lag (``rollouts_may_lag``) and 0 (off, the exact surrogate) where the trainer's own weights
    sampled them in process."""
    if cfg.tis_cap is not None:
        return float(cfg.tis_cap)
    return DEFAULT_TIS_CAP if rollouts_may_lag(cfg) else 0.0


@dataclass
class GRPOConfig(TrainConfig):
    """GRPO: group-normalised advantages, clipped token-level surrogate, optional KL to the reference."""

    rollout: EngineSpec = opt("hf", "The policy's rollout engine (causal LMs; masked-diffusion models train with "
                                        "--algo espo), an engine spec: hf (our decoding loop), vllm (colocated in "
                                        "each rank) or vllm-remote:URL[,URL] (`posttrain rollout-worker` servers); "
                                        "its options are --rollout.OPTION value. " + VLLM_EMBEDDED_HELP,
                              ["hf", *VLLM_KINDS])
    advantage: str = opt("grpo", "Advantage estimator over each group of G completions.", ["grpo", "dr_grpo", "rloo"])
    clip_low: float = opt(0.2, "Lower clip epsilon: ratios below 1 - clip_low are clipped.")
    clip_high: float = opt(0.2, "Upper clip epsilon (DAPO clip-higher uses e.g. 0.28).")
    kl_coef: float = opt(0.0, "Weight of the KL penalty to the frozen reference model (beta); 0 = no reference.")
    kl_estimator: str = opt("k3", "Per-token KL estimator (Schulman): k1, k2 or k3.", KL_ESTIMATORS)
    dual_clip: float = opt(0.0, "Dual-clip PPO (Ye et al. 2020): a negative-advantage token's loss is at most c |A| "
                                "with this c > 1 (verl applies 3); 0 = off.")
    ratio_level: str = opt("token", "The clipped ratio pi_theta / pi_prox: one per token, or one per sequence, the "
                                    "exp of its mean token log-ratio (GSPO; pair it with --loss_agg seq-mean).",
                           RATIO_LEVELS)
    loss_agg: str = opt("token-mean", "How token losses are reduced: token-mean (DAPO), seq-mean (GRPO), "
                                      "seq-mean-token-sum (verl) or constant (Dr. GRPO: over the completion budget).",
                        AGGREGATIONS)
    kl_clamp: float = opt(0.0, "Clamp each token's KL estimate to [-c, c] with this c (verl and OpenRLHF use 10); "
                               "0 = no clamp.")
    tis_cap: float | None = opt(None, "Truncated importance sampling of the sampler's lag and mismatch: each token's "
                                      "loss is weighted min(pi_prox / pi_sampler, C) with this cap C; unset = 2.0 "
                                      "for vLLM rollouts, --async_rollouts or --sync_every > 1, else off; 0 = off.")
    is_level: str = opt("token", "Where --tis_cap's weight is taken: per token; per sequence, the product of its "
                                 "token ratios truncated at C (TRL sequence_truncate, verl sequence); or "
                                 "sequence-mask, a sequence whose product exceeds C dropped (TRL sequence_mask).",
                        IS_LEVELS)
    padding_free: bool = opt(False, "Log-prob forwards (training, old policy, reference) over each micro-batch's "
                                    "real tokens packed into one row (position ids restarting per sequence, a "
                                    "block-diagonal causal mask), no padding; the same numbers as the padded batch. "
                                    "Off by default: not measured faster (benchmarks/grpo_vs_trl.md, SmolLM2).")

    def incompatibilities(self) -> list[tuple[str, Any, str]]:
        bad = group_pg_incompatibilities(self)
        if self.tis_cap is not None and self.tis_cap < 0:
            bad.append(("tis_cap", self.tis_cap, "must be unset (auto), 0 (off) or > 0 (the cap C)"))
        return bad


@dataclass
@defaults(advantage="rloo")
class RLOOConfig(GRPOConfig):
    """RLOO: leave-one-out baseline, no std scaling."""


def _right_padded(values: list[list[float]], length: int) -> torch.Tensor:
    """Per-completion-token values as a ``[B, length]`` tensor aligned with ``pack_sequences``'s
    ``completion_mask`` (right-padded with zeros)."""
    out = torch.zeros(len(values), length, dtype=torch.float32)
    for i, row in enumerate(values):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.float32)
    return out


def completion_logprobs(model: torch.nn.Module, tensors: dict[str, torch.Tensor], completion_len: int,
                        temperature: float, device: torch.device | str, padding_free: bool = False) -> torch.Tensor:
    """``model``'s log-probs (float32, on the CPU) of the last ``completion_len`` tokens of packed sequences
    (``pack_sequences``'s ``input_ids`` / ``attention_mask``), at the sampling ``temperature``; ``padding_free``
    as in ``causal_token_logprobs``."""
    logprobs, _ = causal_token_logprobs(model, tensors["input_ids"].to(device), tensors["attention_mask"].to(device),
                                        temperature=temperature, last=completion_len, padding_free=padding_free)
    return logprobs.float().cpu()


class ClippedPolicyGradient(Algorithm):
    """What the clipped policy-gradient algorithms (GRPO, PPO and those built on them) share. One step, top to
    bottom (``make_experience``): ``generation_request`` (the step's prompts, each ``group_size`` times, with the
    seeded sampling settings) -> ``answer_engine().generate`` -> ``experience_from_rollouts`` (``trained_rollouts``,
    then the subclass's rewards, advantages and log-probs); then per micro-batch ``loss``: ``policy_tokens`` (the
    log-probs under pi_theta, pi_prox, the sampler and the reference) into the one ``policy_loss`` with the
    subclass's ``loss_options``.

    A subclass supplies ``roles``, ``experience_from_rollouts`` and ``loss_options``. Prefix-RL changes two
    things only: its ``answer_engine`` (the adapter's prefix, then the target's continuation) and its
    ``trained_rollouts`` hook (the adapter's k tokens of each whole answer)."""

    config: GRPOConfig

    def __init__(self, config: GRPOConfig, ctx: Any) -> None:
        super().__init__(config, ctx)
        if config.tis_cap == 0 and rollouts_may_lag(config):
            log.warning("--tis_cap 0 with rollouts that lag the trained weights (vLLM's kernels, --async_rollouts or "
                        "--sync_every > 1): the sampler's lag and mismatch go uncorrected; unset --tis_cap for the "
                        "default cap %s", DEFAULT_TIS_CAP)

    def answer_engine(self) -> GenerationEngine:
        """What answers the step's prompts, in training and in held-out evaluation: the policy's engine."""
        return self.ctx.rollout

    def evaluation_engine(self) -> GenerationEngine:
        return self.answer_engine()

    def trained_rollouts(self, rollouts: Rollouts) -> tuple[Rollouts, dict[str, float]]:
        """The rollouts the loss trains on, from what ``answer_engine`` returned, and metrics of their own: the
        same rollouts here."""
        return rollouts, {}

    def generation_request(self, examples: list[Example], step: int) -> GenerationRequest:
        cfg = self.config
        encoded = encode_prompts(self.ctx.tokenizer, examples, cfg.system_prompt, cfg.max_prompt_tokens)
        return GenerationRequest([ids for ids in encoded for _ in range(cfg.group_size)], self.sampling_params(step))

    def make_experience(self, examples: list[Example], policy: torch.nn.Module,
                        step: int) -> tuple[Experience, dict[str, float]]:
        request = self.generation_request(examples, step)
        with self.ctx.timer.phase("generate"):
            rollouts = self.answer_engine().generate(request.prompt_ids, request.params)
        return self.experience_from_rollouts(examples, rollouts, policy, step)

    @abstractmethod
    def experience_from_rollouts(self, examples: list[Example], rollouts: Rollouts, policy: torch.nn.Module,
                                 step: int) -> tuple[Experience, dict[str, float]]:
        """Rewards, advantages and log-probs of the step's finished rollouts (after ``trained_rollouts``)."""

    @abstractmethod
    def loss_options(self) -> PolicyLossOptions:
        """The policy loss's variant and numbers for this algorithm (``policy_loss_options`` of its config)."""

    def policy_loss_options(self, kl_coef: float, skip_ratio: float = 0.0) -> PolicyLossOptions:
        """The config's policy-loss fields as ``PolicyLossOptions``, with the KL weight ``kl_coef`` (0 = no KL term)
        and the micro-batch skip threshold; "constant" aggregation divides by the rollouts' completion budget."""
        cfg = self.config
        return PolicyLossOptions(
            clip_low=cfg.clip_low, clip_high=cfg.clip_high, dual_clip=cfg.dual_clip, ratio_level=cfg.ratio_level,
            tis_cap=tis_cap(cfg), is_level=cfg.is_level, aggregation=cfg.loss_agg,
            aggregation_constant=float(self.sampling_params(step=0).max_new_tokens), kl_coef=kl_coef,
            kl_estimator=cfg.kl_estimator, kl_clamp=cfg.kl_clamp, skip_ratio=skip_ratio)

    def logprobs(self, model: torch.nn.Module, tensors: dict[str, torch.Tensor], completion_len: int) -> torch.Tensor:
        """``completion_logprobs`` at the rollouts' temperature on this rank's device (``--padding_free``)."""
        return completion_logprobs(model, tensors, completion_len, self.config.temperature, self.ctx.device,
                                   self.config.padding_free)

    def policy_tokens(self, policy: torch.nn.Module, batch: Experience) -> tuple[PolicyTokens, torch.Tensor]:
        """The micro-batch's log-probs under pi_theta (``policy``'s forward), pi_prox, the sampler and the reference
        (``policy_loss.PolicyTokens``), with the policy's per-token entropy."""
        mask = batch["completion_mask"] * batch["valid"].unsqueeze(-1)
        logp, entropy = causal_token_logprobs(policy, batch["input_ids"], batch["attention_mask"],
                                              temperature=self.config.temperature, with_entropy=True,
                                              last=mask.shape[1], padding_free=self.config.padding_free)
        logp = logp.float()
        proximal = batch["old_logprobs"] if "old_logprobs" in batch.tensors else logp.detach()
        tokens = PolicyTokens(logp, proximal, batch["advantages"], mask, sampling_logp=batch["sampling_logprobs"],
                              ref_logp=batch.tensors.get("ref_logprobs"))
        return tokens, entropy

    def loss(self, policy: torch.nn.Module, batch: Experience, iteration: int) -> LossOutput:
        tokens, entropy = self.policy_tokens(policy, batch)
        result = policy_loss(tokens, self.loss_options())
        metrics = {**result.metrics, "entropy": float(masked_mean(entropy.detach(), tokens.mask))}
        return LossOutput(result.loss, metrics, skip=result.skip)


@ALGORITHMS.register("grpo")
class GRPO(ClippedPolicyGradient):
    """Group-relative advantages of the task's rewards; the clipped surrogate, TIS and the KL penalty."""

    config_class = GRPOConfig
    supports_async_rollouts = True

    @classmethod
    def declared_roles(cls, config: GRPOConfig) -> tuple[ModelRole, ...]:
        """The policy and the frozen reference when the KL penalty is on (``kl_coef > 0``)."""
        reference = (reference_role(),) if config.kl_coef > 0 else ()
        return (policy_role(config.rollout), *reference)

    def score(self, examples: list[Example], rollouts: Rollouts, step: int) -> ScoredGroups:
        """Step ``step``'s rollouts scored by the run's reward, with group advantages (DuPO: its dual reward)."""
        cfg = self.config
        return score_groups(self.ctx, examples, rollouts, cfg.group_size, cfg.advantage)

    def experience_from_rollouts(self, examples: list[Example], rollouts: Rollouts, policy: torch.nn.Module,
                                 step: int) -> tuple[Experience, dict[str, float]]:
        """Rewards, advantages and log-probs of finished rollouts. However old the weights that sampled them,
        pi_prox (the ratio's old policy) is ``policy``'s, recomputed here when ``mu > 1`` (at ``mu == 1`` the loss
        takes the policy's own log-probs, detached); the engine's log-probs are kept as ``sampling_logprobs`` for
        the behaviour weight and the mismatch metrics (``posttrain.algos.policy_loss``)."""
        cfg, ctx = self.config, self.ctx
        rollouts, answer_metrics = self.trained_rollouts(rollouts)
        scored = self.score(examples, rollouts, step)
        tensors = pack_sequences(rollouts.prompt_ids, rollouts.completion_ids, ctx.tokenizer.pad_token_id)
        tensors["advantages"] = scored.advantages
        tensors["valid"] = scored.valid.float()
        completion_len = tensors["completion_mask"].shape[1]
        tensors["sampling_logprobs"] = _right_padded(rollouts.logprobs, completion_len)
        with torch.no_grad():
            if cfg.mu > 1:
                with ctx.timer.phase("old_logprobs"):
                    tensors["old_logprobs"] = self.logprobs(policy, tensors, completion_len)
            if self.declares(REFERENCE):
                with ctx.timer.phase("reference"):
                    tensors["ref_logprobs"] = self.logprobs(ctx.models[REFERENCE], tensors, completion_len)
        return Experience(tensors), {**scored.metrics, **answer_metrics}

    def loss_options(self) -> PolicyLossOptions:
        """The config's options, with the KL penalty when the reference is declared."""
        return self.policy_loss_options(self.config.kl_coef if self.declares(REFERENCE) else 0.0)


@ALGORITHMS.register("rloo")
class RLOO(GRPO):
    config_class = RLOOConfig
