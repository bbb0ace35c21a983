"""RL for masked-diffusion LMs: ESPO (Ou et al. 2025, arXiv 2512.03759) and the baselines it ablates,
all on one code path selected by two flags (the paper's Fig. 1 grid) plus the KL estimator (Fig. 2):

- ``--likelihood elbo|mean-field``: the likelihood proxy. ``elbo`` = the coupled, stratified, M-sample
  sequence ELBO (``posttrain.algos.elbo.elbo_terms``); ``mean-field`` = d1's one-step estimate
  (completion fully masked, prompt tokens masked with ``prompt_mask_prob``).
- ``--action sequence|token``: ``sequence`` treats the whole completion as one action, with the ratio
  normalised by the fixed generation length L: rho = exp((E - E_old) / L) (ESPO eq. 8), clipped per
  sequence; ``token`` uses per-token ratios exp(e_k - e_old_k) on the per-token terms, clipped per token
  and averaged over the completion tokens up to and including the first EOS (d1).
- ``--kl_estimator k1|k2|k3`` on the same quantities (sequence: on E, divided by L as in ESPO's code;
  token: per token). k1 adds ESPO's stop-gradient correction ``(lp - sg(lp)) * (sg(lp) - ref)``.

Registered presets: ``espo`` (elbo, sequence, k2, RLOO advantages, beta 1e-2), ``token-elbo`` (elbo,
token, otherwise as espo: the paper's "token + ELBO" ablation) and ``diffu-grpo`` (d1: mean-field, token,
k3, beta 0.04, clip 0.5, GRPO mean/std advantages, prompt masking 0.15). Every flag can be overridden.

Loop (ESPO's ``ESPOTrainer``). ``make_experience``: sample G completions per prompt with the diffusion
sampler (fixed length L, EOS-padded), score them, compute advantages, then draw the masks for all ``mu``
inner iterations from the algorithm's generator and -- under no grad, with *the same masks* (common
random numbers) -- the old policy's estimates (only when mu > 1; for mu = 1 the old values are the
current ones detached, as in ESPO) and the reference's (only when kl_coef > 0). ``loss`` evaluates the
current policy with the masks of the inner iteration the trainer passes it. A new set of masks is used per
inner iteration, as ESPO does.

Deviations from the papers' code (deliberate, documented): masks come from a checkpointed local
generator instead of reseeding global RNGs; the prompt's left padding is hidden by the attention mask
(ESPO/d1 pass none); strata of mask counts span this rank's whole batch rather than one micro-batch;
invalid rewards (None) get zero advantage and are left out of the loss mean.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from posttrain.algos.base import ALGORITHMS, Algorithm, Experience, LossOutput
from posttrain.algos.core import KL_ESTIMATORS, masked_mean
from posttrain.algos.elbo import (
    draw_elbo_masks,
    draw_prompt_masks,
    elbo_terms,
    mean_field_logprobs,
    model_logits_fn,
)
from posttrain.algos.pg import group_pg_incompatibilities
from posttrain.algos.policy_loss import PolicyLossOptions, PolicyTokens, policy_loss
from posttrain.algos.roles import REFERENCE, ModelRole, reference_role
from posttrain.algos.scoring import score_groups
from posttrain.common.padding import left_pad
from posttrain.config import TrainConfig, defaults, opt
from posttrain.engines.diffusion import fixed_length_completions
from posttrain.engines.spec import EngineSpec
from posttrain.models.diffusion import diffusion_mask_token_id, resolve_mask_token_id
from posttrain.tasks.base import Example
from posttrain.tasks.prompts import encode_prompts


@dataclass
@defaults(task="sudoku", steps=150, prompts_per_step=8, group_size=6, micro_batch_size=48, eval_every=20, pass_k=1,
          mu=2, lr=3e-4)
class ESPOConfig(TrainConfig):
    """ESPO: sequence-level ratio on the ELBO, normalised by L; clipped surrogate; k2 KL; RLOO.

    Batch shape and budget are sized for the embedded default (tiny diffusion model, 4x4 Sudoku, 2 CPU cores,
    under 10 minutes with its warm start): G = 6 as ESPO; 150 steps, since 60 stayed within noise of the warm
    start; mu = 2 (the paper's runs use mu = 8 and far more steps)."""

    rollout: EngineSpec = opt("diffusion", "Rollout engine (the masked-diffusion sampler; its options are "
                                               "--rollout.OPTION value).", ["diffusion"])
    max_new_tokens: int = opt(24, "Fixed generation length L (completions are EOS-padded to it).")
    likelihood: str = opt("elbo", "Likelihood proxy: coupled sequence ELBO or d1 mean-field.", ["elbo", "mean-field"])
    action: str = opt("sequence", "Action space of the ratio: whole sequence (ESPO) or each token.", ["sequence", "token"])
    advantage: str = opt("rloo", "Advantage estimator over each group of G completions.", ["rloo", "grpo", "dr_grpo"])
    clip_low: float = opt(0.2, "Lower clip epsilon of the ratio.")
    clip_high: float = opt(0.2, "Upper clip epsilon of the ratio.")
    kl_coef: float = opt(1e-2, "Weight beta of the KL penalty to the frozen reference; 0 = no reference.")
    kl_estimator: str = opt("k2", "KL estimator on the likelihood proxy: k1, k2 or k3.", KL_ESTIMATORS)
    dual_clip: float = opt(0.0, "Dual-clip PPO: a negative-advantage action's loss is at most c |A| with this c > 1; "
                                "0 = off (ESPO uses none).")
    kl_clamp: float = opt(0.0, "Clamp the KL estimate to [-c, c] with this c; 0 = no clamp (ESPO clamps none).")
    num_mc: int = opt(2, "ELBO Monte Carlo samples M per evaluation.")
    coupled: bool = opt(True, "Add the complementary masked pass (every token scored once per sample).")
    stratify: str = opt("batch", "How ELBO mask counts are stratified.", ["batch", "mc", "none"])
    prompt_mask_prob: float = opt(0.15, "Mean-field: probability of masking each prompt token (d1).")
    elbo_batch_size: int = opt(0, "Rows per ELBO forward; 0 = the micro-batch (one pass per forward, as the papers).")

    def incompatibilities(self) -> list[tuple[str, Any, str]]:
        bad = group_pg_incompatibilities(self)
        if self.num_mc < 1:
            bad.append(("num_mc", self.num_mc, "must be >= 1"))
        if not 0 <= self.prompt_mask_prob < 1:
            bad.append(("prompt_mask_prob", self.prompt_mask_prob, "must be in [0, 1)"))
        return bad


@dataclass
@defaults(action="token")
class TokenELBOConfig(ESPOConfig):
    """Token-level ratios on the per-token ELBO terms (UniGRPO / Coupled-GRPO style), else as ESPO."""


@dataclass
@defaults(likelihood="mean-field", action="token", advantage="grpo", clip_low=0.5, clip_high=0.5, kl_coef=0.04,
          kl_estimator="k3")
class DiffuGRPOConfig(ESPOConfig):
    """d1 / diffu-GRPO: mean-field likelihood, token-level ratios, k3 KL (d1 train.yaml defaults)."""


@ALGORITHMS.register("espo")
class ESPO(Algorithm):
    config_class = ESPOConfig
    config: ESPOConfig

    # -- wiring ----------------------------------------------------------------------------------
    @classmethod
    def declared_roles(cls, config: ESPOConfig) -> tuple[ModelRole, ...]:
        """The policy, and the frozen reference when the KL penalty is on (``kl_coef > 0``)."""
        return super().declared_roles(config) + ((reference_role(),) if config.kl_coef > 0 else ())

    def _mask_id(self, model: torch.nn.Module) -> int:
        try:
            return diffusion_mask_token_id(model)
        except ValueError:
            return resolve_mask_token_id(self.ctx.tokenizer)

    # -- estimates -------------------------------------------------------------------------------
    def _estimate(self, model: torch.nn.Module, tensors: dict[str, torch.Tensor], iteration: int) -> torch.Tensor:
        """The likelihood proxy of the current iteration: [b] (sequence) or [b, L] (token)."""
        cfg = self.config
        fn = model_logits_fn(model)
        ids, am = tensors["input_ids"], tensors["attention_mask"]
        length = tensors["completion_mask"].shape[1]
        chunk = cfg.elbo_batch_size or None
        if cfg.likelihood == "elbo":
            per_token = elbo_terms(fn, ids, tensors["elbo_masks"][:, iteration], self._mask_id(model), am,
                                   coupled=cfg.coupled, max_batch=chunk)
        else:
            per_token = mean_field_logprobs(fn, ids, length, self._mask_id(model), tensors["prompt_masks"][:, iteration],
                                            am, max_batch=chunk)
        return per_token.sum(-1) if cfg.action == "sequence" else per_token

    @torch.no_grad()
    def _estimate_all(self, model: torch.nn.Module, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        """Estimates for every inner iteration, [B, mu] or [B, mu, L], computed micro-batch by micro-batch."""
        device = self.ctx.device
        size = tensors["input_ids"].shape[0]
        micro = min(self.config.micro_batch_size, size)
        out = []
        for start in range(0, size, micro):
            part = {k: v[start : start + micro].to(device) for k, v in tensors.items()}
            out.append(torch.stack([self._estimate(model, part, it).float().cpu() for it in range(self.config.mu)], 1))
        return torch.cat(out, 0)

    # -- experience ------------------------------------------------------------------------------
    def make_experience(self, examples: list[Example], policy: torch.nn.Module,
                        step: int) -> tuple[Experience, dict[str, float]]:
        cfg, ctx = self.config, self.ctx
        tokenizer = ctx.tokenizer
        group = [ex for ex in examples for _ in range(cfg.group_size)]
        prompt_ids = encode_prompts(tokenizer, group, cfg.system_prompt, cfg.max_prompt_tokens)
        with ctx.timer.phase("generate"):
            rollouts = ctx.rollout.generate(prompt_ids, self.sampling_params(step))
        scored = score_groups(ctx, examples, rollouts, cfg.group_size, cfg.advantage)

        length = cfg.max_new_tokens
        batch = len(group)
        prompts, prompt_valid = left_pad(prompt_ids, tokenizer.pad_token_id)
        completions = fixed_length_completions(rollouts.completion_ids, length, tokenizer.eos_token_id)
        completion_mask = torch.zeros((batch, length), dtype=torch.float32)
        for row, ids in enumerate(rollouts.completion_ids):
            completion_mask[row, : max(1, len(ids))] = 1.0  # up to and including the first EOS
        tensors: dict[str, torch.Tensor] = {
            "input_ids": torch.cat([prompts, completions], 1),
            "attention_mask": torch.cat([prompt_valid, torch.ones((batch, length), dtype=torch.long)], 1),
            "completion_mask": completion_mask,
            "advantages": scored.advantages,
            "valid": scored.valid.float(),
        }
        if cfg.likelihood == "elbo":  # [B, mu, M, L]: common random numbers for policy, old and reference
            masks = draw_elbo_masks(batch, length, cfg.mu * cfg.num_mc, self.generator, cfg.stratify)
            tensors["elbo_masks"] = masks.view(batch, cfg.mu, cfg.num_mc, length)
        else:  # [B, mu, P]
            tensors["prompt_masks"] = draw_prompt_masks(prompt_valid, cfg.prompt_mask_prob, self.generator, cfg.mu)
        if cfg.mu > 1:
            with ctx.timer.phase("old_logprobs"):
                tensors["old"] = self._estimate_all(policy, tensors)
        if self.declares(REFERENCE):
            with ctx.timer.phase("reference"):
                tensors["ref"] = self._estimate_all(ctx.models[REFERENCE], tensors)
        return Experience(tensors), scored.metrics

    # -- loss ------------------------------------------------------------------------------------
    def loss_options(self) -> PolicyLossOptions:
        """The one policy loss with ESPO's choices: token-mean over the sequences (sequence action) or the tokens
        (token action), k1 with ESPO's stop-gradient correction, the KL only when the reference is declared."""
        cfg = self.config
        return PolicyLossOptions(clip_low=cfg.clip_low, clip_high=cfg.clip_high, dual_clip=cfg.dual_clip,
                                 kl_coef=cfg.kl_coef if self.declares(REFERENCE) else 0.0,
                                 kl_estimator=cfg.kl_estimator, kl_clamp=cfg.kl_clamp, k1_gradient_correction=True)

    def loss(self, policy: torch.nn.Module, batch: Experience, iteration: int) -> LossOutput:
        cfg = self.config
        tensors = batch.tensors
        length = tensors["completion_mask"].shape[1]
        estimate = self._estimate(policy, tensors, iteration).float()
        old = tensors["old"][:, iteration] if "old" in tensors else estimate.detach()
        ref = tensors["ref"][:, iteration] if "ref" in tensors else None
        valid = tensors["valid"].bool()
        if cfg.action == "sequence":  # one action per sequence: rho = exp((E - E_old) / L), KL on E over L
            tokens = PolicyTokens(estimate.unsqueeze(-1), old.unsqueeze(-1), tensors["advantages"],
                                  valid.unsqueeze(-1), ref_logp=None if ref is None else ref.unsqueeze(-1),
                                  scale=float(length))
        else:
            mask = tensors["completion_mask"].bool() & valid.unsqueeze(-1)
            tokens = PolicyTokens(estimate, old, tensors["advantages"], mask, ref_logp=ref)
        result = policy_loss(tokens, self.loss_options())
        per_token = masked_mean(tokens.logp.detach() / tokens.scale, tokens.mask)
        name = "elbo_per_token" if cfg.likelihood == "elbo" and cfg.action == "sequence" else "logp_per_token"
        # ESPO logs -E/L as "entropy" (a likelihood-proxy per token, not a true entropy)
        metrics = {"iteration": float(iteration), name: float(per_token), **result.metrics,
                   "entropy": -float(per_token)}
        return LossOutput(result.loss, metrics)


@ALGORITHMS.register("token-elbo")
class TokenELBO(ESPO):
    config_class = TokenELBOConfig


@ALGORITHMS.register("diffu-grpo")
class DiffuGRPO(ESPO):
    config_class = DiffuGRPOConfig
