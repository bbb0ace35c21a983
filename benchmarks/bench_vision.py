"""Miniatures of the three vision methods (ICLR 2026) on tiny models trained here for minutes, over seeds.

    OMP_NUM_THREADS=1 python benchmarks/bench_vision.py attwarp --seeds 0 1 2
    OMP_NUM_THREADS=1 python benchmarks/bench_vision.py fga --seeds 0 1 2
    OMP_NUM_THREADS=1 python benchmarks/bench_vision.py deleaker --seeds 0 1 2

- ``attwarp`` ("Constructive Distortion", AttWarp): a tiny Llava (32 px input, 8 x 8 image tokens) trained to
  name the colour of the one coloured square among grey ones, on 128 px scenes area-resized to 32 px, with
  object sizes 4-24 px; tested on ``--object_px`` objects. Accuracy (and the share of inputs where the object is
  gone) of the plain area resize, a uniform-map warp (no attention: the control), AttWarp (the model's own
  layer-1 map), AttWarp-Chain (up to 3 rounds) and an oracle warp (a map peaked on the true object); all warps
  resample area-exactly, and the uniform and AttWarp warps are also point-sampled as the released code does.
- ``fga`` (FGA): a tiny CLIP trained on coloured shapes (12 classes) with three caption templates; then CoOp and
  SAPT context learned 16-shot on clean images; tested under noise, blur and a colour cast: zero-shot (hand
  prompt), CoOp, TPT on CoOp, STSS on CoOp, and FGA (STSS on SAPT); the controls that attribute a gain to
  sharpness: all views averaged without selection, STSS at rho' = 0 (entropy-only selection), a rho' sweep.
- ``deleaker`` (DeLeaker): a random-init tiny Flux transformer (2 double + 2 single blocks) sampled for 20 Euler
  steps from structured latents (two bands, one per entity), two entities; the cross-entity attention mass
  without and with reweighting, scored with the bands as masks (not the masks the rule edits).

Writes benchmarks/results/vision_<method>.json (command, settings, per-seed numbers) and PNG pictures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from posttrain.common.cli_help import CommandParser
from posttrain.common.seeds import derive_seed
from posttrain.standalone.vision.attwarp import AttWarpConfig, attwarp, attwarp_chain, next_token_logits
from posttrain.standalone.vision.shapes import COLOURS, small_object_scenes
from posttrain.standalone.vision.tiny import FIRST_WORD_ID, tiny_llava
from posttrain.standalone.vision.vlm import TensorPrompter
from posttrain.standalone.vision.warp import Warp

RESULTS = REPO / "benchmarks" / "results"
QUESTION = [FIRST_WORD_ID + 10]  # "colour?"
ANSWERS = [FIRST_WORD_ID + c for c in range(len(COLOURS))]
CLUTTER = 3  # grey distractor squares per scene


def _mean_std(values: list[float]) -> dict[str, float | int | None]:
    """Mean and sample std over seeds, and how many seeds had a value (a score is None without masks)."""
    return {"mean": statistics.mean(values) if values else None,
            "std": statistics.stdev(values) if len(values) > 1 else 0.0, "seeds": len(values)}


def _downsample(images: torch.Tensor, size: int) -> torch.Tensor:
    """The plain resize: area-exact, the same resampler as the warps (a uniform-map warp equals it)."""
    return Warp.identity(images.shape[0], tuple(images.shape[-2:]), (size, size)).apply(images)


def _object_lost(images: torch.Tensor) -> float:
    """Share of model inputs where the coloured object is gone: peak saturation (max - min channel) < 0.05.
    Background and clutter are grey (equal channels), so saturation can only come from the object."""
    saturation = images.max(dim=1).values - images.min(dim=1).values
    return float((saturation.flatten(1).max(dim=1).values < 0.05).float().mean())


def _vlm_accuracy(model, images: torch.Tensor, labels: torch.Tensor) -> float:
    inputs = TensorPrompter(model, [QUESTION] * images.shape[0])(images)
    pred = next_token_logits(model, inputs)[:, ANSWERS].argmax(dim=-1)
    return float((pred == labels).float().mean())


def train_vlm(seed: int, steps: int, src: int, size: int) -> tuple[torch.nn.Module, list[float]]:
    """The tiny Llava trained on plainly downsampled scenes with object sizes 4-24 px (of ``src``)."""
    model = tiny_llava(image_size=size, patch_size=4, hidden_size=64, num_layers=2, vision_layers=2, seed=seed)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.0)
    g = torch.Generator().manual_seed(derive_seed(seed, "vlm_train"))
    losses = []
    for _ in range(steps):
        px = float(torch.empty(1).uniform_(4, 24, generator=g))
        images, colours, _ = small_object_scenes(32, src, px, g, clutter=CLUTTER)
        inputs = TensorPrompter(model, [QUESTION] * 32)(_downsample(images, size))
        logits = model(**inputs).logits[:, -1]
        loss = F.cross_entropy(logits, torch.tensor(ANSWERS)[colours])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return model.eval(), losses


def _oracle_map(centres: torch.Tensor, src: int, grid: int) -> torch.Tensor:
    """A token-grid map peaked on the true object (a 3 x 3 token bump): AttWarp with a perfect map."""
    m = torch.full((centres.shape[0], grid, grid), 1e-3)
    cell = (centres / src * grid).long().clamp(0, grid - 1)
    for b, (x, y) in enumerate(cell.tolist()):
        m[b, max(y - 1, 0):y + 2, max(x - 1, 0):x + 2] = 1.0
    return m / m.sum(dim=(1, 2), keepdim=True)


def _uniform_map(batch: int, grid: int) -> torch.Tensor:
    return torch.full((batch, grid, grid), 1.0 / grid ** 2)


def run_attwarp(args: argparse.Namespace) -> dict:
    src, size, n_test, grid = 128, 32, args.test_examples, 32 // 4
    per_seed, pictures = [], None
    for seed in args.seeds:
        t0 = time.time()
        model, losses = train_vlm(seed, args.train_steps, src, size)
        g = torch.Generator().manual_seed(derive_seed(seed, "vlm_eval"))
        images, colours, centres = small_object_scenes(n_test, src, args.object_px, g, clutter=CLUTTER)
        prompter = TensorPrompter(model, [QUESTION] * n_test)
        config = AttWarpConfig(layers=(1,), max_new_tokens=1)
        plain = _downsample(images, size)
        warped = attwarp(model, prompter, images, (size, size), config)
        chain = attwarp(model, prompter, images, (size, size), AttWarpConfig(layers=(1,), max_new_tokens=1,
                                                                             max_rounds=3))
        uniform = attwarp_chain(images, lambda v: _uniform_map(v.shape[0], grid), (size, size), config)
        oracle_map = _oracle_map(centres, src, grid)
        oracle = attwarp_chain(images, lambda _v, m=oracle_map: m, (size, size), config)
        inputs = {"base": plain, "uniform_warp": uniform.warped, "attwarp": warped.warped, "chain": chain.warped,
                  "oracle_warp": oracle.warped,
                  "uniform_warp_point_sampled": uniform.warp.apply(images, mode="bilinear"),
                  "attwarp_point_sampled": warped.warp.apply(images, mode="bilinear")}
        peak = warped.maps[0].flatten(1).argmax(dim=1)
        true_cell = (centres / src * grid).long().clamp(0, grid - 1)
        hit = (peak == true_cell[:, 1] * grid + true_cell[:, 0]).float().mean()
        row = {"seed": seed, "train_loss_last50": statistics.mean(losses[-50:]),
               "uniform_warp_equals_plain_max_abs": float((uniform.warped - plain).abs().max())}
        row.update({f"accuracy_{k}": _vlm_accuracy(model, v, colours) for k, v in inputs.items()})
        row.update({f"object_lost_{k}": _object_lost(v) for k, v in inputs.items()})
        row.update({"chain_rounds_mean": float(chain.rounds.float().mean()), "map_peak_on_object": float(hit),
                    "seconds": time.time() - t0})
        print(json.dumps(row), flush=True)
        per_seed.append(row)
        if pictures is None:
            pictures = (images[:4], plain[:4], warped.warped[:4], warped.maps[0][:4])
    keys = [k for k in per_seed[0] if k.startswith(("accuracy", "object_lost")) or k == "map_peak_on_object"]
    summary = {k: _mean_std([r[k] for r in per_seed]) for k in keys}
    _plot_attwarp(pictures, RESULTS / "vision_attwarp.png")
    return {"settings": {"source_px": src, "input_px": size, "object_px": args.object_px,
                         "train_steps": args.train_steps, "test_examples": n_test, "layers": [1],
                         "resampling": "area-exact (Warp.apply); *_point_sampled: the released code's bilinear "
                                       "point sampling of the same warp",
                         "object_lost": "peak saturation of the model input < 0.05"},
            "per_seed": per_seed, "summary": summary}


def _plot_attwarp(pictures, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    originals, plain, warped, maps = pictures
    fig, axes = plt.subplots(4, 4, figsize=(8, 8))
    for i in range(4):
        for j, (img, title) in enumerate(((originals[i], "original 128 px"), (plain[i], "plain resize 32 px"),
                                          (maps[i], "layer-1 map (8x8)"), (warped[i], "AttWarp 32 px (area)"))):
            ax = axes[i, j]
            ax.imshow(img.permute(1, 2, 0).numpy() if img.dim() == 3 and img.shape[0] == 3 else img.numpy(),
                      interpolation="nearest", cmap=None if img.dim() == 3 and img.shape[0] == 3 else "magma")
            ax.set_xticks([])
            ax.set_yticks([])
            if i == 0:
                ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


FGA_TEMPLATES = ([20, 21, 22, 23], [24, 25, 26, 27], [28, 29, 30, 31])
FGA_SHIFTS = {"noise": 0.6, "blur": 0.6, "colour": 0.8}


def _fga_classes() -> list[list[int]]:
    from posttrain.standalone.vision.shapes import SHAPES

    return [[FIRST_WORD_ID + c, FIRST_WORD_ID + len(COLOURS) + s] for c in range(len(COLOURS))
            for s in range(len(SHAPES))]


def train_clip(seed: int, steps: int):
    """The tiny CLIP trained on coloured shapes: image -> 12 class captions, one of 3 templates per step."""
    from posttrain.standalone.vision.fga import PromptLearner
    from posttrain.standalone.vision.shapes import SHAPES, shapes_dataset
    from posttrain.standalone.vision.tiny import TOKENS, tiny_clip

    clip = tiny_clip(vocab_size=64, hidden_size=64, projection_dim=64, seed=seed)
    learners = [PromptLearner(clip, _fga_classes(), t, TOKENS["bos"], 63) for t in FGA_TEMPLATES]
    for p in clip.parameters():
        p.requires_grad_(True)
    clip.train()
    opt = torch.optim.AdamW(clip.parameters(), lr=1e-3, weight_decay=0.0)
    g = torch.Generator().manual_seed(derive_seed(seed, "clip_train"))
    for step in range(steps):
        images, shape_ids, colour_ids = shapes_dataset(64, 32, g)
        learner = learners[step % len(learners)]
        logits = learner.logits(learner.image_features((images - 0.5) / 0.5), learner.class_features())
        loss = F.cross_entropy(logits, colour_ids * len(SHAPES) + shape_ids)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    clip.eval()
    for p in clip.parameters():
        p.requires_grad_(False)
    return clip, loss.item()


FGA_RHO_PRIMES = (0.0, 0.1, 0.25, 0.5, 1.0, 2.0)
"""STSS's perturbation radius rho' swept on FGA's (SAPT) context; 0.5 is the paper's (FGA), 0 = entropy alone."""


def run_fga(args: argparse.Namespace) -> dict:
    from posttrain.standalone.vision.fga import (
        FGAConfig,
        PromptLearner,
        evaluate_views,
        perturbed_classes,
        train_prompt,
        view_features,
    )
    from posttrain.standalone.vision.shapes import SHAPES, shapes_dataset, shift
    from posttrain.standalone.vision.tiny import TOKENS

    config = FGAConfig()
    per_seed = []
    for seed in args.seeds:
        t0 = time.time()
        clip, clip_loss = train_clip(seed, args.train_steps)
        g = torch.Generator().manual_seed(derive_seed(seed, "clip_eval"))
        images, shape_ids, colour_ids = shapes_dataset(16 * 12 + args.test_examples, 32, g)
        labels = colour_ids * len(SHAPES) + shape_ids
        shots, shot_labels = images[:16 * 12], labels[:16 * 12]
        test, test_labels = images[16 * 12:], labels[16 * 12:]

        def norm(x: torch.Tensor) -> torch.Tensor:
            return (x - 0.5) / 0.5
        contexts = {}
        for name, rho in (("coop", 0.0), ("sapt", 0.05)):
            learner = PromptLearner(clip, _fga_classes(), FGA_TEMPLATES[0], TOKENS["bos"], 63)
            train_prompt(learner, norm(shots), shot_labels, steps=100, lr=5e-3, rho=rho,
                         generator=torch.Generator().manual_seed(seed))
            contexts[name] = learner
        hand = PromptLearner(clip, _fga_classes(), FGA_TEMPLATES[0], TOKENS["bos"], 63)
        coop, sapt = contexts["coop"], contexts["sapt"]

        def stss(learner: PromptLearner, rho_prime: float) -> tuple:
            cfg = dataclasses.replace(config, rho_prime=rho_prime)
            return learner, "stss", perturbed_classes(learner, cfg, torch.Generator().manual_seed(1)), cfg

        arms = {"zero_shot": (hand, "zero-shot", None, config), "coop": (coop, "zero-shot", None, config),
                "tpt_coop": (coop, "tpt", None, config), "stss_coop": stss(coop, config.rho_prime),
                "sapt": (sapt, "zero-shot", None, config), "fga": stss(sapt, config.rho_prime),
                "all_views_coop": (coop, "all-views", None, config),
                "all_views_sapt": (sapt, "all-views", None, config), "stss_coop_rho0": stss(coop, 0.0),
                **{f"fga_rho{r:g}": stss(sapt, r) for r in FGA_RHO_PRIMES if r != config.rho_prime}}
        row = {"seed": seed, "clip_train_loss_last": clip_loss}
        for kind, severity in {"clean": 0.0, **FGA_SHIFTS}.items():
            shifted = test if kind == "clean" else shift(test, kind, severity, torch.Generator().manual_seed(seed))
            feats = view_features(hand, shifted, config.n_views, norm, torch.Generator().manual_seed(derive_seed(seed, "views")))
            for arm, (learner, method, classes, cfg) in arms.items():
                row[f"{kind}/{arm}"] = evaluate_views(learner, feats, test_labels, cfg, method, classes)
        row["seconds"] = time.time() - t0
        print(json.dumps(row), flush=True)
        per_seed.append(row)
    keys = [k for k in per_seed[0] if "/" in k]
    summary = {k: _mean_std([r[k] for r in per_seed]) for k in keys}
    _plot_fga(summary, RESULTS / "vision_fga.png")
    return {"settings": {"clip_steps": args.train_steps, "shots_per_class": 16, "prompt_steps": 100,
                         "test_examples": args.test_examples, "shifts": FGA_SHIFTS, "fga": vars(config),
                         "rho_prime_sweep": list(FGA_RHO_PRIMES),
                         "arms": "fga = STSS on SAPT at rho' 0.5; fga_rho<r> = the same at rho' r (rho' 0: entropy "
                                 "alone); all_views_* = mean of all 64 views' probabilities (no selection)"},
            "per_seed": per_seed, "summary": summary}


def _plot_fga(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = ["clean", *FGA_SHIFTS]
    arms = ["zero_shot", "coop", "tpt_coop", "all_views_sapt", "sapt", "fga"]
    fig, (ax, sweep) = plt.subplots(1, 2, figsize=(13, 3.8), gridspec_kw={"width_ratios": [3, 2]})
    width = 0.8 / len(arms)
    for i, arm in enumerate(arms):
        means = [summary[f"{k}/{arm}"]["mean"] for k in kinds]
        stds = [summary[f"{k}/{arm}"]["std"] for k in kinds]
        ax.bar([x + i * width for x in range(len(kinds))], means, width, yerr=stds, label=arm)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(kinds))], kinds)
    ax.set_ylabel("top-1 accuracy (12 classes)")
    ax.legend(fontsize=7, ncol=3)
    for k in kinds:
        names = [("fga" if r == 0.5 else f"fga_rho{r:g}") for r in FGA_RHO_PRIMES]
        sweep.errorbar(FGA_RHO_PRIMES, [summary[f"{k}/{n}"]["mean"] for n in names],
                       yerr=[summary[f"{k}/{n}"]["std"] for n in names], marker="o", capsize=2, label=k)
    sweep.set_xscale("symlog", linthresh=0.1)
    sweep.set_xlabel("STSS rho' (on the SAPT context; 0 = entropy only)")
    sweep.set_ylabel("top-1 accuracy")
    sweep.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_deleaker(args: argparse.Namespace) -> dict:
    from posttrain.standalone.vision.deleaker import DeleakerConfig, leakage_score
    from posttrain.standalone.vision.deleaker_flux import (
        DeleakerState,
        flux_sample,
        install_deleaker,
        leakage_summary,
        tiny_flux_inputs,
    )
    from posttrain.standalone.vision.tiny import tiny_flux

    side, t, steps, entities = 16, 16, 20, [[2, 3], [9, 10]]
    per_seed, curves = [], {}
    for seed in args.seeds:
        model = tiny_flux(num_layers=2, num_single_layers=2, seed=seed)
        g = torch.Generator().manual_seed(derive_seed(seed, "flux_inputs"))
        noise, text, pooled, layout = tiny_flux_inputs(side, t, len(entities), g)
        row = {"seed": seed}
        for arm, smoothing in (("default", True), ("no_smoothing", False)):
            runs = {}
            with install_deleaker(model) as blocks:
                config = dataclasses.replace(DeleakerConfig(num_text_tokens=t), do_smoothing=smoothing)
                config = config.for_blocks(blocks)
                for name, enabled in (("stock", False), ("deleaker", True)):
                    state = DeleakerState(config, entities, blocks_per_step=blocks, text_len=t, grid=(side, side),
                                          enabled=enabled, record=True)
                    runs[name] = (flux_sample(model, noise, text, pooled, (side, side), steps, state), state)
            (x0, stock), (x1, dl) = runs["stock"], runs["deleaker"]
            row.update({f"{arm}/{k}": v for k, v in leakage_summary(stock, dl, layout).items()})
            row[f"{arm}/relative_output_change"] = float((x1 - x0).norm() / x0.norm())
            if arm == "no_smoothing" and not curves:
                edited = [c for c in dl.calls if c.edited]
                window = {c.block_step for c in edited}
                curves = {"stock": [leakage_score(c.natural, layout) for c in stock.calls if c.block_step in window],
                          "deleaker, unedited": [leakage_score(c.natural, layout) for c in edited],
                          "deleaker, edited": [leakage_score(c.used, layout) for c in edited]}
        print(json.dumps(row), flush=True)
        per_seed.append(row)
    keys = [k for k in per_seed[0] if "/" in k]
    summary = {k: _mean_std([r[k] for r in per_seed if r[k] is not None]) for k in keys}
    _plot_curves(curves, RESULTS / "vision_deleaker.png")
    return {"settings": {"grid": side, "text_tokens": t, "steps": steps, "entities": entities,
                         "blocks": "2 double + 2 single",
                         "config": "FLUX.1 preset scaled by for_blocks(4); no_smoothing: do_smoothing off",
                         "score_masks": "the latent layout: entity e's vertical band of the grid, which starts "
                                        "from its own base vector (the rule never sees these masks)"},
            "per_seed": per_seed, "summary": summary}


def _plot_curves(curves: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3))
    for name, values in curves.items():
        ax.plot(values, label=name)
    ax.set_xlabel("edited attention call (seed 0)")
    ax.set_ylabel("cross-entity image->text mass\n(layout masks)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("method", choices=["attwarp", "fga", "deleaker"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--train_steps", type=int, default=600, help="attwarp: VLM steps; fga: CLIP steps.")
    p.add_argument("--test_examples", type=int, default=512)
    p.add_argument("--object_px", type=float, default=6.0, help="attwarp: test object side, source pixels.")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    t0 = time.time()
    result = {"attwarp": run_attwarp, "fga": run_fga, "deleaker": run_deleaker}[args.method](args)
    result["command"] = "OMP_NUM_THREADS=1 python benchmarks/bench_vision.py " + " ".join(sys.argv[1:])
    result["wall_seconds"] = time.time() - t0
    out = RESULTS / f"vision_{args.method}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["summary"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
