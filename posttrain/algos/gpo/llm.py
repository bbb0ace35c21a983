"""``--algo gpo``: Guided Policy Optimization (arXiv 2505.15418) for LLMs, as a token-level GPO-clip (the
paper has no LLM setting; this mapping onto LLMs is ours).

The guider is the *same* model prompted with privileged context c (by default the example's ``hint``
column, which helps without stating the answer: ``posttrain.algos.gpo.hint``); the learner is the model
without c. Sharing the weights plays the role of GPO's shared network,
and whether c is present plays the role of the role flag. Per step:

1. Rollouts come from the guider (the hinted prompt); the behaviour log-probs beta are recomputed
   from those prompts.
2. The reward is the task's verifier / RM on the completion. Advantages are group-normalised as in GRPO
   (there is no critic; the paper uses GAE with V(o_g)).
3. Each token is scored twice, with c (mu) and without c (pi). Both passes use full-vocabulary logits:
   - guider: the double-clipped surrogate plus 1[mu/pi outside (1-delta, 1+delta)] * KL_t(mu || sg pi);
   - learner: KL_t(sg mu || pi) - alpha * the clipped off-policy surrogate of pi/beta (log-ratio capped
     at 10).
   ``gpo_variant`` = clip (the paper's default), naive (alpha = 0) or penalty (guider -L1 + alpha L3,
   learner L2 - alpha L4, with alpha adapted by the code's rule).
4. Evaluation is the trainer's usual one, on plain prompts: only the learner is evaluated, as in GPO.

The embedded default (no ``--model``) on the arithmetic task is the ``causal-arithmetic-hint`` warm start,
which has seen the hinted prompts; the plain ``causal-arithmetic`` one never has, so its guider would be
out of distribution and drag the learner down. There is no frozen reference: ``kl_coef`` must stay 0 (the
learner is anchored to the guider by L2).

Deviations: the penalty variant updates alpha once per step, from the mean KL(mu || pi) of that step's
micro-batches over every rank (the code updates it once per PPO epoch): ``loss`` returns the KL as a metric and
``end_step`` adapts alpha from the step's mean, so no state passes between loss calls; the KLs are per token over
the vocabulary.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any

import torch

from posttrain.algos.base import ALGORITHMS, Algorithm, Experience, LossOutput
from posttrain.algos.core import aggregate_loss, masked_mean
from posttrain.algos.gpo import core
from posttrain.algos.gpo.hint import HINT_RECIPE, PRIVILEGED_TEMPLATE, privileged_examples
from posttrain.algos.pg import GRPOConfig, completion_logprobs
from posttrain.algos.scoring import score_groups
from posttrain.algos.sequences import pack_sequences
from posttrain.common.padding import left_padded_positions
from posttrain.config import opt
from posttrain.models.likelihood import logprobs_from_logits
from posttrain.tasks.base import Example
from posttrain.tasks.prompts import encode_prompts


@dataclass
class GPOConfig(GRPOConfig):
    """GPO: rollouts from the hinted guider; the unhinted learner imitates it, with an RL auxiliary term."""

    gpo_variant: str = opt("clip", "GPO variant: clip (default), naive (clip, alpha = 0) or penalty.",
                           ["clip", "naive", "penalty"])
    privileged_template: str = opt(PRIVILEGED_TEMPLATE,
                                   "Guider prompt: str.format over the dataset columns, prompt and answer "
                                   "(default: the prompt plus the example's 'hint' column).")
    clip_low: float = opt(core.PPO_CLIP, "PPO clip epsilon below 1 (GPO code: 0.3); must equal clip_high.")
    clip_high: float = opt(core.PPO_CLIP, "PPO clip epsilon above 1 (GPO code: 0.3; one symmetric clip).")
    inner_clip: float = opt(core.INNER_CLIP, "delta: the guider may move at most 1 +- delta from the learner.")
    alpha: float = opt(core.GPO_CLIP_ALPHA, "Weight of the learner's RL term (clip variant; 0 = pure imitation).")
    target_kl: float = opt(core.PENALTY_TARGET_KL, "penalty variant: target KL(mu || pi) per token (d_targ).")
    log_ratio_cap: float = opt(core.LOG_RATIO_CAP, "Cap on log(pi / beta) in the learner's RL term.")

    def incompatibilities(self) -> list[tuple[str, Any, str]]:
        bad = super().incompatibilities()
        if not 0 < self.inner_clip < 1:
            bad.append(("inner_clip", self.inner_clip, "must be in (0, 1)"))
        if self.clip_low != self.clip_high:
            bad.append(("clip_low", self.clip_low, f"GPO's PPO clip is symmetric: must equal clip_high {self.clip_high}"))
        if self.alpha < 0:
            bad.append(("alpha", self.alpha, "must be >= 0"))
        if self.target_kl <= 0:
            bad.append(("target_kl", self.target_kl, "must be > 0"))
        if self.kl_coef != 0:
            bad.append(("kl_coef", self.kl_coef, "must be 0: GPO has no frozen reference (L2 anchors the learner)"))
        try:
            fields = string.Formatter().parse(self.privileged_template)
            names = [name for _, name, _, _ in fields if name is not None]
        except ValueError as err:
            bad.append(("privileged_template", self.privileged_template, f"is not a str.format template: {err}"))
        else:
            if "prompt" not in names or any(not name or name.isdigit() for name in names):
                bad.append(("privileged_template", self.privileged_template,
                            "must contain {prompt}; every other field must name a column, e.g. {hint}"))
        return bad

    def tiny_recipe(self, kind: str) -> str:
        """On arithmetic the hint-aware warm start (its guider prompts are in distribution); else the task's."""
        if self.task == "arithmetic" and kind == "causal":
            return HINT_RECIPE
        return super().tiny_recipe(kind)


