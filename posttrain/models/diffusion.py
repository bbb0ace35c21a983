"""Masked-diffusion LMs (LLaDA / Dream style): loading, the one forward and the SFT loss
(the tiny recipes' warm start that trains with it is ``posttrain.algos.warm_start.diffusion_warm_start``).

A masked-diffusion LM is a Transformer with **no causal mask** whose output at every position is a
distribution over the clean token there; some input positions hold the tokenizer's mask token.

How a model is marked as a diffusion model (so the trainer, the rollout registry and the likelihood
code can tell): ``make_bidirectional`` / ``load_diffusion_lm`` set three attributes on ``model.config``,
which ``save_pretrained`` writes to ``config.json`` and ``from_pretrained`` reads back:

- ``config.posttrain_kind = "diffusion"``  -- test with ``is_diffusion_model(model)``;
- ``config.posttrain_mask_token_id``       -- the mask id (also ``diffusion_mask_token_id(model)``);
- ``config.posttrain_logit_shift``         -- True for AR-initialised models (Dream) whose logit for
  position i sits at position i-1; ``diffusion_logits`` undoes the shift.

Native Hugging Face decoders (Llama, Qwen2, ... built from config or loaded by path) are made
bidirectional with ``config.is_causal = False`` (transformers >= 5.2: ``create_causal_mask`` then
builds a bidirectional padding mask and SDPA gets ``is_causal=False``) **and** every attention module's
``is_causal = False`` (FlashAttention-2 and older code paths read the module flag). Remote-code
checkpoints (LLaDA, Dream; ``trust_remote_code=True``) are bidirectional already and are used as-is.
``tests/unit/test_diffusion_model.py`` checks that changing the last token changes position 0's logits
on every attention implementation we allow (eager, sdpa; flash_attention_2 under the ``gpu`` marker).

Never pass ``labels=`` to a ``*ForCausalLM`` diffusion model: its built-in loss shifts by one.
"""

from __future__ import annotations

import inspect
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from posttrain.common.padding import left_pad, left_padded_positions
from posttrain.models.loading import load_tokenizer

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


logger = logging.getLogger(__name__)

DIFFUSION_KIND = "diffusion"
"""Value of ``config.posttrain_kind`` on a masked-diffusion model."""

ATTN_IMPLEMENTATIONS = ("eager", "sdpa", "flash_attention_2")
"""Attention implementations we allow for native (non-remote) diffusion models."""

_MASK_TOKEN_NAMES = ("<|mdm_mask|>", "<|mask|>", "[MASK]", "<mask>")
"""Vocabulary entries tried, in order, when neither tokenizer nor config names a mask id (LLaDA, Dream,
BERT-style, ours)."""

_SHIFTED_MODEL_TYPES = ("dream",)
"""``config.model_type`` values (lower-cased) of AR-initialised diffusion LMs with shifted logits."""

_REMOTE_DIFFUSION_TYPES = ("llada", "dream")


# ---------------------------------------------------------------------------------------------------
# Marking and bidirectional attention
# ---------------------------------------------------------------------------------------------------

def unwrap_model(model: Any) -> Any:
    """The plain module under DeepSpeed / DDP (``.module``) and torch.compile (``._orig_mod``) wrappers."""
    seen = 0
    while seen < 8:
        inner = getattr(model, "module", None) or getattr(model, "_orig_mod", None)
        if not isinstance(inner, torch.nn.Module):
            return model
        model, seen = inner, seen + 1
    return model


def _config(model_or_config: Any) -> Any:
    if isinstance(model_or_config, torch.nn.Module):
        return unwrap_model(model_or_config).config
    return model_or_config


def is_diffusion_model(model_or_config: Any) -> bool:
    """True when the model (or its config) is marked ``posttrain_kind = "diffusion"``, or is a known
    remote-code diffusion architecture (LLaDA, Dream)."""
    config = _config(model_or_config)
    if getattr(config, "posttrain_kind", None) == DIFFUSION_KIND:
        return True
    return str(getattr(config, "model_type", "")).lower() in _REMOTE_DIFFUSION_TYPES


def diffusion_mask_token_id(model_or_config: Any) -> int:
    """The mask id recorded on a marked model; raises naming the fix when it is missing."""
    config = _config(model_or_config)
    mask_id = getattr(config, "posttrain_mask_token_id", None)
    if mask_id is None:
        mask_id = getattr(config, "mask_token_id", None)
    if mask_id is None:
        raise ValueError("the model has no mask token id recorded; load it with load_diffusion_lm "
                         "or call make_bidirectional(model, mask_token_id=...)")
    return int(mask_id)


