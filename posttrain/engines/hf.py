"""Rollouts from any Hugging Face causal LM with our own KV-cached decoding loop (CPU or GPU).

We do not call ``model.generate``: owning the loop lets us record the log-prob of every sampled token
under exactly the distribution it was drawn from, and drive all randomness from one explicit
``torch.Generator``.

Conventions (shared with ``posttrain.models.likelihood.causal_token_logprobs``, so rollout and training
log-probs agree): prompts are left-padded, positions are ``cumsum(attention_mask) - 1``.

- Processed distribution: with ``SamplingParams.json_schema``, first the tokens the row's JSON grammar
  forbids are masked to ``-inf`` (``engines/grammar.py``: xgrammar, compiled once per call, one matcher
  per row); then ``logits / T``, top-k, top-p (nucleus, the most likely token is always kept); the
  recorded log-prob is that of the sampled token under it, in float32.
- ``temperature == 0`` is greedy decoding; its recorded log-prob is that of the argmax token under the
  *unscaled* model distribution (``log_softmax(logits)``, after the grammar's mask when there is one),
  since the processed one is a point mass.
- A row stops at the tokenizer's eos or any ``SamplingParams.stop_token_ids`` (the stop token is kept in
  ``completion_ids``; finish reason ``"stop"``), otherwise after ``max_new_tokens`` (``"length"``). Under
  a JSON schema the grammar allows a stop token only after a complete document, and the row stops when its
  matcher terminates (on that stop token).
  Finished rows stay in the batch and are fed pad tokens with attention mask 0; the loop ends when all
  rows are done. Identical prompts in one batch (a group's samples) are prefilled once and share the
  prompt's cache.
- Scoring (``score``, the ``ScoringEngine`` protocol) is exact: ``posttrain.engines.hf_scoring``.
- Reproducibility: the same seed, inputs, ``max_batch_size``, model and device give identical outputs
  (on CPU; GPU kernels may add their own nondeterminism).
  Outputs *do* depend on batch composition: one generator is shared by all rows and chunks (a row's draws
  depend on which rows precede it), and the padding width can change low-order bits of the logits.
  ``seed=None`` draws a fresh non-deterministic seed; global RNG state is never read or reseeded.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import DynamicCache, PreTrainedModel, PreTrainedTokenizerBase

from posttrain.common.padding import left_pad, left_padded_positions
from posttrain.engines.base import (
    Rollouts,
    SamplingParams,
    check_score_inputs,
    start_generation,
    stop_token_ids,
)
from posttrain.engines.grammar import RowGrammars, SchemaCompiler
from posttrain.engines.hf_scoring import score_causal_lm
from posttrain.engines.scores import TokenScores
from posttrain.engines.weight_sync import WeightReceiver
from posttrain.models.loading import load_causal_lm, load_tokenizer


def process_logits(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Float32 logits of the sampling distribution: ``/T``, then top-k, then top-p; removed tokens are
    ``-inf``. Not defined for ``temperature == 0`` (greedy), which needs no processing."""
    if params.temperature == 0:
        raise ValueError("process_logits is for sampling; temperature 0 means greedy decoding")
    logits = logits.float() / params.temperature
    if 0 < params.top_k < logits.size(-1):
        kth = torch.topk(logits, params.top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        sorted_probs = sorted_logits.softmax(-1)
        mass_before = sorted_probs.cumsum(-1) - sorted_probs
        remove_sorted = mass_before >= params.top_p  # the first token has mass_before 0: always kept
        remove = remove_sorted.scatter(-1, order, remove_sorted)
        logits = logits.masked_fill(remove, float("-inf"))
    return logits


def sample_tokens(
    logits: torch.Tensor, params: SamplingParams, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Next tokens ``[B]`` and their float32 log-probs ``[B]`` from last-position logits ``[B, V]``."""
    if params.temperature == 0:
        tokens = logits.argmax(-1)
        logprobs = F.log_softmax(logits.float(), dim=-1)
    else:
        logprobs = F.log_softmax(process_logits(logits, params), dim=-1)
        tokens = inverse_cdf_sample(logprobs.exp(), generator)
    return tokens, logprobs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def inverse_cdf_sample(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One token per row of ``probs`` ``[B, V]`` (non-negative, any positive row sum), drawn exactly from the
    row's categorical distribution with one uniform number per row.

    Why not ``torch.multinomial``: it draws an exponential variate for every vocabulary entry (``B x V`` of
    them), which on a 49k-token vocabulary took a fifth of SmolLM2's CPU decode time; the inverse CDF needs
    ``B`` uniforms and a cumulative sum. The sum is taken in float64 so that the picked interval is the
    token's own up to 2^-53; ``right=True`` never lands on a zero-width (zero-probability) entry, and a draw
    that rounds onto the total is clamped to the last token with positive probability.
    """
    cdf = probs.double().cumsum(-1)
    total = cdf[:, -1:]
    u = torch.rand(probs.size(0), 1, generator=generator, dtype=torch.float64, device=probs.device)
    picked = torch.searchsorted(cdf, u * total, right=True)
    last_positive = (cdf < total).sum(-1, keepdim=True)
    return torch.minimum(picked, last_positive).squeeze(-1)


@dataclass
class _Completion:
    ids: list[int]
    logprobs: list[float]
    finish_reason: str


class HFRolloutEngine:
    """A ``RolloutEngine`` and ``ScoringEngine`` over a Hugging Face causal LM.

    ``model`` must be the engine's own module, separate from the one being trained (it may have another
    dtype, e.g. bf16 rollouts from an fp32 trainer); the engine puts it in eval mode on ``device`` and
    changes its weights only through ``update_weights``. ``max_batch_size`` bounds the rows of one
    generation or scoring forward, ``max_batch_tokens`` the padded tokens of one scoring forward.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        max_batch_size: int = 64,
        device: str | torch.device = "cpu",
        max_batch_tokens: int = 16384,
    ) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        if max_batch_tokens < 1:
            raise ValueError(f"max_batch_tokens must be >= 1, got {max_batch_tokens}")
        self.device = torch.device(device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.max_batch_tokens = max_batch_tokens
        # Any id works as padding (it is masked out); prefer the tokenizer's own pad, then eos.
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.pad_token_id: int = 0 if pad is None else int(pad)
        self._weights = WeightReceiver(self.model)
        forward_params = inspect.signature(model.forward).parameters
        self._logits_to_keep = "logits_to_keep" in forward_params
        # transformers >= 5.2x renamed ``past_key_values`` to ``cache`` (the old name warns, then goes).
        self._cache_kwarg = "cache" if "cache" in forward_params else "past_key_values"
        self._schema_compiler: SchemaCompiler | None = None  # built at the first JSON-schema call

    @classmethod
    def from_pretrained(
        cls,
        path: str,
        tokenizer: PreTrainedTokenizerBase | None = None,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
        trust_remote_code: bool = False,
        **kwargs: object,
    ) -> HFRolloutEngine:
        """The engine over the checkpoint at ``path`` (a folder or hub id; resolve aliases such as
        ``smollm2-135m`` first with ``posttrain.models.pretrained.resolve_model_name``), with its tokenizer
        from ``models.loading.load_tokenizer`` unless one is given; ``kwargs`` go to the constructor."""
        if tokenizer is None:
            tokenizer = load_tokenizer(path, trust_remote_code=trust_remote_code)
        model = load_causal_lm(path, dtype=dtype, trust_remote_code=trust_remote_code)
        return cls(model, tokenizer, device=device, **kwargs)  # type: ignore[arg-type]

    @torch.inference_mode()
    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts:
        """One completion per prompt, in input order, generated ``max_batch_size`` prompts at a time."""
        self._weights.check_complete()
        generator = start_generation(prompt_ids, params, self.device)
        grammar = None
        if params.json_schema is not None:
            if self._schema_compiler is None:
                self._schema_compiler = SchemaCompiler(self.tokenizer, int(self.model.config.vocab_size))
            grammar = self._schema_compiler.compile(params.json_schema, type(self).__name__)
        completions: list[_Completion] = []
        for start in range(0, len(prompt_ids), self.max_batch_size):
            chunk = prompt_ids[start : start + self.max_batch_size]
            rows = None if grammar is None else grammar.rows(len(chunk), self._stop_ids(params).tolist())
            completions.extend(self._generate_batch(chunk, params, generator, rows))
        return Rollouts(
            prompt_ids=[list(p) for p in prompt_ids],
            completion_ids=[c.ids for c in completions],
            texts=self.tokenizer.batch_decode([c.ids for c in completions], skip_special_tokens=True),
            logprobs=[c.logprobs for c in completions],
            finish_reasons=[c.finish_reason for c in completions],
            weight_version=self.weight_version,
        )

    def _stop_ids(self, params: SamplingParams) -> torch.Tensor:
        ids = stop_token_ids(params, self.tokenizer.eos_token_id)
        return torch.tensor(ids, dtype=torch.long, device=self.device)

    def _generate_batch(
        self, prompts: list[list[int]], params: SamplingParams, generator: torch.Generator,
        grammars: RowGrammars | None = None,
    ) -> list[_Completion]:
        batch = len(prompts)
        # A group's G samples share one prompt: prefill each distinct prompt once, then give every row its
        # prompt's cache and last logits (GRPO's step prefills prompts/G rows instead of prompts).
        distinct: dict[tuple[int, ...], int] = {}
        source_row = [distinct.setdefault(tuple(p), len(distinct)) for p in prompts]
        input_ids, mask = left_pad([list(p) for p in distinct], self.pad_token_id)
        input_ids, mask = input_ids.to(self.device), mask.to(self.device)
        stop_ids = self._stop_ids(params)

        cache = DynamicCache(config=self.model.config)  # grows in place on every forward
        extra = {"logits_to_keep": 1} if self._logits_to_keep else {}
        logits = self.model(
            input_ids=input_ids,
            attention_mask=mask,
            position_ids=left_padded_positions(mask),
            use_cache=True,
            **{self._cache_kwarg: cache},
            **extra,
        ).logits[:, -1]
        if len(distinct) < batch:
            rows = torch.tensor(source_row, dtype=torch.long, device=self.device)
            cache.batch_select_indices(rows)
            logits, mask = logits[rows], mask[rows]
        next_position = mask.sum(-1)
        done = torch.zeros(batch, dtype=torch.bool, device=self.device)
        lengths = torch.full((batch,), params.max_new_tokens, dtype=torch.long, device=self.device)
        steps_tokens: list[torch.Tensor] = []
        steps_logprobs: list[torch.Tensor] = []
        for step in range(params.max_new_tokens):
            if grammars is not None:
                unfinished = (~done).tolist()
                logits = grammars.mask_(logits, unfinished)
            tokens, logprobs = sample_tokens(logits, params, generator)
            tokens = tokens.masked_fill(done, self.pad_token_id)
            steps_tokens.append(tokens)
            steps_logprobs.append(logprobs)
            stopped = ~done & torch.isin(tokens, stop_ids)
            if grammars is not None:
                grammars.accept(tokens.tolist(), unfinished)
                stopped = stopped | (~done & torch.tensor(grammars.terminated(), device=self.device))
            lengths = torch.where(stopped, step + 1, lengths)
            done = done | stopped
            if step + 1 == params.max_new_tokens or bool(done.all()):
                break
            live = (~done).long()
            mask = torch.cat([mask, live.unsqueeze(-1)], dim=-1)
            logits = self.model(
                input_ids=tokens.unsqueeze(-1),
                attention_mask=mask,
                position_ids=next_position.unsqueeze(-1),
                use_cache=True,
                **{self._cache_kwarg: cache},
            ).logits[:, -1]
            next_position = next_position + live

        all_tokens = torch.stack(steps_tokens, dim=1).tolist()
        all_logprobs = torch.stack(steps_logprobs, dim=1).tolist()
        stopped_rows = done.tolist()
        return [
            _Completion(
                ids=all_tokens[row][:n],
                logprobs=all_logprobs[row][:n],
                finish_reason="stop" if stopped_rows[row] else "length",
            )
            for row, n in enumerate(lengths.tolist())
        ]

    def score(self, sequences: list[list[int]], *, entropy: bool = True, mass_above: bool = False,
              full: bool = False) -> list[TokenScores]:
        """Exact scores of positions 1..T-1 of every sequence (``hf_scoring.score_causal_lm``)."""
        self._weights.check_complete()
        return score_causal_lm(self.model, check_score_inputs(sequences), self.pad_token_id, device=self.device,
                               max_batch_size=self.max_batch_size, max_batch_tokens=self.max_batch_tokens,
                               entropy=entropy, mass_above=mass_above, full=full)

    @property
    def weight_version(self) -> int:
        """Number of successful ``update_weights`` calls."""
        return self._weights.version

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Copy new policy weights into the engine's model in place (see ``weights.WeightReceiver``).

        Names go through ``weights.canonical_name`` (DeepSpeed / DDP ``module.`` and PEFT prefixes
        stripped); LoRA adapter tensors are skipped, so PEFT callers merge their adapters first
        (``merge_adapter()``) and send the merged base weights. A failed update raises naming the
        parameter, and if it had already copied part of the state ``generate`` refuses to run until an
        update succeeds.
        """
        self._weights.update(named_tensors)
