"""Rollouts from vLLM (``--rollout vllm``), colocated: the engine lives in each trainer rank's process.

The same ``RolloutEngine`` contract as ``HFRolloutEngine``, so algorithms cannot tell them apart:

- Token-id prompts in (``TokensPrompt``; vLLM never tokenises them, nor detokenises its outputs: it loads
  the checkpoint's tokenizer only for the grammars of structured outputs); out: token ids
  (the stop token kept, finish reason ``"stop"``; ``"length"`` at ``max_new_tokens``; any other reason vLLM
  gives, such as ``"abort"``, raises: ``rollout_finish_reason``), texts decoded by *our* tokenizer
  (``models.loading.load_tokenizer``, which keeps the tiny char tokenizers' whitespace), and the
  log-prob of each sampled token under the distribution it was drawn from: vLLM's
  ``logprobs_mode="processed_logprobs"`` (after temperature, top-k, top-p), like the HF engine records.
  Greedy (``temperature == 0``) records the unscaled model log-prob, as the HF engine does.
- Seeds: sample ``i`` of a call gets its own vLLM seed ``base.sample_seeds(params.seed, prompts)[i]`` (the
  seed the remote workers give it too, where a group of copies is one request), so G copies of one prompt
  differ and the same seed repeats; ``seed=None`` leaves vLLM's sampling unseeded. vLLM's
  random streams are not ours, so a vLLM sample never equals an HF sample with the same seed.
- Stops: the tokenizer's eos and ``SamplingParams.stop_token_ids``; ``max_new_tokens``.
- ``SamplingParams.json_schema``: vLLM's structured outputs (``StructuredOutputsParams(json=...)``),
  which mask the logits before the sampler, so the recorded log-probs are those of the masked
  distribution, as in the HF engine. The engine starts with the grammar the HF engine compiles
  (``engines/grammar.py``): the xgrammar backend with ``disable_any_whitespace`` (compact JSON). A schema
  xgrammar cannot compile raises ``SamplingParamsError``.
- Scoring (``score``, the ``ScoringEngine`` protocol): vLLM's ``prompt_logprobs`` give the top
  ``score_top_k`` log-probs of each position (at most the engine's ``max_logprobs``, 20 by default), so
  entropies and mass-above are the top-k approximations of ``engines.topk`` (``TokenScores.exact`` False).
- Weights (``update_weights`` / ``sync_from``), by ``colocated_weight_path``: on CUDA the engine runs under
  vLLM's ``external_launcher`` executor in the trainer rank's process and each gathered bucket goes straight
  into the model's ``load_weights`` (TRL's colocate mode; no NCCL, no copy through the CPU); on CPU through
  vLLM's weight-transfer protocol over our gloo transport (``engines/weight_sync/weight_transfer.py``).
  ``weight_version`` is the trainer step the engine holds. The CUDA path has not run on this machine (no
  GPU); ``scripts/gpu_checks.sh`` runs it.
- Sleep: ``sleep()`` / ``wake_up()`` free the engine's accelerator memory while the trainer trains
  (vLLM's sleep mode, as TRL's colocate mode uses it: level 2, the weights discarded, when a sync replaces them
  before the next generation, else level 1; before a sync only the weights wake, ``wake_weights``, so the KV
  cache is not allocated during the push). vLLM supports it on CUDA only; on CPU both are no-ops, since the weights
  and KV cache already live in host RAM, which sleep mode would only copy around.

What is decided before the engine starts (vLLM installed, the model servable, the CPU defaults: in-process
engine, 1 GiB of KV cache, chunked prefill off; the ``vllm.LLM`` arguments of each weight path) is in
``engines/vllm_setup.py``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from posttrain.engines.base import (
    Rollouts,
    SamplingParams,
    SamplingParamsError,
    Sleeps,
    SyncsWeights,
    check_prompts,
    check_score_inputs,
    sample_seeds,
    stop_token_ids,
)
from posttrain.engines.scores import TokenScores
from posttrain.engines.topk import scores_from_topk
from posttrain.engines.vllm_setup import (
    DIRECT_LOAD,
    colocated_llm_options,
    colocated_weight_path,
    import_vllm,
    on_cuda,
    vllm_servable_problem,
)
from posttrain.engines.weight_sync import TrainerWeights
from posttrain.models.loading import load_tokenizer
from posttrain.models.pretrained import resolve_model_name

DEFAULT_SCORE_TOP_K = 20
"""Log-probs per position ``score`` asks for unless told (vLLM's default ``max_logprobs``)."""


class VLLMRolloutEngine(SyncsWeights, Sleeps):
    """A ``RolloutEngine`` and ``ScoringEngine`` over an in-process ``vllm.LLM`` that syncs the trainer's weights
    whole and sleeps; build it with ``from_pretrained``. ``score_top_k``: the log-probs per position that
    ``score`` asks for (the engine's ``max_logprobs`` bounds it)."""

    def __init__(self, llm: Any, tokenizer: PreTrainedTokenizerBase, dtype: torch.dtype, sleep_mode: bool,
                 sync_timeout_s: float, score_top_k: int = DEFAULT_SCORE_TOP_K) -> None:
        self.llm = llm
        self.tokenizer = tokenizer
        self.dtype = dtype
        self.sleep_mode = sleep_mode
        self.sync_timeout_s = sync_timeout_s
        self.score_top_k = score_top_k
        self._version = 0
        self._sender: Any = None
        self._asleep = False
        self._kv_cache_asleep = False  # the weights woke for a sync (``wake_weights``), the KV cache not yet
        self._weights_discarded = False  # asleep at level 2: the weights are gone until the next sync loads them

    @classmethod
    def from_pretrained(cls, path: str, tokenizer: PreTrainedTokenizerBase | None = None, dtype: str = "float32",
                        max_model_len: int | None = None, seed: int = 0, *, max_num_seqs: int = 256,
                        gpu_memory_utilization: float = 0.3, sleep_mode: bool = False,
                        trust_remote_code: bool = False, sync_timeout_s: float = 300.0,
                        score_top_k: int = DEFAULT_SCORE_TOP_K, **llm_kwargs: Any) -> VLLMRolloutEngine:
        """Start vLLM on the Hugging Face checkpoint folder ``path``.

        Args:
            path: a local checkpoint folder (aliases such as ``smollm2-135m`` are resolved here).
            tokenizer: decodes completions and names the eos; default ``load_tokenizer(path)``.
            dtype: the engine's weights, ``"float32"``, ``"bfloat16"`` or ``"float16"``.
            max_model_len: prompt + completion tokens per sequence; default the model's own limit.
            seed: the engine's base seed (each call's ``SamplingParams.seed`` decides its samples).
            max_num_seqs: most sequences vLLM schedules at once.
            gpu_memory_utilization: the share of GPU memory vLLM may take (CUDA; colocated with a trainer,
                keep it small). On CPU the KV cache size is ``VLLM_CPU_KVCACHE_SPACE`` instead.
            sleep_mode: allow ``sleep()`` to free the engine's GPU memory (CUDA only; ignored on CPU).
            trust_remote_code: run the checkpoint's own code (vLLM still needs an architecture it knows).
            sync_timeout_s: bound on every weight-sync collective and call.
            score_top_k: log-probs per position that ``score`` asks for; vLLM refuses more than its
                ``max_logprobs`` (20 unless raised through ``llm_kwargs``).
            llm_kwargs: passed to ``vllm.LLM`` unchanged.
        """
        path = resolve_model_name(path)
        problem = vllm_servable_problem(path)
        if problem:
            raise ValueError(problem)
        vllm = import_vllm()
        cuda = on_cuda()
        options = colocated_llm_options(colocated_weight_path(cuda), path, dtype=dtype, seed=seed,
                                        max_model_len=max_model_len, max_num_seqs=max_num_seqs,
                                        trust_remote_code=trust_remote_code,
                                        gpu_memory_utilization=gpu_memory_utilization, sleep_mode=sleep_mode)
        options.update(llm_kwargs)
        llm = vllm.LLM(**options)
        tokenizer = tokenizer if tokenizer is not None else load_tokenizer(path, trust_remote_code=trust_remote_code)
        # the dtype the engine holds its weights in (what weight syncs send), asked of the engine itself
        served = llm.model_config.dtype
        return cls(llm, tokenizer, served, sleep_mode=sleep_mode and cuda, sync_timeout_s=sync_timeout_s,
                   score_top_k=score_top_k)

    # ------------------------------------------------------------------------------------------
    def _vllm_params(self, params: SamplingParams, prompt_ids: list[list[int]]) -> list[Any]:
        from vllm import SamplingParams as VLLMSamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        stop_ids = list(stop_token_ids(params, self.tokenizer.eos_token_id))
        greedy = params.temperature == 0
        common = {"max_tokens": params.max_new_tokens, "temperature": params.temperature,
                  "top_p": 1.0 if greedy else params.top_p, "top_k": 0 if greedy else params.top_k,
                  "stop_token_ids": stop_ids, "logprobs": 0, "detokenize": False}
        if params.json_schema is not None:
            common["structured_outputs"] = StructuredOutputsParams(json=params.json_schema)
        if params.seed is None or greedy:
            return [VLLMSamplingParams(**common)] * len(prompt_ids)
        return [VLLMSamplingParams(**common, seed=seed) for seed in sample_seeds(params.seed, prompt_ids)]

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts:
        """One completion per prompt, in input order (vLLM batches them as it sees fit)."""
        from vllm.inputs import TokensPrompt

        check_prompts(prompt_ids)
        if self._asleep or self._kv_cache_asleep:
            raise RuntimeError("the vLLM engine is asleep; call wake_up() before generate()")
        from vllm.exceptions import VLLMValidationError

        prompts = [TokensPrompt(prompt_token_ids=list(p)) for p in prompt_ids]
        try:
            outputs = self.llm.generate(prompts, self._vllm_params(params, prompt_ids), use_tqdm=False)
        except VLLMValidationError as err:
            if params.json_schema is None:
                raise
            raise SamplingParamsError(f"{type(self).__name__}: vLLM rejects json_schema ({err})") from None
        completions = [out.outputs[0] for out in outputs]
        ids = [list(c.token_ids) for c in completions]
        logprobs = [[float(step[token].logprob) for step, token in zip(c.logprobs, c.token_ids)] for c in completions]
        return Rollouts(
            prompt_ids=[list(p) for p in prompt_ids],
            completion_ids=ids,
            texts=self.tokenizer.batch_decode(ids, skip_special_tokens=True),
            logprobs=logprobs,
            finish_reasons=[rollout_finish_reason(c.finish_reason, i) for i, c in enumerate(completions)],
            weight_version=self._version,
        )

    def score(self, sequences: list[list[int]], *, entropy: bool = True, mass_above: bool = False,
              full: bool = False) -> list[TokenScores]:
        """Top-k scores of positions 1..T-1 of every sequence from vLLM's ``prompt_logprobs``."""
        from vllm import SamplingParams as VLLMSamplingParams
        from vllm.inputs import TokensPrompt

        if full:
            raise ValueError("vLLM returns top-k prompt log-probs only; full distributions need the HF engine")
        if self._asleep:
            raise RuntimeError("the vLLM engine is asleep; call wake_up() before score()")
        seqs = check_score_inputs(sequences)
        params = VLLMSamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=self.score_top_k, detokenize=False)
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=s) for s in seqs], params, use_tqdm=False)
        results = []
        for ids, out in zip(seqs, outputs):
            observed, tops = [], []
            for token, step in zip(ids[1:], (out.prompt_logprobs or [])[1:]):  # position 0 has no prediction
                step = step or {}
                observed.append(float(step[token].logprob) if token in step else None)
                # vLLM adds the observed token to the top-k when it ranks lower: keep only the top-k
                top = [float(lp.logprob) for t, lp in step.items() if t != token or lp.rank <= self.score_top_k]
                tops.append(sorted(top, reverse=True)[: self.score_top_k])
            results.append(scores_from_topk(ids[1:], observed, tops, entropy=entropy, mass_above=mass_above))
        return results

    # ------------------------------------------------------------------------------------------
    @property
    def weight_version(self) -> int:
        """The trainer step whose weights the engine holds (0 = the checkpoint it was started from)."""
        return self._version

    def _send(self, source: Any, version: int) -> None:
        if colocated_weight_path(on_cuda()) == DIRECT_LOAD:
            self._load_directly(source)
        else:
            self._send_over_gloo(source, version)
        # Cached prefix blocks hold keys and values computed by the old weights (TRL resets them too).
        self.llm.reset_prefix_cache()
        self._version = version
        self._weights_discarded = False

    def _load_directly(self, source: Any) -> None:
        """``DIRECT_LOAD``: each gathered bucket (a decoder layer) into the in-process model's ``load_weights``;
        every rank loads its own engine (under ZeRO-3 all ranks iterate the gathers together)."""
        model = self.llm.llm_engine.model_executor.driver_worker.model_runner.model
        for names, tensors in source.iter_groups():
            model.load_weights(list(zip(names, tensors)))

    def _send_over_gloo(self, source: Any, version: int) -> None:
        from posttrain.engines.weight_sync import open_colocated_sender

        if self._sender is None:
            self._sender = open_colocated_sender(self.llm, self.sync_timeout_s)
        self._sender.send_weights(source, weight_version=version)

    def sync_from(self, weights: TrainerWeights, version: int) -> None:
        """Load the trainer's weights (``weights.gather``: ZeRO-3 gathered a layer at a time on every rank
        together; PEFT adapters already merged) and record ``version``, the trainer step they belong to."""
        from posttrain.engines.weight_sync import TrainerWeightSource

        self._send(TrainerWeightSource(weights, self.dtype), version)

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int | None = None) -> None:
        """Load named full tensors (names as ``weights.canonical_name`` maps them; adapter tensors skipped);
        ``version`` defaults to the current one plus 1."""
        from posttrain.engines.weight_sync import NamedTensorSource

        self._send(NamedTensorSource(named_tensors, self.dtype), self._version + 1 if version is None else version)

    def sleep(self, discard_weights: bool = False) -> None:
        """Free the engine's GPU memory until ``wake_up``: vLLM sleep level 2 (weights and KV cache discarded, TRL's
        choice) when ``discard_weights`` (a sync replaces the weights before the next generation), else level 1
        (the weights offloaded to CPU memory); a no-op on CPU or when asleep."""
        if self.sleep_mode and not self._asleep and not self._kv_cache_asleep:
            self.llm.sleep(level=2 if discard_weights else 1)
            self._asleep, self._weights_discarded = True, discard_weights

    def wake_weights(self) -> None:
        """Before a sync: wake the weights only, so the push's memory peak holds no KV cache (TRL:
        ``wake_up(tags=["weights"])``); ``wake_up`` wakes the KV cache after it. A no-op when awake."""
        if self._asleep:
            self.llm.wake_up(tags=["weights"])
            self._asleep, self._kv_cache_asleep = False, True

    def wake_up(self) -> None:
        """Restore what ``sleep`` freed (the KV cache alone after ``wake_weights``); a no-op when awake or on CPU.
        Refuses while the weights are discarded (level 2) and no sync has loaded new ones."""
        if self._weights_discarded:
            raise RuntimeError("the vLLM engine slept at level 2 (its weights were discarded) and no sync has "
                               "loaded weights since: call wake_weights() and sync before wake_up()")
        if self._asleep:
            self.llm.wake_up()
        elif self._kv_cache_asleep:
            self.llm.wake_up(tags=["kv_cache"])
        self._asleep = self._kv_cache_asleep = False



def rollout_finish_reason(reason: str | None, index: int) -> str:
    """The finish reason of prompt ``index``'s completion, as vLLM gave it, if a rollout may have it
    (``Rollouts.FINISH_REASONS``); any other (``"abort"``, ``"error"``, ...: a partial output) raises
    ``RuntimeError`` naming the prompt and the reason."""
    if reason in Rollouts.FINISH_REASONS:
        return reason
    raise RuntimeError(f"VLLMRolloutEngine: prompt {index}: vLLM ended its completion with finish_reason {reason!r}, "
                       f"not one of {', '.join(Rollouts.FINISH_REASONS)}: a partial output, not a rollout")
