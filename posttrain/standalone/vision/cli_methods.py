"""``posttrain vision deleaker`` and ``posttrain vision fga`` (DeLeaker and FGA, ICLR 2026): parsers and runs,
dispatched by ``posttrain.standalone.vision.cli``, and the options every vision method shares. Embedded defaults are random-init tiny models on generated inputs;
``--model`` takes a FLUX pipeline (DeLeaker) or a CLIP checkpoint (FGA).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import torch

from posttrain.common.cli_help import CommandParser
from posttrain.dist import set_cpu_threads
from posttrain.standalone.vision.deleaker import DeleakerConfig, entity_token_indices
from posttrain.standalone.vision.fga import (
    FGAConfig,
    PromptLearner,
    evaluate_views,
    perturbed_classes,
    train_prompt,
    view_features,
)
from posttrain.standalone.vision.shapes import COLOURS, SHAPES, SHIFTS, shapes_dataset, shift
from posttrain.standalone.vision.tiny import (
    FIRST_WORD_ID,
    TOKENS,
    resolve_device,
    resolve_dtype,
    tiny_clip,
    tiny_flux,
)

_TOGGLES = {"no_history": "use_history", "no_smoothing": "do_smoothing", "no_image_image": "do_image_image",
            "no_strengthening": "do_image_text_strengthening", "no_weakening": "do_image_text_weakening"}
_WINDOWS = ("start_aggregating_from", "stop_aggregating_at", "start_intervention_from", "stop_intervention_at")


def add_common_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default=None, help="Torch device; default cuda if available, else cpu.")
    p.add_argument("--dtype", default="auto", help="Weights' dtype with --model: fp32, bf16, fp16 or auto (bf16 on "
                   "CUDA, fp32 on CPU). The embedded tiny models stay in fp32.")
    p.add_argument("--seed", type=int, default=0, help="Seed of the generated inputs and the tiny models.")
    p.add_argument("--num_threads", type=int, default=0, help="CPU threads (0: $OMP_NUM_THREADS or a share).")
    p.add_argument("--output", type=Path, default=None, help="Also write the JSON summary here.")


def load_image(path: str, size: int) -> torch.Tensor:
    """An image file as a (1, 3, H, W) float tensor in [0, 1], resized to size x size unless size <= 0."""
    import numpy as np
    from PIL import Image

    t = torch.from_numpy(np.asarray(Image.open(path).convert("RGB"), dtype=np.float32).copy()) / 255
    t = t.permute(2, 0, 1).unsqueeze(0)
    return t if size <= 0 else torch.nn.functional.interpolate(t, size=(size, size), mode="bilinear",
                                                                antialias=True)


def deleaker_parser() -> argparse.ArgumentParser:
    from posttrain.standalone.vision import deleaker as module

    p = CommandParser(prog="posttrain vision deleaker", description=module.__doc__)
    p.add_argument("--model", default=None, help="A FLUX diffusers pipeline (e.g. black-forest-labs/FLUX.1-dev); "
                   "default: a random-init tiny Flux transformer (2 double + 2 single blocks) on prompt embeddings.")
    p.add_argument("--prompt", default="a cat and a dog", help="The prompt (--model).")
    p.add_argument("--entities", nargs="+", default=None, help="--model: the entity strings, verbatim in the "
                   "prompt (default: 'cat' 'dog'); tiny model: text token positions, comma-separated per entity "
                   "(default: 1,2 5).")
    p.add_argument("--steps", type=int, default=None, help="Denoising steps; default 20 with --model, 8 tiny.")
    p.add_argument("--grid", type=int, default=8, help="Tiny model: latent grid side (grid^2 image tokens).")
    p.add_argument("--text_tokens", type=int, default=8, help="Tiny model: prompt-embedding length.")
    p.add_argument("--size", type=int, default=512, help="--model: image height and width, pixels.")
    p.add_argument("--guidance", type=float, default=3.5, help="--model: FLUX guidance scale (the code's).")
    p.add_argument("--max_sequence_length", type=int, default=256, help="--model: T5 tokens (the code's).")
    p.add_argument("--std_mul_text", type=float, default=1.0, help="Entity-mask threshold multiplier.")
    p.add_argument("--std_mul_image_image", type=float, default=1.0, help="Image-image threshold multiplier.")
    p.add_argument("--k_strength", type=float, default=1.2, help="Own-text logit scale.")
    for name in _WINDOWS:
        p.add_argument(f"--{name}", type=int, default=None, help=f"Block-step window bound; default: FLUX.1's "
                       f"{getattr(DeleakerConfig(), name)} scaled to the model's blocks per step.")
    for flag, field in _TOGGLES.items():
        p.add_argument(f"--{flag}", action="store_true", help=f"Turn off {field}.")
    p.add_argument("--text_text", action="store_true", help="Turn on text->text weakening.")
    p.add_argument("--save_image", type=Path, default=None, help="--model: write stock | DeLeaker as a PNG.")
    add_common_options(p)
    return p


def deleaker_check(args: argparse.Namespace) -> None:
    for name in ("grid", "text_tokens", "size", "max_sequence_length"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.steps is not None and args.steps < 1:
        raise ValueError(f"--steps must be >= 1, got {args.steps}")
    if not args.model and args.entities:
        for e in args.entities:
            if not all(x.strip().isdigit() for x in e.split(",")):
                raise ValueError(f"--entities: {e!r} is not comma-separated token positions")
    _deleaker_config(args, 57).validate()
    resolve_dtype(args.dtype)


def _deleaker_config(args: argparse.Namespace, blocks: int) -> DeleakerConfig:
    config = DeleakerConfig(std_mul_text=args.std_mul_text, std_mul_image_image=args.std_mul_image_image,
                            k_strength=args.k_strength, do_text_text_weakening=args.text_text,
                            num_text_tokens=args.max_sequence_length if args.model else args.text_tokens,
                            **{field: not getattr(args, flag) for flag, field in _TOGGLES.items()})
    config = config.for_blocks(blocks)
    return dataclasses.replace(config, **{n: getattr(args, n) for n in _WINDOWS if getattr(args, n) is not None})


def deleaker_run(args: argparse.Namespace) -> dict[str, Any]:
    from posttrain.standalone.vision.deleaker_flux import (  # imports diffusers (the vision extra)
        DeleakerState,
        flux_sample,
        install_deleaker,
        leakage_summary,
        tiny_flux_inputs,
    )

    set_cpu_threads(args.num_threads)
    if args.model:
        return _deleaker_pipeline(args)
    steps, grid, t = args.steps or 8, (args.grid, args.grid), args.text_tokens
    entities = [[int(x) for x in e.split(",")] for e in (args.entities or ["1,2", "5"])]
    device = resolve_device(args.device)
    model = tiny_flux(num_layers=2, num_single_layers=2, seed=args.seed).to(device)
    g = torch.Generator().manual_seed(args.seed)
    noise, text, pooled, layout = tiny_flux_inputs(args.grid, t, len(entities), g)
    noise, text, pooled = noise.to(device), text.to(device), pooled.to(device)
    runs = {}
    with install_deleaker(model) as blocks:
        config = _deleaker_config(args, blocks)
        for name, enabled in (("stock", False), ("deleaker", True)):
            state = DeleakerState(config, entities, blocks_per_step=blocks, text_len=t, grid=grid, enabled=enabled,
                                  record=True)
            runs[name] = (flux_sample(model, noise, text, pooled, grid, steps, state), state)
    (x_stock, stock), (x_dl, dl) = runs["stock"], runs["deleaker"]
    return {"model": "embedded tiny Flux transformer (random init)", "device": str(device), "steps": steps,
            "blocks_per_step": blocks, "entities": entities, "config": dataclasses.asdict(config),
            "score_masks": "the latent layout: entity e's band of the grid (the rule never sees it)",
            **leakage_summary(stock, dl, layout),
            "relative_output_change": float((x_dl - x_stock).norm() / x_stock.norm())}


def _deleaker_pipeline(args: argparse.Namespace) -> dict[str, Any]:
    from diffusers import FluxPipeline

    from posttrain.standalone.vision.deleaker_flux import DeleakerState, install_deleaker, leakage_summary

    device = resolve_device(args.device)
    pipe = FluxPipeline.from_pretrained(args.model, dtype=resolve_dtype(args.dtype, device)).to(device)
    entities = [entity_token_indices(pipe.tokenizer_2, args.prompt, e) for e in (args.entities or ["cat", "dog"])]
    # image tokens: the VAE's spatial factor, then FLUX packs 2x2 latent patches into one token
    side = args.size // (pipe.vae_scale_factor * 2)
    grid, images, states = (side, side), {}, {}
    with install_deleaker(pipe.transformer) as blocks:
        config = _deleaker_config(args, blocks)
        for name, enabled in (("stock", False), ("deleaker", True)):
            state = DeleakerState(config, entities, blocks_per_step=blocks, grid=grid, enabled=enabled, record=True)
            images[name] = pipe(args.prompt, height=args.size, width=args.size, guidance_scale=args.guidance,
                                num_inference_steps=args.steps or 20, max_sequence_length=args.max_sequence_length,
                                generator=torch.Generator(device).manual_seed(args.seed),
                                joint_attention_kwargs={"deleaker_state": state}).images[0]
            states[name] = state
    if args.save_image:
        from PIL import Image

        strip = Image.new("RGB", (2 * args.size, args.size))
        strip.paste(images["stock"], (0, 0))
        strip.paste(images["deleaker"], (args.size, 0))
        strip.save(args.save_image)
    # Scoring masks the edited run's rule did not choose: where the stock run's attention put each entity.
    # They come from the same extraction rule on another run, so they overlap the edited run's masks; the
    # miniature's scene layout (benchmarks/vision.md) is the cleaner control.
    leakage = (leakage_summary(states["stock"], states["deleaker"], states["stock"].history_masks())
               if config.use_history else {"leakage": "not scored: --no_history leaves no stock masks"})
    return {"model": args.model, "prompt": args.prompt, "entity_tokens": entities, "blocks_per_step": blocks,
            "dtype": str(pipe.transformer.dtype).removeprefix("torch."),
            "score_masks": "the stock run's end-of-history entity masks", **leakage,
            "saved_image": str(args.save_image) if args.save_image else None}


def fga_parser() -> argparse.ArgumentParser:
    from posttrain.standalone.vision import fga as module

    p = CommandParser(prog="posttrain vision fga", description=module.__doc__)
    p.add_argument("--model", default=None, help="A CLIP checkpoint with its tokenizer; default: a random-init "
                   "tiny CLIP on generated coloured shapes (12 classes).")
    p.add_argument("--images", default=None, help="--model: test images, one sub-folder per class (its name).")
    p.add_argument("--train_images", default=None, help="--model: few-shot images for SAPT, same layout.")
    p.add_argument("--prompt", default="a photo of a", help="--model: the hand prompt (the context's init).")
    p.add_argument("--examples", type=int, default=24, help="Tiny model: generated test images.")
    p.add_argument("--shift", default="noise", help="Tiny model: shift of the test images (noise, blur, colour).")
    p.add_argument("--severity", type=float, default=0.5, help="Tiny model: shift strength in [0, 1].")
    p.add_argument("--train_steps", type=int, default=20, help="SAPT steps on the few-shot images.")
    p.add_argument("--lr", type=float, default=2e-3, help="SAPT's AdamW learning rate.")
    p.add_argument("--rho", type=float, default=0.05, help="SAPT's SAM radius (ours; not in the paper).")
    p.add_argument("--rho_prime", type=float, default=0.5, help="STSS perturbation radius (the paper's).")
    p.add_argument("--lam", type=float, default=1.0, help="Sharpness weight, SAPT and STSS (the paper's).")
    p.add_argument("--perturbations", type=int, default=8, help="STSS's R.")
    p.add_argument("--n_views", type=int, default=64, help="Views per image (63 augmentations + original).")
    p.add_argument("--views_kept", type=int, default=6, help="Views kept by STSS and TPT.")
    add_common_options(p)
    return p


def fga_check(args: argparse.Namespace) -> None:
    FGAConfig(rho_prime=args.rho_prime, lam=args.lam, perturbations=args.perturbations, n_views=args.n_views,
              views_kept=args.views_kept).validate()
    if args.shift not in SHIFTS:
        raise ValueError(f"--shift must be one of {SHIFTS}, got {args.shift!r}")
    if args.model and not args.images:
        raise ValueError("--model needs --images (a folder with one sub-folder of images per class)")
    if args.examples < 1 or args.train_steps < 0:
        raise ValueError("--examples must be >= 1 and --train_steps >= 0")
    resolve_dtype(args.dtype)


def _folder(path: str, size: int) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    classes = sorted(d.name for d in Path(path).iterdir() if d.is_dir())
    if not classes:
        raise ValueError(f"{path}: no class sub-folders")
    images, labels = [], []
    for k, name in enumerate(classes):
        for f in sorted((Path(path) / name).iterdir()):
            images.append(load_image(str(f), size))
            labels.append(k)
    return torch.cat(images), torch.tensor(labels), classes


def fga_run(args: argparse.Namespace) -> dict[str, Any]:
    set_cpu_threads(args.num_threads)
    device = resolve_device(args.device)
    g = torch.Generator().manual_seed(args.seed)
    config = FGAConfig(rho_prime=args.rho_prime, lam=args.lam, perturbations=args.perturbations,
                       n_views=args.n_views, views_kept=args.views_kept)
    if args.model:
        from transformers import AutoTokenizer, CLIPModel
        from transformers.utils.constants import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD

        clip = CLIPModel.from_pretrained(args.model, dtype=resolve_dtype(args.dtype, device)).to(device)
        tok = AutoTokenizer.from_pretrained(args.model)
        size = clip.config.vision_config.image_size
        test, labels, names = _folder(args.images, size)
        words = [tok(n.replace("_", " "), add_special_tokens=False)["input_ids"] for n in names]
        learner = PromptLearner(clip, words, tok(args.prompt, add_special_tokens=False)["input_ids"],
                                tok.bos_token_id, tok.eos_token_id, tok.pad_token_id or 0)
        mean, std = torch.tensor(OPENAI_CLIP_MEAN).view(3, 1, 1), torch.tensor(OPENAI_CLIP_STD).view(3, 1, 1)
        train = _folder(args.train_images, size)[:2] if args.train_images else None
    else:
        vocab = 64
        names = [f"{c} {s}" for c in COLOURS for s in SHAPES]
        words = [[FIRST_WORD_ID + c, FIRST_WORD_ID + len(COLOURS) + s] for c in range(len(COLOURS))
                 for s in range(len(SHAPES))]
        learner = PromptLearner(tiny_clip(vocab_size=vocab, seed=args.seed).to(device), words,
                                [FIRST_WORD_ID + 20 + i for i in range(4)], TOKENS["bos"], vocab - 1)
        mean, std = torch.full((3, 1, 1), 0.5), torch.full((3, 1, 1), 0.5)
        images, shape_ids, colour_ids = shapes_dataset(args.examples + 16 * len(names), 32, g)
        all_labels = colour_ids * len(SHAPES) + shape_ids
        train = (images[args.examples:], all_labels[args.examples:])
        test, labels = shift(images[:args.examples], args.shift, args.severity, g), all_labels[:args.examples]
    dtype = learner.ctx.dtype

    def norm(x: torch.Tensor) -> torch.Tensor:
        return ((x - mean.to(x.device)) / std.to(x.device)).to(device, dtype)

    feats = view_features(learner, test, config.n_views, norm, g)
    hand = learner.ctx.detach().clone()
    results = {"zero_shot": evaluate_views(learner, feats, labels, config, "zero-shot")}
    results["tpt"] = evaluate_views(learner, feats, labels, config, "tpt")
    results["stss_hand_prompt"] = evaluate_views(learner, feats, labels, config, "stss",
                                                 perturbed_classes(learner, config, g))
    if train is not None and args.train_steps > 0:
        train_prompt(learner, norm(train[0]), train[1].to(device), steps=args.train_steps, lr=args.lr, rho=args.rho,
                     lam=args.lam, generator=g)
        results["sapt"] = evaluate_views(learner, feats, labels, config, "zero-shot")
        results["fga"] = evaluate_views(learner, feats, labels, config, "stss", perturbed_classes(learner, config, g))
        learner.ctx.data.copy_(hand)
    return {"model": args.model or "embedded tiny CLIP (random init)", "device": str(device),
            "dtype": str(dtype).removeprefix("torch."), "classes": names, "test_images": len(labels),
            "shift": None if args.model else {"kind": args.shift, "severity": args.severity},
            "config": dataclasses.asdict(config), "results": {k: {"accuracy": v} for k, v in results.items()}}
