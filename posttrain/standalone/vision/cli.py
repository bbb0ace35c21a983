"""``posttrain vision attwarp|deleaker|fga``: the auxiliary vision methods (ICLR 2026) as commands.

    posttrain vision attwarp       # AttWarp on a random-init tiny Llava and generated small-object scenes
    posttrain vision deleaker      # DeLeaker on a random-init tiny Flux transformer, two entities
    posttrain vision fga           # FGA vs TPT vs zero-shot on a random-init tiny CLIP and generated shapes
    posttrain vision attwarp --model llava-hf/llava-1.5-7b-hf --image photo.jpg --question "What is written?"

Every subcommand runs with no other argument on an embedded default (config-built random-init models: they
show the mechanics, the numbers are not a claim; ``benchmarks/vision.md`` has trained miniatures) and takes
``--model`` for a real checkpoint. Each prints a JSON summary (``--output`` also writes it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import torch

from posttrain.common.cli_help import CommandParser, summary_command
from posttrain.dist import set_cpu_threads
from posttrain.standalone.vision.attwarp import AttWarpConfig, attwarp, next_token_logits
from posttrain.standalone.vision.cli_methods import (
    add_common_options,
    deleaker_check,
    deleaker_parser,
    deleaker_run,
    fga_check,
    fga_parser,
    fga_run,
    load_image,
)
from posttrain.standalone.vision.shapes import small_object_scenes
from posttrain.standalone.vision.tiny import FIRST_WORD_ID, resolve_device, resolve_dtype, tiny_llava
from posttrain.standalone.vision.vlm import ProcessorPrompter, TensorPrompter
from posttrain.standalone.vision.warp import Warp

SUBCOMMANDS = {"attwarp": "AttWarp / AttWarp-Chain: attention-guided rectilinear image warping for a multimodal LLM",
               "deleaker": "DeLeaker: attention reweighting against semantic leakage in Flux",
               "fga": "FGA: flatness-guided test-time adaptation of CLIP (with TPT as baseline)"}


def attwarp_parser() -> argparse.ArgumentParser:
    from posttrain.standalone.vision import attwarp as module

    p = CommandParser(prog="posttrain vision attwarp", description=module.__doc__)
    p.add_argument("--model", default=None, help="Llava or Qwen-VL checkpoint with its processor; default: a "
                   "random-init tiny Llava (32 px, 8x8 image tokens).")
    p.add_argument("--image", default=None, help="Image file; default: generated 128 px small-object scenes.")
    p.add_argument("--question", default="What colour is the small coloured square?", help="The query (--model).")
    p.add_argument("--examples", type=int, default=4, help="Generated scenes (without --image).")
    p.add_argument("--layers", type=int, nargs="+", default=None, help="Tapped decoder layers; default 20 with "
                   "--model (LLaVA-1.5's), the last layer on the tiny model.")
    p.add_argument("--recipe", default="last_token", choices=["last_token", "relative"], help="Map recipe.")
    p.add_argument("--generic_question", default="Write a general description of the image.",
                   help="The relative recipe's generic prompt (--model).")
    p.add_argument("--max_new_tokens", type=int, default=None, help="Greedy tokens whose attention is averaged; "
                   "default 20 with --model (the code's), 1 on the tiny model.")
    p.add_argument("--enhance_coe", type=float, default=10.0, help="Post-processing sigmoid sharpness (0: off).")
    p.add_argument("--blur", type=int, default=3, help="Post-processing box blur (odd).")
    p.add_argument("--transform", default="identity", help="Map transform: identity, square, sqrt, exp, log.")
    p.add_argument("--floor", type=float, default=0.0, help="Uniform share mixed into the marginals.")
    p.add_argument("--max_rounds", type=int, default=1, help="1 = AttWarp; more = AttWarp-Chain's cap.")
    p.add_argument("--kl_eps", type=float, default=0.05, help="AttWarp-Chain's KL stopping threshold.")
    p.add_argument("--out_size", type=int, default=None, help="Warped image side; default: the tiny model's input "
                   "(32), 336 with --model (LLaVA-1.5's).")
    p.add_argument("--answer_tokens", type=int, default=16, help="Tokens of each answer (--model).")
    p.add_argument("--save_image", type=Path, default=None, help="Write original | plain | warped as a PNG.")
    add_common_options(p)
    return p


def _attwarp_check(args: argparse.Namespace) -> None:
    layers = args.layers
    args.layers = layers or [-1]
    _config(args).validate()
    args.layers = layers
    for name in ("examples", "answer_tokens"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.out_size is not None and args.out_size < 2:
        raise ValueError(f"--out_size must be >= 2, got {args.out_size}")
    resolve_dtype(args.dtype)


def _config(args: argparse.Namespace) -> Any:
    return AttWarpConfig(layers=tuple(args.layers), recipe=args.recipe, max_new_tokens=args.max_new_tokens or 1,
                         enhance_coe=args.enhance_coe, blur=args.blur, transform=args.transform, floor=args.floor,
                         max_rounds=args.max_rounds, kl_eps=args.kl_eps)


def attwarp_run(args: argparse.Namespace) -> dict[str, Any]:
    set_cpu_threads(args.num_threads)
    device = resolve_device(args.device)
    g = torch.Generator().manual_seed(args.seed)
    if args.model:
        from transformers import AutoModelForImageTextToText, AutoProcessor

        processor = AutoProcessor.from_pretrained(args.model)
        model = AutoModelForImageTextToText.from_pretrained(args.model,
                                                            dtype=resolve_dtype(args.dtype, device)).to(device)
        args.layers, args.max_new_tokens = args.layers or [20], args.max_new_tokens or 20
        size = args.out_size or 336
        images = load_image(args.image, 0) if args.image else small_object_scenes(args.examples, 4 * size, 24, g)[0]
        n = images.shape[0]
        prompter = ProcessorPrompter(processor, [args.question] * n)
        generic = ProcessorPrompter(processor, [args.generic_question] * n)
    else:
        model = tiny_llava(image_size=32, patch_size=4, seed=args.seed).to(device)
        args.layers, args.max_new_tokens = args.layers or [-1], args.max_new_tokens or 1
        size = args.out_size or 32
        images = load_image(args.image, 128) if args.image else small_object_scenes(args.examples, 128, 8, g)[0]
        n = images.shape[0]
        prompter = TensorPrompter(model, [[FIRST_WORD_ID + 10]] * n)
        generic = TensorPrompter(model, [[FIRST_WORD_ID + 11]] * n)
    config = _config(args)
    result = attwarp(model, prompter, images, (size, size), config, generic)
    plain = Warp.identity(images.shape[0], tuple(images.shape[-2:]), (size, size)).apply(images)
    if args.model:
        answers = {k: _generate(model, processor, prompter(v), args.answer_tokens)
                   for k, v in (("plain", plain), ("warped", result.warped))}
    else:
        answers = {k: next_token_logits(model, prompter(v)).argmax(dim=-1).tolist()
                   for k, v in (("plain", plain), ("warped", result.warped))}
    grid = result.maps[0].shape[-2:]
    peak = result.maps[0].flatten(1).argmax(dim=1)
    centre = torch.stack([(peak % grid[1] + 0.5) / grid[1] * images.shape[-1],
                          (peak // grid[1] + 0.5) / grid[0] * images.shape[-2]], dim=-1).unsqueeze(1).double()
    step = torch.tensor([[[0.5, 0.5]]], dtype=torch.float64)
    magnification = (result.warp.to_warped(centre + step) - result.warp.to_warped(centre - step))[:, 0]
    if args.save_image:
        _save_strip(images, plain, result.warped, args.save_image)
    return {"model": args.model or "embedded tiny Llava (random init)", "source_hw": list(images.shape[-2:]),
            "out_hw": [size, size], "map_grid": list(grid), "layers": list(config.layers), "recipe": config.recipe,
            "rounds": result.rounds.tolist(), "kl_per_round": [k.tolist() for k in result.kls],
            "map_peak_source_xy": centre[:, 0].tolist(),
            "magnification_at_peak_xy": magnification.tolist(),
            "plain_resize_share_xy": [size / images.shape[-1], size / images.shape[-2]],
            "answers": answers, "saved_image": str(args.save_image) if args.save_image else None}


def _generate(model: Any, processor: Any, inputs: dict[str, Any], tokens: int) -> list[str]:
    device = next(model.parameters()).device
    inputs = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=tokens, do_sample=False)
    return processor.batch_decode(out[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True)


def _save_strip(images: torch.Tensor, plain: torch.Tensor, warped: torch.Tensor, path: Path) -> None:
    from PIL import Image

    up = [torch.nn.functional.interpolate(x, size=images.shape[-2:], mode="nearest") for x in (plain, warped)]
    rows = torch.cat([torch.cat([images[i], up[0][i], up[1][i]], dim=-1) for i in range(images.shape[0])], dim=-2)
    arr = (rows.clamp(0, 1).permute(1, 2, 0).numpy() * 255).round().astype("uint8")
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr).save(path)


def vision_main(argv: list[str]) -> int:
    """``posttrain vision <method> ...``."""
    commands = {"attwarp": (attwarp_parser, _attwarp_check, attwarp_run),
                "deleaker": (deleaker_parser, deleaker_check, deleaker_run),
                "fga": (fga_parser, fga_check, fga_run)}
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in commands:
        lines = ["usage: posttrain vision <method> [options]   (posttrain vision <method> --help)", "", "methods:"]
        lines += [f"  {name:<10}{desc}" for name, desc in SUBCOMMANDS.items()]
        print("\n".join(lines), file=sys.stdout if argv and argv[0] in ("-h", "--help") else sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    parser, check, run = commands[argv[0]]
    return summary_command(argv[1:], parser(), check, run)