def completion_logits(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, last: int,
                      temperature: float) -> torch.Tensor:
    """Float32 logits [B, last, V] predicting the final ``last`` tokens (same positions and scaling as
    ``causal_token_logprobs(..., last=last)``)."""
    position_ids = left_padded_positions(attention_mask)
    logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                   logits_to_keep=last + 1).logits[:, :-1].float()
    return logits / temperature if temperature not in (0, 1.0) else logits


@ALGORITHMS.register("gpo")
class GPO(Algorithm):
    """Guider rollouts, learner imitation with an RL term (``gpo.core``'s losses); GRPO's config and group
    advantages, none of its steps."""

    config_class = GPOConfig
    config: GPOConfig
    supports_async_rollouts = False  # its experience is built in make_experience (guider and learner prompts)

    def __init__(self, config: GPOConfig, ctx: Any) -> None:
        super().__init__(config, ctx)
        self.alpha = config.alpha if config.gpo_variant == "clip" else 0.0

    def state_dict(self) -> dict[str, Any]:
        return {"alpha": self.alpha}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.alpha = float(state.get("alpha", self.alpha))

    def end_step(self, step: int, metrics: dict[str, float]) -> dict[str, float]:
        """GPO-penalty: adapt alpha from the step's mean KL(mu || pi) (``gpo/kl_guider_learner``, which ``loss``
        returns) with the code's rule, for the next step; the other variants keep it fixed."""
        if self.config.gpo_variant == "penalty":
            self.alpha = core.update_penalty_alpha(self.alpha, metrics["gpo/kl_guider_learner"], self.config.target_kl)
        return {}

    def guider_examples(self, examples: list[Example]) -> list[Example]:
        """The privileged (hinted) version of each example, through ``config.privileged_template``."""
        return privileged_examples(examples, self.config.privileged_template)

    def make_experience(self, examples: list[Example], policy: torch.nn.Module,
                        step: int) -> tuple[Experience, dict[str, float]]:
        cfg, ctx = self.config, self.ctx
        group = [ex for ex in examples for _ in range(cfg.group_size)]
        guider_ids = encode_prompts(ctx.tokenizer, self.guider_examples(group), cfg.system_prompt, cfg.max_prompt_tokens)
        learner_ids = encode_prompts(ctx.tokenizer, group, cfg.system_prompt, cfg.max_prompt_tokens)
        with ctx.timer.phase("generate"):  # behaviour policy = the guider (hinted prompts)
            rollouts = ctx.rollout.generate(guider_ids, self.sampling_params(step))
        scored = score_groups(ctx, examples, rollouts, cfg.group_size, cfg.advantage)
        tensors = pack_sequences(guider_ids, rollouts.completion_ids, ctx.tokenizer.pad_token_id)
        learner = pack_sequences(learner_ids, rollouts.completion_ids, ctx.tokenizer.pad_token_id)
        tensors["learner_input_ids"] = learner["input_ids"]
        tensors["learner_attention_mask"] = learner["attention_mask"]
        tensors["advantages"] = scored.advantages
        tensors["valid"] = scored.valid.float()
        with torch.no_grad(), ctx.timer.phase("old_logprobs"):  # beta: needed even at mu = 1 (pi != beta)
            tensors["old_logprobs"] = completion_logprobs(policy, tensors, tensors["completion_mask"].shape[1],
                                                          cfg.temperature, ctx.device)
        metrics = dict(scored.metrics)
        metrics["train/guider_accuracy"] = metrics.pop("train/accuracy")  # the rollouts are the guider's
        metrics["gpo/alpha"] = self.alpha
        # groups whose G rewards are all equal give no RL signal (what an answer-stating hint causes)
        groups = tensors["advantages"].view(-1, cfg.group_size)
        metrics["gpo/zero_advantage_groups"] = float((groups.abs().amax(-1) == 0).float().mean())
        return Experience(tensors), metrics

    def loss(self, policy: torch.nn.Module, batch: Experience, iteration: int) -> LossOutput:
        cfg = self.config
        mask = batch["completion_mask"] * batch["valid"].unsqueeze(-1)
        C = mask.shape[1]
        g_logits = completion_logits(policy, batch["input_ids"], batch["attention_mask"], C, cfg.temperature)
        l_logits = completion_logits(policy, batch["learner_input_ids"], batch["learner_attention_mask"], C,
                                     cfg.temperature)
        targets = batch["input_ids"][:, -C:]
        g_logp, l_logp = logprobs_from_logits(g_logits, targets), logprobs_from_logits(l_logits, targets)
        kl_g = core.categorical_kl(g_logits, l_logits.detach())
        kl_l = core.categorical_kl(g_logits.detach(), l_logits)
        beta, adv = batch["old_logprobs"], batch["advantages"]
        coefs = core.GPOCoefs(ppo_clip=cfg.clip_high, inner_clip=cfg.inner_clip, alpha=self.alpha,
                              target_kl=cfg.target_kl, log_ratio_cap=cfg.log_ratio_cap)
        metrics: dict[str, float] = {}
        if cfg.gpo_variant == "penalty":
            g_loss, l_loss, _ = core.gpo_penalty_losses(g_logp, l_logp, beta, adv, kl_g, kl_l, self.alpha, coefs)
        else:
            g_loss, l_loss, info = core.gpo_clip_losses(g_logp, l_logp, beta, adv, kl_g, kl_l, coefs)
            metrics["gpo/backtrack_fraction"] = float(masked_mean(info["mask"], mask))
        metrics.update({
            "gpo/kl_guider_learner": float(masked_mean(kl_g.detach(), mask)),
            "gpo/learner_ratio_mean": float(masked_mean(torch.exp(l_logp - beta).detach().clamp(max=1e4), mask)),
            "entropy": float(masked_mean(-(g_logits.log_softmax(-1).exp() * g_logits.log_softmax(-1)).sum(-1).detach(),
                                         mask)),
        })
        per_token = g_loss + l_loss
        return LossOutput(aggregate_loss(per_token, mask, cfg.loss_agg, constant=float(cfg.max_new_tokens)), metrics)
