"""Random-init tiny vision models built from configs only (no hub, no tokenizer), for tests, the commands'
embedded defaults and the benchmarks of the vision methods (AttWarp, DeLeaker, FGA; ICLR 2026).

- ``tiny_llava``: ``LlavaForConditionalGeneration`` (CLIP vision tower + Llama text model), the model family
  of AttWarp's main results (LLaVA-1.5);
- ``tiny_qwen_vl``: ``Qwen2VLForConditionalGeneration`` or ``Qwen2_5_VLForConditionalGeneration`` (AttWarp's
  Qwen-VL results);
- ``tiny_flux``: diffusers' ``FluxTransformer2DModel`` at the size of diffusers' own test config (DeLeaker);
- ``tiny_clip``: transformers' ``CLIPModel`` with 2-layer towers (FGA).

Token ids are fixed small integers (``TOKENS``) so inputs can be written by hand. Each builder seeds its own
``torch.random.fork_rng`` so building never disturbs the caller's global RNG. ``resolve_device`` and
``resolve_dtype`` turn the commands' ``--device`` / ``--dtype`` into torch objects with the rest of the
project's conventions (cuda when available; the reward server's dtype names).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch

from posttrain.models.loading import DTYPES

TOKENS = {"pad": 0, "bos": 1, "eos": 2, "image": 3, "vision_start": 4, "vision_end": 5, "video": 6}
"""Reserved ids of the tiny vision-language models; ids from ``FIRST_WORD_ID`` on are free for words."""
FIRST_WORD_ID = 8
M = TypeVar("M", bound=torch.nn.Module)


def resolve_device(device: str | None) -> torch.device:
    """``--device``: the named torch device, or cuda if available, else cpu (as ``checkpoint_engine``)."""
    return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))


def resolve_dtype(name: str, device: torch.device | None = None) -> torch.dtype:
    """``--dtype`` by the model-loading names (``posttrain.models.loading.DTYPES``); ``auto`` (the commands'
    default) is bf16 on CUDA and float32 elsewhere (a FLUX.1-dev pipeline is about 68 GB in float32, half in bf16)."""
    if name not in DTYPES:
        raise ValueError(f"--dtype must be one of {', '.join(DTYPES)}, got {name!r}")
    dtype = DTYPES[name]
    if dtype == "auto":
        return torch.bfloat16 if device is not None and device.type == "cuda" else torch.float32
    return dtype


def _seeded(seed: int, build: Callable[[], M]) -> M:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build().eval()


def tiny_llava(*, image_size: int = 32, patch_size: int = 8, vocab_size: int = 128, hidden_size: int = 32,
               num_layers: int = 2, vision_layers: int = 2, seed: int = 0, attn_implementation: str = "sdpa") -> Any:
    """A random-init ``LlavaForConditionalGeneration``: (image_size / patch_size)^2 image tokens (CLS dropped)."""
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration

    if image_size % patch_size:
        raise ValueError(f"image_size {image_size} must be a multiple of patch_size {patch_size}")
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(image_size=image_size, patch_size=patch_size, hidden_size=hidden_size,
                                       num_hidden_layers=vision_layers, num_attention_heads=2,
                                       intermediate_size=2 * hidden_size),
        text_config=LlamaConfig(vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=num_layers,
                                num_attention_heads=4, num_key_value_heads=2, intermediate_size=2 * hidden_size,
                                max_position_embeddings=512, pad_token_id=TOKENS["pad"],
                                bos_token_id=TOKENS["bos"], eos_token_id=TOKENS["eos"]),
        image_token_id=TOKENS["image"], vision_feature_layer=-1)
    return _seeded(seed, lambda: LlavaForConditionalGeneration._from_config(
        config, attn_implementation=attn_implementation))


def tiny_qwen_vl(version: str = "2", *, vocab_size: int = 128, hidden_size: int = 32, num_layers: int = 2,
                 patch_size: int = 4, seed: int = 0, attn_implementation: str = "sdpa") -> Any:
    """A random-init Qwen2-VL (``version="2"``) or Qwen2.5-VL (``"2.5"``); spatial merge 2, temporal patch 2."""
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
    )

    vision: dict[str, Any] = {"depth": 2, "patch_size": patch_size, "spatial_merge_size": 2,
                              "temporal_patch_size": 2, "in_channels": 3, "hidden_size": hidden_size, "num_heads": 2}
    if version == "2":
        config_class, model_class = Qwen2VLConfig, Qwen2VLForConditionalGeneration
        vision["embed_dim"] = hidden_size
    elif version == "2.5":
        config_class, model_class = Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
        vision.update(out_hidden_size=hidden_size, intermediate_size=2 * hidden_size, fullatt_block_indexes=[1],
                      window_size=4 * patch_size)
    else:
        raise ValueError(f"version must be '2' or '2.5', got {version!r}")
    head_dim = hidden_size // 4
    rope = {"rope_type": "default", "rope_theta": 10000.0,
            "mrope_section": [head_dim // 4, head_dim // 8, head_dim // 8]}
    text = {"vocab_size": vocab_size, "hidden_size": hidden_size, "num_hidden_layers": num_layers,
            "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 2 * hidden_size,
            "rope_parameters": rope, "bos_token_id": TOKENS["bos"], "eos_token_id": TOKENS["eos"],
            "pad_token_id": TOKENS["pad"]}
    config = config_class(vision_config=vision, text_config=text, image_token_id=TOKENS["image"],
                          vision_start_token_id=TOKENS["vision_start"], vision_end_token_id=TOKENS["vision_end"],
                          video_token_id=TOKENS["video"], bos_token_id=TOKENS["bos"], eos_token_id=TOKENS["eos"])
    return _seeded(seed, lambda: model_class._from_config(config, attn_implementation=attn_implementation))


def tiny_flux(*, num_layers: int = 1, num_single_layers: int = 1, seed: int = 0) -> Any:
    """diffusers' test-size ``FluxTransformer2DModel``: 2 heads of 16, 4 latent channels, text width 32."""
    from diffusers import FluxTransformer2DModel

    return _seeded(seed, lambda: FluxTransformer2DModel(
        patch_size=1, in_channels=4, num_layers=num_layers, num_single_layers=num_single_layers,
        attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32, pooled_projection_dim=32,
        axes_dims_rope=[4, 4, 8]))


def tiny_clip(*, vocab_size: int = 64, image_size: int = 32, patch_size: int = 4, hidden_size: int = 32,
              projection_dim: int = 32, num_layers: int = 2, max_text_len: int = 16, seed: int = 0) -> Any:
    """A random-init transformers ``CLIPModel`` with 2-layer towers. Its text EOS is the highest id,
    ``vocab_size - 1``, as in CLIP's own vocabulary (transformers pools at the EOS position)."""
    from transformers import CLIPConfig, CLIPModel, CLIPTextConfig, CLIPVisionConfig

    text = CLIPTextConfig(vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                          num_hidden_layers=num_layers, num_attention_heads=2, max_position_embeddings=max_text_len,
                          pad_token_id=TOKENS["pad"], bos_token_id=TOKENS["bos"], eos_token_id=vocab_size - 1)
    vision = CLIPVisionConfig(image_size=image_size, patch_size=patch_size, hidden_size=hidden_size,
                              intermediate_size=2 * hidden_size, num_hidden_layers=num_layers, num_attention_heads=2)
    config = CLIPConfig(text_config=text.to_dict(), vision_config=vision.to_dict(), projection_dim=projection_dim)
    return _seeded(seed, lambda: CLIPModel(config))
