"""Rollouts from vLLM (``--rollout vllm``), colocated: the engine lives in each trainer rank's process.

The same ``RolloutEngine`` contract as ``HFRolloutEngine``, so algorithms cannot tell them apart:

- Token-id prompts in (``TokensPrompt``; vLLM never tokenises them, nor detokenises its outputs: it loads
  the checkpoint's tokenizer only for the grammars of structured outputs); out: token ids
  (the stop token kept, finish reason ``"stop"``; else ``"length"``), texts decoded by *our* tokenizer
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
  vLLM's weight-transfer protocol over our gloo transport (``engines/weight_transfer.py``).
  ``weight_version`` is the trainer step the engine holds. The CUDA path has not run on this machine (no
  GPU); ``scripts/gpu_checks.sh`` runs it.
- Sleep: ``sleep()`` / ``wake_up()`` free the engine's accelerator memory while the trainer trains
  (vLLM's sleep mode, level 1). vLLM supports it on CUDA only; on CPU both are no-ops, since the weights
  and KV cache already live in host RAM, which sleep mode would only copy around.

CPU defaults (set before vLLM is imported, only where the user has not set them): the engine runs
in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) so it shares the trainer rank's process and our
weight transport; its KV cache takes ``VLLM_CPU_KVCACHE_SPACE=1`` GiB of RAM instead of vLLM's default
share of the machine. Chunked prefill is off on CPU (``cpu_scheduler_options``: a split seeded request
crashes vLLM's CPU sampler). vLLM's CPU attention serves head sizes 32, 64, 80, 96, 112, 128, ... only, which
``vllm_servable_problem`` checks before an engine is started.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from posttrain.engines.base import (
    Rollouts,
    SamplingParams,
    SamplingParamsError,
    check_prompts,
    check_score_inputs,
    sample_seeds,
    stop_token_ids,
)
from posttrain.engines.scores import TokenScores
from posttrain.engines.topk import scores_from_topk
from posttrain.engines.weights import TrainerWeights
from posttrain.models.loading import load_tokenizer
from posttrain.models.pretrained import is_pretrained_alias, resolve_model_name
from posttrain.models.tiny import RECIPES

INSTALL_HINT = ('vLLM is not installed: pip install -e ".[gpu]" on a CUDA machine, '
                'or pip install -e ".[cpu-vllm]" for its CPU build')
# vLLM 0.30's CPU attention kernels (vllm/v1/attention/backends/cpu_attn.py).
CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
DEFAULT_STEP_TOKENS = 4096  # vLLM's default max_num_batched_tokens (its SchedulerConfig)


def _on_cuda() -> bool:
    return torch.cuda.is_available()


def set_cpu_defaults() -> None:
    """The CPU environment defaults described in the module docstring (user settings win)."""
    if not _on_cuda():
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


def import_vllm() -> Any:
    """``vllm`` itself, after the CPU defaults; a missing install names the extra to install."""
    set_cpu_defaults()
    try:
        import vllm
    except ImportError as err:
        raise ImportError(INSTALL_HINT) from err
    return vllm


def vllm_servable_problem(model_path: str) -> str | None:
    """Why vLLM cannot serve the checkpoint at ``model_path`` (None when it can, or when the path is a
    hub id we cannot inspect offline): masked-diffusion models are bidirectional (they keep the
    diffusion sampler, ``--rollout diffusion``), and on CPU the head size must be one vLLM's CPU
    attention implements."""
    config_file = Path(model_path) / "config.json"
    if not config_file.is_file():
        return None
    config = json.loads(config_file.read_text())
    if config.get("posttrain_kind") == "diffusion" or "auto_map" in config:
        return (f"{model_path} is a masked-diffusion (bidirectional) or remote-code model, which vLLM cannot "
                "serve as a causal LM; sample it with the diffusion sampler (--algo espo --rollout diffusion)")
    heads = config.get("num_attention_heads")
    head_dim = config.get("head_dim") or (config.get("hidden_size", 0) // heads if heads else None)
    return _cpu_head_size_problem(model_path, head_dim)


def _cpu_head_size_problem(where: str, head_dim: int | None) -> str | None:
    if _on_cuda() or not head_dim or head_dim in CPU_HEAD_SIZES:
        return None
    return (f"{where} has attention head size {head_dim} (hidden_size / num_attention_heads); vLLM's CPU build "
            f"serves head sizes {list(CPU_HEAD_SIZES)} only (use --rollout hf)")


def vllm_config_problem(config: Any) -> str | None:
    """Why a run's config cannot use ``--rollout vllm``, checked at start-up without starting vLLM (or
    converting a packaged model): vLLM missing, or a model it cannot serve (``vllm_servable_problem``;
    for the embedded default, the head size of its recipe, ``config.embedded_recipe``: the vLLM-servable twin)."""
    import importlib.util


    if importlib.util.find_spec("vllm") is None:
        return INSTALL_HINT
    if config.model:
        return None if is_pretrained_alias(config.model) else vllm_servable_problem(config.model)

    recipe = RECIPES.get(config.embedded_recipe(config.model_kind))
    return _cpu_head_size_problem(f"the embedded default model (tiny recipe {recipe.name!r})",
                                  recipe.hidden_size // recipe.num_heads)


def model_max_length(model_path: str, max_model_len: int | None) -> int:
    """The longest sequence an engine on ``model_path`` serves: ``max_model_len`` if given, else the model's
    own ``max_position_embeddings`` (the limit vLLM takes from the same config)."""
    if max_model_len:
        return int(max_model_len)
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_path).get_text_config()
    length = getattr(config, "max_position_embeddings", None)
    if not length:
        raise ValueError(f"{model_path}: its config names no max_position_embeddings; pass max_model_len")
    return int(length)


def cpu_scheduler_options(model_path: str, max_model_len: int | None) -> dict[str, int | bool]:
    """vLLM scheduler options for its CPU build: chunked prefill off, and a step token budget that holds the
    longest sequence (vLLM's own default budget, 4096, when that is larger).

    Why: with chunked prefill, a prompt that does not fit a scheduler step's token budget is split, and vLLM's
    model runner rewinds the split request's random generator over the token it discards
    (``gen.set_offset(gen.get_offset() - 4)``), which a CPU ``torch.Generator`` does not support: every seeded
    batch whose prompts exceeded 4096 tokens (16 prompts x 8 samples of SmolLM2's chat prompts) crashed with
    ``CPU Generator does not use offset``. Without chunking, vLLM schedules whole prompts and lets the rest
    wait for the next step. vLLM's CPU platform makes the same choice for its MLA models."""
    return {"enable_chunked_prefill": False,
            "max_num_batched_tokens": max(model_max_length(model_path, max_model_len), DEFAULT_STEP_TOKENS)}


DIRECT_LOAD = "direct-load"
"""CUDA: vLLM in the trainer rank's process under its ``external_launcher`` executor (TRL's colocate mode);
a sync hands the gathered tensors to the model's ``load_weights``, GPU memory to GPU memory."""
GLOO_TRANSFER = "gloo-transfer"
"""CPU: vLLM in process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``); a sync goes through vLLM's weight-transfer
protocol over our gloo transport (``weight_transfer.py``)."""


def colocated_weight_path(cuda: bool) -> str:
    """How a colocated engine runs and takes the trainer's weights: ``DIRECT_LOAD`` on CUDA, ``GLOO_TRANSFER``
    on CPU.

    Why not one path: on CUDA vLLM's default executor runs the engine core in a spawned process, where our gloo
    transport is not registered, and each sync would go GPU -> CPU -> gloo -> GPU. Under ``external_launcher``
    the model lives in this process (vLLM then turns multiprocessing off itself), so the trainer's gathered
    tensors load straight into it, which is what TRL does for an engine that shares the trainer's GPU. On CPU
    the gloo transport runs vLLM's own reload protocol (``start_weight_update`` ... ``finish``), which also
    re-packs the CPU GEMM kernels (``weight_transfer.repack_cpu_heads``); a direct ``load_weights`` would not."""
    return DIRECT_LOAD if cuda else GLOO_TRANSFER


def colocated_llm_options(weight_path: str, model_path: str, *, dtype: str, seed: int, max_model_len: int | None,
                          max_num_seqs: int, trust_remote_code: bool, gpu_memory_utilization: float,
                          sleep_mode: bool) -> dict[str, Any]:
    """The ``vllm.LLM`` arguments of a colocated engine on ``weight_path`` (``colocated_weight_path``):
    CUDA: ``external_launcher`` (one engine per trainer rank, tensor parallel 1), its share of GPU memory,
    sleep mode and CUDA graphs; CPU: our gloo transport, eager mode and ``cpu_scheduler_options``."""
    if weight_path not in (DIRECT_LOAD, GLOO_TRANSFER):
        raise ValueError(f"weight_path {weight_path!r}: expected {DIRECT_LOAD!r} or {GLOO_TRANSFER!r}")
    options: dict[str, Any] = {
        "model": model_path, "skip_tokenizer_init": False, "dtype": dtype, "seed": seed, "max_model_len": max_model_len,
        "max_num_seqs": max_num_seqs, "logprobs_mode": "processed_logprobs", "trust_remote_code": trust_remote_code,
        "structured_outputs_config": {"backend": "xgrammar", "disable_any_whitespace": True},
    }
    if weight_path == DIRECT_LOAD:
        options.update(distributed_executor_backend="external_launcher", tensor_parallel_size=1,
                       gpu_memory_utilization=gpu_memory_utilization, enable_sleep_mode=sleep_mode)
        return options
    from vllm.config import WeightTransferConfig

    from posttrain.engines.weight_transfer import GLOO_BACKEND

    options.update(weight_transfer_config=WeightTransferConfig(backend=GLOO_BACKEND),
                   enforce_eager=True,  # no graph compilation on CPU (tens of seconds per start, no gain here)
                   **cpu_scheduler_options(model_path, max_model_len))
    return options


class _LocalClient:
    """``VLLMWeightSyncClient`` over an in-process ``vllm.LLM`` (the colocated placement)."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        self.llm.init_weight_transfer_engine({"init_info": init_info})

    def start_weight_update(self) -> None:
        self.llm.start_weight_update()

    def update_weights(self, update_info: dict[str, Any]) -> None:
        self.llm.update_weights({"update_info": update_info})

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        self.llm.finish_weight_update(weight_version=weight_version)


class VLLMRolloutEngine:
    """A ``RolloutEngine`` and ``ScoringEngine`` over an in-process ``vllm.LLM``; build it with
    ``from_pretrained``."""

    score_top_k = 20  # log-probs per position that ``score`` asks for (vLLM's max_logprobs bounds it)

    def __init__(self, llm: Any, tokenizer: PreTrainedTokenizerBase, dtype: torch.dtype, sleep_mode: bool,
                 sync_timeout_s: float) -> None:
        self.llm = llm
        self.tokenizer = tokenizer
        self.dtype = dtype
        self.sleep_mode = sleep_mode
        self.sync_timeout_s = sync_timeout_s
        self._version = 0
        self._sender: Any = None
        self._asleep = False

    @classmethod
    def from_pretrained(cls, path: str, tokenizer: PreTrainedTokenizerBase | None = None, dtype: str = "float32",
                        max_model_len: int | None = None, seed: int = 0, *, max_num_seqs: int = 256,
                        gpu_memory_utilization: float = 0.3, sleep_mode: bool = False,
                        trust_remote_code: bool = False, sync_timeout_s: float = 300.0,
                        **llm_kwargs: Any) -> VLLMRolloutEngine:
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
            llm_kwargs: passed to ``vllm.LLM`` unchanged.
        """
        path = resolve_model_name(path)
        problem = vllm_servable_problem(path)
        if problem:
            raise ValueError(problem)
        vllm = import_vllm()
        cuda = _on_cuda()
        options = colocated_llm_options(colocated_weight_path(cuda), path, dtype=dtype, seed=seed,
                                        max_model_len=max_model_len, max_num_seqs=max_num_seqs,
                                        trust_remote_code=trust_remote_code,
                                        gpu_memory_utilization=gpu_memory_utilization, sleep_mode=sleep_mode)
        options.update(llm_kwargs)
        llm = vllm.LLM(**options)
        tokenizer = tokenizer if tokenizer is not None else load_tokenizer(path, trust_remote_code=trust_remote_code)
        # the dtype the engine holds its weights in (what weight syncs send), asked of the engine itself
        served = llm.model_config.dtype
        return cls(llm, tokenizer, served, sleep_mode=sleep_mode and cuda,
                   sync_timeout_s=sync_timeout_s)

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
        if self._asleep:
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
            finish_reasons=["stop" if c.finish_reason == "stop" else "length" for c in completions],
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
        if colocated_weight_path(_on_cuda()) == DIRECT_LOAD:
            self._load_directly(source)
        else:
            self._send_over_gloo(source, version)
        # Cached prefix blocks hold keys and values computed by the old weights (TRL resets them too).
        self.llm.reset_prefix_cache()
        self._version = version

    def _load_directly(self, source: Any) -> None:
        """``DIRECT_LOAD``: each gathered bucket (a decoder layer) into the in-process model's ``load_weights``;
        every rank loads its own engine (under ZeRO-3 all ranks iterate the gathers together)."""
        model = self.llm.llm_engine.model_executor.driver_worker.model_runner.model
        for names, tensors in source.iter_groups():
            model.load_weights(list(zip(names, tensors)))

    def _send_over_gloo(self, source: Any, version: int) -> None:
        from posttrain.engines.weight_transfer import GlooTrainerInitInfo, WeightSender, free_port

        if self._sender is None:
            info = GlooTrainerInitInfo(master_address="127.0.0.1", master_port=free_port(), world_size=2,
                                       timeout_s=self.sync_timeout_s, rank=0)
            self._sender = WeightSender.trainer_init(info, client=_LocalClient(self.llm), source=source,
                                                     peer="the colocated vLLM engine")
        self._sender.source = source
        self._sender.send_weights(weight_version=version)

    def sync_from(self, weights: TrainerWeights, version: int) -> None:
        """Load the trainer's weights (``weights.gather``: ZeRO-3 gathered a layer at a time on every rank
        together; PEFT adapters already merged) and record ``version``, the trainer step they belong to."""
        from posttrain.engines.weight_transfer import TrainerWeightSource

        self._send(TrainerWeightSource(weights, self.dtype), version)

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int | None = None) -> None:
        """Load named full tensors (names as ``weights.canonical_name`` maps them; adapter tensors skipped);
        ``version`` defaults to the current one plus 1."""
        from posttrain.engines.weight_transfer import NamedTensorSource

        self._send(NamedTensorSource(named_tensors, self.dtype), self._version + 1 if version is None else version)

    def sleep(self) -> None:
        """Free the engine's GPU memory until ``wake_up`` (vLLM sleep level 1); a no-op on CPU."""
        if self.sleep_mode and not self._asleep:
            self.llm.sleep(level=1)
            self._asleep = True

    def wake_up(self) -> None:
        """Restore what ``sleep`` freed; a no-op when awake or on CPU."""
        if self._asleep:
            self.llm.wake_up()
            self._asleep = False