def uses_shifted_logits(model_or_config: Any) -> bool:
    """True when the logit for position i sits at position i-1 (Dream and other AR-initialised MDMs)."""
    config = _config(model_or_config)
    flag = getattr(config, "posttrain_logit_shift", None)
    if flag is not None:
        return bool(flag)
    return str(getattr(config, "model_type", "")).lower() in _SHIFTED_MODEL_TYPES


def make_bidirectional(
    model: PreTrainedModel, mask_token_id: int | None = None, logit_shift: bool | None = None
) -> PreTrainedModel:
    """Turn a native HF decoder into a bidirectional masked-diffusion model, in place, and mark it.

    Sets ``config.is_causal = False``, ``module.is_causal = False`` on every attention module, and the
    ``posttrain_*`` markers (see the module docstring). Returns the same model.
    """
    model = unwrap_model(model)
    config = model.config
    config.is_causal = False
    for text_config_name in ("text_config", "decoder"):
        sub = getattr(config, text_config_name, None)
        if sub is not None and hasattr(sub, "to_dict"):
            sub.is_causal = False
    for module in model.modules():
        if hasattr(module, "is_causal") and isinstance(module.is_causal, bool):
            module.is_causal = False
    config.posttrain_kind = DIFFUSION_KIND
    if mask_token_id is not None:
        config.posttrain_mask_token_id = int(mask_token_id)
    config.posttrain_logit_shift = bool(logit_shift) if logit_shift is not None else uses_shifted_logits(config)
    return model


def resolve_mask_token_id(tokenizer: PreTrainedTokenizerBase | None, config: Any = None) -> int:
    """The mask token id: ``tokenizer.mask_token_id``, then the config's / generation config's
    ``mask_token_id`` (or our ``posttrain_mask_token_id``), then a known mask token in the vocabulary.
    Never hard-coded; raises listing what was tried."""
    tried = []
    if tokenizer is not None and getattr(tokenizer, "mask_token_id", None) is not None:
        return int(tokenizer.mask_token_id)
    tried.append("tokenizer.mask_token_id")
    for holder_name in ("config", "generation_config"):
        holder = config if holder_name == "config" else getattr(config, "generation_config", None)
        if holder is None and holder_name == "config":
            continue
        for attr in ("posttrain_mask_token_id", "mask_token_id"):
            value = getattr(holder, attr, None) if holder is not None else None
            if value is not None:
                return int(value)
            tried.append(f"{holder_name}.{attr}")
    if tokenizer is not None:
        vocab = tokenizer.get_vocab()
        for name in _MASK_TOKEN_NAMES:
            if name in vocab:
                return int(vocab[name])
        tried.append(f"vocabulary entries {list(_MASK_TOKEN_NAMES)}")
    raise ValueError(f"cannot find the mask token id of this diffusion model; tried {', '.join(tried)}. "
                     "Set tokenizer.mask_token or config.mask_token_id.")


