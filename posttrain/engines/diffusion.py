"""Rollouts from a masked-diffusion LM: LLaDA's semi-autoregressive low-confidence remasking sampler.

Procedure (LLaDA's ``generate``, Nie et al. 2025, arXiv 2502.09992, as used by ESPO and d1):

1. The canvas is ``[prompt, <mask> x L]`` with L = ``SamplingParams.max_new_tokens``, split into
   blocks of ``block_length`` filled left to right; each block gets ``steps // num_blocks`` steps
   (at least 1), and a step commits ``n // s`` of the block's n masked tokens, plus one on the first
   ``n % s`` steps.
2. Each step runs one forward on the whole canvas. Candidates are drawn by Gumbel-max at temperature T
   in float64: ``argmax(logits + T * Gumbel)`` (the papers write ``exp(logits) / (-log u)^T``; same
   argmax, without overflowing ``exp``). T = 0 is plain argmax. The mask token's own logit is set to
   -inf first (the papers rely on a trained model never predicting it; an untrained one does).
   ``top_k`` / ``top_p`` of ``SamplingParams`` filter the tempered distribution first (the papers use
   neither).
3. Confidence is the untempered ``softmax(logits)[candidate]`` (``remasking="low_confidence"``) or
   uniform noise (``"random"``); positions outside the current block or already committed get -inf, and
   the top-n are committed.

Stopping after EOS. Once every block up to and including the one holding a row's first EOS (or any
``stop_token_ids``) is committed, nothing after that EOS can change the returned completion, so the
row stops taking forwards and its tail is filled with EOS -- the canvas the model was trained to write
(LLaDA SFT pads responses with EOS). The distribution of the returned completion is unchanged.

What is returned (``Rollouts``): ``completion_ids`` up to and including the first EOS (finish reason
"stop"), or all L tokens ("length"). ``logprobs`` are **not** sampling log-probs (a diffusion sampler
has none that is exact): entry k is ``log softmax(logits)[token]`` of the untempered model at the step
token k was committed -- its commit-time confidence. The trainer must score completions with the ELBO
or mean-field estimators (``posttrain.algos.elbo``) on ``fixed_length_completions(...)``.

Randomness comes only from a local ``torch.Generator`` seeded by ``SamplingParams.seed``; rows are
processed ``max_batch_size`` at a time; outputs depend on batch composition (the generator is shared).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

from posttrain.common.padding import left_pad
from posttrain.engines.base import Rollouts, SamplingParams, refuse_json_schema, start_generation
from posttrain.engines.weight_sync import WeightReceiver
from posttrain.models.diffusion import diffusion_logits, diffusion_mask_token_id, resolve_mask_token_id


@dataclass(frozen=True)
class DiffusionSampling:
    """Diffusion-specific sampler settings (the rest comes from ``SamplingParams``)."""

    block_length: int = 32
    """Semi-autoregressive block size (ESPO/d1: 32); values >= L mean one block."""
    steps: int | None = None
    """Total denoising steps over all blocks; None = L (one token per step). ESPO/d1 training: L/2."""
    remasking: Literal["low_confidence", "random"] = "low_confidence"
    """Which masked positions to commit each step."""
    stop_after_eos: bool = True
    """Stop forwarding a row once its first EOS is in a finished block (see module docstring)."""

    def __post_init__(self) -> None:
        if self.block_length < 1:
            raise ValueError(f"block_length must be >= 1, got {self.block_length}")
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"steps must be >= 1 or None, got {self.steps}")
        if self.remasking not in ("low_confidence", "random"):
            raise ValueError(f"remasking must be 'low_confidence' or 'random', got {self.remasking!r}")


def transfer_schedule(masked: torch.Tensor, steps: int) -> torch.Tensor:
    """Tokens to commit per step, LongTensor [B, steps]: ``n // steps`` each, +1 on the first ``n % steps``
    steps (LLaDA ``get_num_transfer_tokens``). ``masked`` is the [B] count of masked positions."""
    base = masked.unsqueeze(1) // steps
    rem = masked.unsqueeze(1) % steps
    return base + (torch.arange(steps, device=masked.device).unsqueeze(0) < rem).long()


def gumbel_candidates(
    logits: torch.Tensor, temperature: float, generator: torch.Generator | None, top_k: int = 0, top_p: float = 1.0
) -> torch.Tensor:
    """Gumbel-max samples from softmax(logits / T) in float64 (argmax at T = 0): LongTensor [..., ]."""
    if temperature == 0:
        return logits.argmax(-1)
    x = logits.double()
    if 0 < top_k < x.shape[-1]:
        kth = torch.topk(x, top_k, dim=-1).values[..., -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    if top_p < 1.0:
        sorted_x, order = torch.sort(x / temperature, dim=-1, descending=True)
        probs = sorted_x.softmax(-1)
        remove_sorted = (probs.cumsum(-1) - probs) >= top_p
        x = x.masked_fill(remove_sorted.scatter(-1, order, remove_sorted), float("-inf"))
    u = torch.rand(x.shape, generator=generator, dtype=torch.float64, device=generator.device if generator else x.device)
    u = u.to(x.device).clamp(min=torch.finfo(torch.float64).tiny)
    gumbel = -torch.log(-torch.log(u))
    return (x + temperature * gumbel).argmax(-1)


def fixed_length_completions(completions: list[list[int]], length: int, eos_id: int) -> torch.Tensor:
    """Completions EOS-padded to the fixed generation length L: LongTensor [B, L] (the canvas the
    ELBO scores). A completion longer than L raises."""
    out = torch.full((len(completions), length), eos_id, dtype=torch.long)
    for row, ids in enumerate(completions):
        if len(ids) > length:
            raise ValueError(f"completion {row} has {len(ids)} tokens, over the generation length {length}")
        out[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return out


class DiffusionRolloutEngine:
    """A ``RolloutEngine`` over a masked-diffusion LM (see the module docstring for the procedure).

    ``model`` is the engine's own module (not the one being trained); it is put in eval mode on
    ``device`` and changed only through ``update_weights``. ``mask_token_id`` defaults to the id the
    model was marked with (``load_diffusion_lm`` / ``make_bidirectional``), else the tokenizer's.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer,
        sampling: DiffusionSampling | None = None,
        max_batch_size: int = 64,
        device: str | torch.device = "cpu",
        mask_token_id: int | None = None,
    ) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self.device = torch.device(device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.sampling = sampling or DiffusionSampling()
        self.max_batch_size = max_batch_size
        if mask_token_id is None:
            try:
                mask_token_id = diffusion_mask_token_id(model)
            except ValueError:
                mask_token_id = resolve_mask_token_id(tokenizer, getattr(model, "config", None))
        self.mask_token_id = int(mask_token_id)
        if tokenizer.eos_token_id is None:
            raise ValueError("the diffusion sampler needs a tokenizer with an eos token (it fills the tail)")
        self.eos_token_id = int(tokenizer.eos_token_id)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.pad_token_id = int(pad)
        self._weights = WeightReceiver(self.model)
        self.forward_calls = 0  # number of model forwards (for benchmarks)

    @torch.inference_mode()
    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts:
        """One completion per prompt, in input order. A JSON schema is refused: the sampler unmasks tokens
        in any order, which no left-to-right grammar can constrain."""
        refuse_json_schema(params, "the diffusion sampler (DiffusionRolloutEngine)")
        self._weights.check_complete()
        generator = start_generation(prompt_ids, params, self.device)
        stop = sorted({self.eos_token_id, *map(int, params.stop_token_ids)})
        ids_out: list[list[int]] = []
        logps_out: list[list[float]] = []
        reasons: list[str] = []
        for start in range(0, len(prompt_ids), self.max_batch_size):
            chunk = prompt_ids[start : start + self.max_batch_size]
            tokens, confidences = self._sample(chunk, params, generator, stop)
            for row in range(len(chunk)):
                toks = tokens[row].tolist()
                cut = next((k for k, t in enumerate(toks) if t in stop), None)
                n = len(toks) if cut is None else cut + 1
                ids_out.append(toks[:n])
                logps_out.append(confidences[row, :n].tolist())
                reasons.append("length" if cut is None else "stop")
        return Rollouts(
            prompt_ids=[list(p) for p in prompt_ids],
            completion_ids=ids_out,
            texts=self.tokenizer.batch_decode(ids_out, skip_special_tokens=True),
            logprobs=logps_out,
            finish_reasons=reasons,
            weight_version=self.weight_version,
        )

    def _sample(
        self, prompts: list[list[int]], params: SamplingParams, generator: torch.Generator, stop: list[int]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample one batch: completion tokens [B, L] and commit-time log-confidences [B, L] (float32)."""
        cfg = self.sampling
        batch, length = len(prompts), params.max_new_tokens
        prompt_ids, prompt_mask = left_pad(prompts, self.pad_token_id)
        width = prompt_ids.shape[1]
        canvas = torch.cat([prompt_ids, torch.full((batch, length), self.mask_token_id, dtype=torch.long)], dim=1)
        attention = torch.cat([prompt_mask, torch.ones((batch, length), dtype=torch.long)], dim=1)
        canvas, attention = canvas.to(self.device), attention.to(self.device)
        confidence_out = torch.zeros((batch, length), dtype=torch.float32, device=self.device)
        block = min(cfg.block_length, length)
        num_blocks = -(-length // block)
        steps_per_block = max(1, (cfg.steps if cfg.steps is not None else length) // num_blocks)
        stop_ids = torch.tensor(stop, dtype=torch.long, device=self.device)
        active = torch.ones(batch, dtype=torch.bool, device=self.device)
        any_padding = bool((attention == 0).any())

        for b in range(num_blocks):
            lo, hi = width + b * block, min(width + (b + 1) * block, width + length)
            rows = active.nonzero(as_tuple=True)[0]
            if rows.numel() == 0:
                break
            schedule = transfer_schedule((canvas[rows, lo:hi] == self.mask_token_id).sum(-1), steps_per_block)
            keep = torch.arange(lo, hi, device=self.device)
            for step in range(steps_per_block):
                counts = schedule[:, step]
                if int(counts.max()) == 0:
                    continue
                x = canvas[rows]
                logits = diffusion_logits(self.model, x, attention[rows] if any_padding else None, keep=keep)
                self.forward_calls += 1
                logits[..., self.mask_token_id] = float("-inf")  # never "commit" the mask token itself
                cand = gumbel_candidates(logits, params.temperature, generator, params.top_k, params.top_p)
                logp = F.log_softmax(logits.float(), dim=-1).gather(-1, cand.unsqueeze(-1)).squeeze(-1)
                masked = x[:, lo:hi] == self.mask_token_id
                if cfg.remasking == "low_confidence":
                    score = logp.double()  # ranks as softmax(logits)[cand]
                else:
                    score = torch.rand(masked.shape, generator=generator, dtype=torch.float64,
                                       device=generator.device).to(self.device)
                score = score.masked_fill(~masked, float("-inf"))
                order = score.argsort(dim=-1, descending=True, stable=True)
                rank = order.argsort(dim=-1)
                commit = (rank < counts.unsqueeze(-1)) & masked
                block_view = x[:, lo:hi]
                x[:, lo:hi] = torch.where(commit, cand, block_view)
                canvas[rows] = x
                conf_rows = confidence_out[rows]
                conf_rows[:, lo - width : hi - width] = torch.where(
                    commit, logp, conf_rows[:, lo - width : hi - width])
                confidence_out[rows] = conf_rows
            if cfg.stop_after_eos and b + 1 < num_blocks:
                done = torch.isin(canvas[:, width:hi], stop_ids).any(-1) & active
                if bool(done.any()):
                    fill = canvas[done, hi:]
                    canvas[done, hi:] = torch.where(fill == self.mask_token_id, self.eos_token_id, fill)
                    active = active & ~done
        return canvas[:, width:].cpu(), confidence_out.cpu()

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Copy new policy weights in place (the shared ``WeightReceiver``: canonical names, tied
        parameters, errors naming the parameter; after a partial copy ``generate`` refuses to run)."""
        self._weights.update(named_tensors)

    @property
    def weight_version(self) -> int:
        return self._weights.version
