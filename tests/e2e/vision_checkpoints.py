"""Tiny vision checkpoints saved to disk with their processors and tokenizers, so the ``--model`` paths of
``posttrain vision attwarp|deleaker|fga`` load real folders through ``from_pretrained`` exactly as they would
load a hub checkpoint. Everything is built from configs and in-memory vocabularies (nothing is downloaded).
"""

from __future__ import annotations

import string
from pathlib import Path

import torch

WORDS = ["what", "colour", "is", "the", "small", "square", "a", "photo", "of", "cat", "dog", "and", "describe",
         "image", "in", "detail"]
"""The words the tokenizers below know; anything else is ``<unk>`` (Llava) or spelled out (CLIP, T5)."""

LLAVA_TEMPLATE = ("{% for m in messages %}USER: {% for c in m['content'] %}{% if c['type'] == 'image' %}<image> "
                  "{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endfor %}"
                  "{% if add_generation_prompt %} ASSISTANT:{% endif %}")


def _word_level_tokenizer():
    """A word-level fast tokenizer whose reserved ids match ``posttrain.standalone.vision.tiny.TOKENS``."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from posttrain.standalone.vision.tiny import FIRST_WORD_ID, TOKENS

    vocab = {"<pad>": TOKENS["pad"], "<s>": TOKENS["bos"], "</s>": TOKENS["eos"], "<image>": TOKENS["image"],
             "<unk>": FIRST_WORD_ID - 1}
    vocab.update({w: FIRST_WORD_ID + i for i, w in enumerate(WORDS + ["USER:", "ASSISTANT:"])})
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   unk_token="<unk>", extra_special_tokens={"image_token": "<image>"})


def save_tiny_llava(path: Path) -> Path:
    """A tiny ``LlavaForConditionalGeneration`` (32-pixel images, 4-pixel patches: 64 image tokens) with a
    ``LlavaProcessor`` (CLIP image processor + the word-level tokenizer + a chat template)."""
    from transformers import CLIPImageProcessor, LlavaProcessor

    from posttrain.standalone.vision.tiny import TOKENS, tiny_llava

    tokenizer = _word_level_tokenizer()
    assert tokenizer.convert_tokens_to_ids("<image>") == TOKENS["image"]
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}),
        tokenizer=tokenizer, patch_size=4, vision_feature_select_strategy="default", num_additional_image_tokens=1,
        chat_template=LLAVA_TEMPLATE)
    tiny_llava(image_size=32, patch_size=4).save_pretrained(path)
    processor.save_pretrained(path)
    return path


def _clip_tokenizer(eos_id: int):
    """CLIP's BPE tokenizer over single letters (no merges): words are spelled out; ``<|endoftext|>`` gets
    ``eos_id``, the id CLIP pools at."""
    from transformers import CLIPTokenizer

    pieces = list(string.ascii_lowercase) + [c + "</w>" for c in string.ascii_lowercase]
    vocab = {p: i for i, p in enumerate(pieces)}
    vocab["<|startoftext|>"] = eos_id - 1
    vocab["<|endoftext|>"] = eos_id
    return CLIPTokenizer(vocab=vocab, merges=[], model_max_length=77)


def save_tiny_clip(path: Path) -> Path:
    """A tiny ``CLIPModel`` (vocab 64, EOS 63) with its letter-level CLIP tokenizer."""
    from posttrain.standalone.vision.tiny import tiny_clip

    tiny_clip(vocab_size=64).save_pretrained(path)
    _clip_tokenizer(63).save_pretrained(path)
    return path


def save_image_folder(path: Path, classes: list[str], per_class: int, seed: int = 0) -> Path:
    """``path/<class>/<k>.png``: random 40x40 RGB images, ``per_class`` per class."""
    from PIL import Image

    g = torch.Generator().manual_seed(seed)
    for name in classes:
        (path / name).mkdir(parents=True, exist_ok=True)
        for k in range(per_class):
            pixels = (torch.rand(40, 40, 3, generator=g) * 255).round().to(torch.uint8).numpy()
            Image.fromarray(pixels).save(path / name / f"{k}.png")
    return path


def save_tiny_flux_pipeline(path: Path) -> Path:
    """A whole ``FluxPipeline`` at test size: the tiny Flux transformer, a 4-level VAE (spatial factor 8, as
    FLUX's), a tiny CLIP text encoder and T5 encoder with in-memory tokenizers, and the flow-matching scheduler."""
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxPipeline
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel, T5TokenizerFast

    from posttrain.standalone.vision.tiny import tiny_flux

    torch.manual_seed(0)
    clip_tokenizer = _clip_tokenizer(99)
    t5_pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)] + [("▁" + w, -1.0) for w in WORDS] + \
                [(c, -5.0) for c in string.ascii_lowercase] + [("▁", -2.0)]
    t5_tokenizer = T5TokenizerFast(vocab=t5_pieces, extra_ids=0)
    text_encoder = CLIPTextModel(CLIPTextConfig(vocab_size=100, hidden_size=32, intermediate_size=37,
                                                num_hidden_layers=2, num_attention_heads=4, projection_dim=32,
                                                bos_token_id=98, eos_token_id=99, pad_token_id=99))
    text_encoder_2 = T5EncoderModel(T5Config(vocab_size=len(t5_pieces), d_model=32, d_kv=8, d_ff=37, num_layers=2,
                                             num_heads=4, relative_attention_num_buckets=8))
    vae = AutoencoderKL(in_channels=3, out_channels=3, latent_channels=1, block_out_channels=(4, 4, 4, 4),
                        down_block_types=("DownEncoderBlock2D",) * 4, up_block_types=("UpDecoderBlock2D",) * 4,
                        layers_per_block=1, norm_num_groups=1, sample_size=32, use_quant_conv=False,
                        use_post_quant_conv=False, shift_factor=0.0609, scaling_factor=1.5035)
    pipe = FluxPipeline(scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae, text_encoder=text_encoder,
                        tokenizer=clip_tokenizer, text_encoder_2=text_encoder_2, tokenizer_2=t5_tokenizer,
                        transformer=tiny_flux(num_layers=1, num_single_layers=1))
    pipe.save_pretrained(path)
    return path