def load_diffusion_lm(
    path: str | Path,
    trust_remote_code: bool = False,
    dtype: torch.dtype | str | None = None,
    attn_implementation: str | None = None,
    device: str | torch.device | None = None,
) -> PreTrainedModel:
    """Load a masked-diffusion LM by path or hub id, in eval mode (load its tokenizer separately, e.g.
    with ``posttrain.models.loading.load_tokenizer``).

    - Our own checkpoints (marked ``posttrain_kind = "diffusion"``) and plain HF decoders (Llama,
      Qwen2, ...) are loaded with ``AutoModelForCausalLM`` and made bidirectional.
    - Remote-code checkpoints (LLaDA: ``AutoModelForCausalLM``/``AutoModel``; Dream: ``AutoModel``)
      need ``trust_remote_code=True``; they are bidirectional already. Dream's shifted logits are
      recorded in ``config.posttrain_logit_shift`` and undone by ``diffusion_logits``.

    The mask id comes from ``resolve_mask_token_id`` (the checkpoint's tokenizer first) and is
    recorded on the config as ``posttrain_mask_token_id``.
    """
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM


    path = str(path)
    config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    tokenizer = load_tokenizer(path, trust_remote_code=trust_remote_code)
    remote = bool(getattr(config, "auto_map", None)) and trust_remote_code
    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    if dtype is not None:
        kwargs["dtype"] = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    if attn_implementation is not None:
        if not remote and attn_implementation not in ATTN_IMPLEMENTATIONS:
            raise ValueError(f"attn_implementation {attn_implementation!r} is not allowed for diffusion models; "
                             f"use one of {list(ATTN_IMPLEMENTATIONS)}")
        kwargs["attn_implementation"] = attn_implementation
    model = None
    errors = []
    for auto in (AutoModelForCausalLM, AutoModel):
        try:
            model = auto.from_pretrained(path, **kwargs)
            break
        except (ValueError, KeyError) as err:  # the auto class has no mapping for this config
            errors.append(f"{auto.__name__}: {err}")
    if model is None:
        raise ValueError(f"cannot load diffusion LM {path!r}: " + " | ".join(errors))
    if getattr(model, "lm_head", None) is None and not hasattr(model, "get_output_embeddings"):
        logger.warning("diffusion LM %s has no output embeddings; its forward must return .logits", path)
    mask_id = resolve_mask_token_id(tokenizer, model.config)
    if tokenizer.mask_token_id is None:
        logger.info("diffusion LM %s: tokenizer has no mask token; using id %d from the config/vocab", path, mask_id)
    if remote:
        model.config.posttrain_kind = DIFFUSION_KIND
        model.config.posttrain_mask_token_id = mask_id
        model.config.posttrain_logit_shift = uses_shifted_logits(model.config)
    else:
        make_bidirectional(model, mask_token_id=mask_id)
    if device is not None:
        model = model.to(device)
    return model.eval()


def tiny_diffusion_model(
    tokenizer: PreTrainedTokenizerBase,
    hidden_size: int = 32,
    num_layers: int = 2,
    num_heads: int = 4,
    arch: str = "qwen2",
    attn_implementation: str = "sdpa",
    seed: int = 0,
    max_position_embeddings: int = 256,
) -> PreTrainedModel:
    """A randomly initialised bidirectional Llama/Qwen2 diffusion model (tests and benchmarks); weights
    depend only on ``seed`` and the global RNG state is restored."""
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    configs = {"qwen2": Qwen2Config, "llama": LlamaConfig}
    if arch not in configs:
        raise ValueError(f"arch must be one of {sorted(configs)}, got {arch!r}")
    config = configs[arch](
        vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers, num_attention_heads=num_heads, num_key_value_heads=max(1, num_heads // 2),
        max_position_embeddings=max_position_embeddings, tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, attn_implementation=attn_implementation, dtype=torch.float32)
    return make_bidirectional(model, mask_token_id=resolve_mask_token_id(tokenizer, model.config)).eval()


# ---------------------------------------------------------------------------------------------------
# The one forward
# ---------------------------------------------------------------------------------------------------

_FORWARD_PARAMS: dict[type, frozenset[str]] = {}


def _forward_params(model: torch.nn.Module) -> frozenset[str]:
    cls = type(model)
    if cls not in _FORWARD_PARAMS:
        try:
            params = inspect.signature(model.forward).parameters
            names = set(params)
            if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
                names.add("**")
        except (TypeError, ValueError):
            names = {"**"}
        _FORWARD_PARAMS[cls] = frozenset(names)
    return _FORWARD_PARAMS[cls]


def diffusion_logits(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    keep: torch.Tensor | None = None,
) -> torch.Tensor:
    """Logits aligned one-to-one with input positions: ``out[:, i]`` predicts the clean token at ``i``.

    The single forward used by the sampler, the ELBO / mean-field estimators and the SFT loss.

    - ``attention_mask`` [B, T] (1 = real token): padded keys are hidden. When it has padding, native
      models also get ``position_ids = cumsum(mask) - 1`` so a left-padded row gives the same logits as
      the unpadded one. ``None`` or all-ones: plain full attention.
    - ``keep``: optional 1-D LongTensor of positions; only those logits are computed (``[B, len(keep), V]``),
      via ``logits_to_keep`` where the model supports it (saves the vocabulary projection elsewhere).
    - Dream-style models (``uses_shifted_logits``): the logit for position i is read from position i-1
      (position 0 reuses its own logit, as ESPO's ``get_logits`` does; the prompt's first token is
      never predicted anyway).
    """
    inner = unwrap_model(model)
    params = _forward_params(inner)
    accepts = lambda name: name in params or "**" in params
    shift = uses_shifted_logits(inner)
    kwargs: dict[str, Any] = {}
    if attention_mask is not None and not bool(attention_mask.bool().all()):
        if str(getattr(inner.config, "model_type", "")).lower() == "dream":
            # Dream's remote code wants a 4-D boolean mask plus explicit positions (as its generate does).
            am = attention_mask.bool()
            kwargs["attention_mask"] = am[:, None, None, :].expand(-1, 1, am.shape[1], -1)
        else:
            kwargs["attention_mask"] = attention_mask
        if accepts("position_ids"):
            kwargs["position_ids"] = left_padded_positions(attention_mask)
    positions = keep
    if keep is not None and shift:
        positions = (keep - 1).clamp(min=0)
    if positions is not None and "logits_to_keep" in params:
        kwargs["logits_to_keep"] = positions.to(input_ids.device)
        return model(input_ids=input_ids, **kwargs).logits
    logits = model(input_ids=input_ids, **kwargs).logits
    if positions is not None:
        return logits[:, positions.to(logits.device)]
    if shift:
        logits = torch.cat([logits[:, :1], logits[:, :-1]], dim=1)
    return logits


# ---------------------------------------------------------------------------------------------------
# Masked-diffusion SFT loss
# ---------------------------------------------------------------------------------------------------

def diffusion_sft_loss(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    response_mask: torch.Tensor,
    mask_token_id: int,
    generator: torch.Generator | None = None,
    attention_mask: torch.Tensor | None = None,
    eps: float = 1e-3,
    stratified_t: bool = False,
) -> tuple[torch.Tensor, dict[str, float]]:
    """LLaDA's SFT loss: mask response tokens with probability p = (1-eps)*t + eps, t ~ U(0,1) per
    sequence; cross-entropy on masked tokens weighted by 1/p, summed per sequence, divided by that
    sequence's response length, averaged over the batch. The prompt is never masked.

    ``response_mask`` [B, T] marks the response positions (answer + EOS padding: the padding counts as
    response, as in LLaDA SFT). Randomness comes only from ``generator``. ``stratified_t=True`` draws
    the batch's t as (u + j) / B (MDLM's low-discrepancy sampler): each t is still U(0,1), so the loss
    stays unbiased, with lower variance than LLaDA's independent draws. Returns ``(loss, metrics)``.
    """
    response = response_mask.bool()
    batch = input_ids.shape[0]
    device = input_ids.device
    t = torch.rand(batch, generator=generator, device=device if generator is None else generator.device)
    if stratified_t:
        t = (t[:1] + torch.arange(batch, device=t.device, dtype=t.dtype)) / batch
        t = t[torch.randperm(batch, generator=generator, device=t.device)]
    t = t.to(device)
    p_mask = ((1 - eps) * t + eps).unsqueeze(1).expand_as(input_ids)
    draws = torch.rand(input_ids.shape, generator=generator,
                       device=device if generator is None else generator.device).to(device)
    masked = (draws < p_mask) & response
    noisy = torch.where(masked, torch.full_like(input_ids, mask_token_id), input_ids)
    logits = diffusion_logits(model, noisy, attention_mask)
    flat = masked.nonzero(as_tuple=True)
    ce = F.cross_entropy(logits[flat].float(), input_ids[flat], reduction="none") / p_mask[flat]
    per_token = torch.zeros(input_ids.shape, dtype=ce.dtype, device=device)
    per_token[flat] = ce
    lengths = response.sum(-1).clamp(min=1).to(ce.dtype)
    loss = (per_token.sum(-1) / lengths).mean()
    metrics = {"sft/masked_fraction": float(masked.sum() / response.sum().clamp(min=1)),
               "sft/masked_ce": float(ce.detach().mean()) if ce.numel() else 0.0}
    return loss, metrics


def sft_batch(
    prompts: list[list[int]], responses: list[list[int]], pad_id: int, eos_id: int, length: int | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Left-padded ``prompt + response`` rows with every response EOS-padded to ``length`` (default: the
    longest response): returns ``(input_ids, attention_mask, response_mask)``, all [B, P + length]."""
    length = max(len(r) for r in responses) if length is None else length
    if any(len(r) > length for r in responses):
        raise ValueError(f"a response is longer than the fixed generation length {length}")
    rows = [list(prompt) + list(response) + [eos_id] * (length - len(response))
            for prompt, response in zip(prompts, responses)]
    input_ids, attention_mask = left_pad(rows, pad_id, max(len(p) for p in prompts) + length)
    response_mask = torch.zeros_like(attention_mask)
    response_mask[:, response_mask.shape[1] - length:] = 1
    return input_ids, attention_mask, response_mask
