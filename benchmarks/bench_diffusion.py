"""Diffusion throughput: our sampler and ELBO vs straightforward implementations in the papers' style.

Peers (written here in the style of ESPO's / d1's trainer code, which is LLaDA's ``generate``):

- sampler: one full forward per denoising step over the batch, full-sequence logits, float64 Gumbel noise
  ``exp(logits) / (-log u)^T`` and float64 softmax over every position, a per-row ``topk`` loop, and
  every block decoded even after EOS;
- ELBO: ESPO's ``_get_elbo_mc``: for each of the M Monte Carlo samples, one forward for the masked pass
  and one for the coupled complementary pass, full-sequence logits, cross-entropy on the masked tokens.

Ours: ``DiffusionRolloutEngine`` (logits only for the current block, vectorised commit, rows stop after
EOS) and ``posttrain.algos.elbo.sequence_elbo`` (B rows per forward like the peer -- or, as ``ours_one_forward``,
all 2M passes in one batched forward -- rows with nothing masked skipped, vocabulary softmax only at
masked positions). Both sides use the same model, prompts and masks; the ELBO values are checked to
agree. Runs alternate; medians of the repeats are reported. Memory per sample is the peak of the torch
profiler's CPU memory timeline over one call (parameters, gradients and optimizer state excluded),
divided by the batch size.

    PYTHONPATH=. python benchmarks/bench_diffusion.py --out benchmarks/results/diffusion_throughput.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import transformers

from posttrain.algos.elbo import draw_elbo_masks, model_logits_fn, sequence_elbo
from posttrain.common.cli_help import CommandParser
from posttrain.common.files import atomic_write_text
from posttrain.engines.base import SamplingParams
from posttrain.engines.diffusion import DiffusionRolloutEngine, DiffusionSampling, fixed_length_completions
from posttrain.models.diffusion import load_diffusion_lm, make_bidirectional, resolve_mask_token_id
from posttrain.models.tiny import RECIPES, build_model, build_tokenizer

# --------------------------------------------------------------------------------------------------
# Papers'-style peers
# --------------------------------------------------------------------------------------------------

def paper_add_gumbel_noise(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    if temperature == 0.0:
        return logits
    logits = logits.to(torch.float64)
    noise = torch.rand_like(logits, dtype=torch.float64)
    return logits.exp() / (-torch.log(noise)) ** temperature


def paper_num_transfer_tokens(mask_index: torch.Tensor, steps: int) -> torch.Tensor:
    mask_num = mask_index.sum(dim=1, keepdim=True)
    base, remainder = mask_num // steps, mask_num % steps
    out = base.expand(-1, steps).clone()
    out[torch.arange(steps).unsqueeze(0) < remainder] += 1
    return out


@torch.no_grad()
def paper_generate(model, prompt: torch.Tensor, attention_mask: torch.Tensor, steps: int, gen_length: int,
                   block_length: int, temperature: float, mask_id: int) -> torch.Tensor:
    """LLaDA/ESPO-style semi-autoregressive low-confidence remasking (straightforward version)."""
    bs = prompt.shape[0]
    x = torch.full((bs, prompt.shape[1] + gen_length), mask_id, dtype=torch.long)
    x[:, : prompt.shape[1]] = prompt.clone()
    attention_mask = F.pad(attention_mask, (0, gen_length), value=1)
    num_blocks = gen_length // block_length
    steps_per_block = max(1, steps // num_blocks)
    for num_block in range(num_blocks):
        start = prompt.shape[1] + num_block * block_length
        end = start + block_length
        num_transfer = paper_num_transfer_tokens(x[:, start:end] == mask_id, steps_per_block)
        for i in range(steps_per_block):
            mask_index = x == mask_id
            logits = model(x, attention_mask=attention_mask).logits
            logits[..., mask_id] = -torch.inf  # same guard as ours, so both sample the same distribution
            x0 = torch.argmax(paper_add_gumbel_noise(logits, temperature), dim=-1)
            p = F.softmax(logits.to(torch.float64), dim=-1)
            x0_p = torch.gather(p, -1, x0.unsqueeze(-1)).squeeze(-1)
            x0_p[:, end:] = -np.inf
            x0 = torch.where(mask_index, x0, x)
            confidence = torch.where(mask_index, x0_p, -np.inf)
            transfer = torch.zeros_like(x0, dtype=torch.bool)
            for j in range(confidence.shape[0]):
                k = int(num_transfer[j, i])
                if k > 0:
                    transfer[j, torch.topk(confidence[j], k=k).indices] = True
            x[transfer] = x0[transfer]
    return x


def paper_elbo_mc(model, input_ids: torch.Tensor, logits_to_keep: int, masks: torch.Tensor, mask_id: int) -> torch.Tensor:
    """ESPO ``_get_elbo_mc`` with ``reduce_var=True``: per MC sample, a masked and a coupled forward with
    full logits. ``masks`` [B, M, L] are the pass-1 masks (the same ones ours uses)."""
    batch, num_mc, length = masks.shape
    results = []
    for mc in range(num_mc):
        is_mask = masks[:, mc]
        p_mask = is_mask.sum(-1, keepdim=True).float().expand(-1, length) / (length + 1)
        perturbed = input_ids.clone()
        perturbed[:, -length:] = torch.where(is_mask, mask_id, input_ids[:, -length:])
        targets = input_ids[:, -length:]
        loss = torch.zeros(batch, length)
        logits = model(perturbed).logits[:, -logits_to_keep:]
        loss[is_mask] = F.cross_entropy(logits[is_mask], targets[is_mask], reduction="none") / p_mask[is_mask]
        coupled = input_ids.clone()
        coupled[:, -length:] = torch.where(is_mask, input_ids[:, -length:], mask_id)
        coupled_logits = model(coupled).logits[:, -logits_to_keep:]
        loss[~is_mask] = F.cross_entropy(coupled_logits[~is_mask], targets[~is_mask], reduction="none") / (
            length / (length + 1) - p_mask[~is_mask])
        results.append(-(loss / 2).sum(-1))
    return torch.stack(results).mean(0)


# --------------------------------------------------------------------------------------------------
# Setup and measurement
# --------------------------------------------------------------------------------------------------

def setup(args: argparse.Namespace):
    if args.model:
        from posttrain.models.loading import load_tokenizer

        model, tokenizer = load_diffusion_lm(args.model), load_tokenizer(args.model)
    else:
        tokenizer = build_tokenizer()
        model = build_model(RECIPES.get(args.recipe), tokenizer)  # random init
        make_bidirectional(model, mask_token_id=resolve_mask_token_id(tokenizer, model.config))
    model.eval()
    from posttrain.tasks import TASKS
    from posttrain.tasks.prompts import encode_prompts

    examples = TASKS.get(args.task)().split("test")[: args.batch_size]
    prompts = encode_prompts(tokenizer, examples, None, 256)
    width = max(map(len, prompts))
    prompts = [[tokenizer.pad_token_id] * (width - len(p)) + p for p in prompts]  # equal length: no padding
    return model, tokenizer, prompts


def sampler_sides(model, tokenizer, prompts, args):
    mask_id = resolve_mask_token_id(tokenizer, model.config)
    engine = DiffusionRolloutEngine(model, tokenizer, DiffusionSampling(block_length=args.block_length, steps=args.steps),
                                    max_batch_size=len(prompts))
    prompt = torch.tensor(prompts)
    am = torch.ones_like(prompt)

    def ours(seed: int) -> tuple[int, int]:
        out = engine.generate(prompts, SamplingParams(max_new_tokens=args.gen_length, temperature=1.0, seed=seed))
        return len(prompts) * args.gen_length, sum(len(c) for c in out.completion_ids)

    def paper(seed: int) -> tuple[int, int]:
        torch.manual_seed(seed)
        x = paper_generate(model, prompt, am, args.steps, args.gen_length, args.block_length, 1.0, mask_id)
        comp = x[:, prompt.shape[1]:]
        is_eos = (comp == tokenizer.eos_token_id).long()
        return len(prompts) * args.gen_length, int(((is_eos.cumsum(-1) - is_eos) == 0).sum())

    return {"ours": ours, "paper_style": paper}


def elbo_inputs(model, tokenizer, prompts, args):
    engine = DiffusionRolloutEngine(model, tokenizer, DiffusionSampling(block_length=args.block_length, steps=args.steps))
    out = engine.generate(prompts, SamplingParams(max_new_tokens=args.gen_length, temperature=1.0, seed=123))
    comp = fixed_length_completions(out.completion_ids, args.gen_length, tokenizer.eos_token_id)
    ids = torch.cat([torch.tensor(prompts), comp], dim=1)
    masks = draw_elbo_masks(len(prompts), args.gen_length, args.num_mc, torch.Generator().manual_seed(0))
    return ids, masks


def elbo_sides(model, tokenizer, ids, masks, args, grad: bool):
    mask_id = resolve_mask_token_id(tokenizer, model.config)
    fn = model_logits_fn(model)

    def run(compute):
        def side(_seed: int) -> tuple[int, int]:
            if grad:
                compute().sum().backward()
                model.zero_grad(set_to_none=True)
            else:
                with torch.no_grad():
                    compute()
            return ids.shape[0], ids.shape[0]
        return side

    return {
        "ours": run(lambda: sequence_elbo(fn, ids, masks, mask_id, None, coupled=True)),
        "ours_one_forward": run(lambda: sequence_elbo(fn, ids, masks, mask_id, None, coupled=True,
                                                      max_batch=2 * masks.shape[1] * ids.shape[0])),
        "paper_style": run(lambda: paper_elbo_mc(model, ids, args.gen_length, masks, mask_id)),
    }


def measure(sides, repeats: int) -> dict[str, list[dict[str, float]]]:
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    for fn in sides.values():
        fn(10_000)  # warm-up
    for repeat in range(repeats):
        for name, fn in sides.items():
            start = time.perf_counter()
            units, extra = fn(repeat)
            seconds = time.perf_counter() - start
            runs[name].append({"seconds": seconds, "units": units, "extra": extra, "units_per_s": units / seconds})
    return runs


def peak_memory_per_sample(fn, batch_size: int) -> float:
    """Peak bytes of one call, from the torch profiler's CPU memory timeline, excluding parameters,
    gradients and optimizer state (per-model, not per-sample), divided by the batch size."""
    import warnings

    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX, Category

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
        fn(0)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = Path(tmp) / "timeline.json"
        prof.export_memory_timeline(str(path), device="cpu")
        sizes = np.array(json.loads(path.read_text())[1], dtype=np.float64)
    skip = [_CATEGORY_TO_INDEX[c] for c in (Category.PARAMETER, Category.GRADIENT, Category.OPTIMIZER_STATE)]
    keep = [i for i in range(sizes.shape[1]) if i not in skip]
    return float(sizes[:, keep].sum(1).max()) / batch_size


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="Diffusion checkpoint (default: random tiny recipe arch).")
    parser.add_argument("--recipe", default="diffusion-sudoku", help="Tiny recipe whose architecture to use.")
    parser.add_argument("--task", default="sudoku", help="Task whose test prompts to use.")
    parser.add_argument("--batch_size", type=int, default=16, help="Prompts per call.")
    parser.add_argument("--gen_length", type=int, default=32, help="Completion length L.")
    parser.add_argument("--block_length", type=int, default=8, help="Sampler block length.")
    parser.add_argument("--steps", type=int, default=32, help="Sampler denoising steps.")
    parser.add_argument("--num_mc", type=int, default=2, help="ELBO Monte Carlo samples (coupled).")
    parser.add_argument("--repeats", type=int, default=3, help="Timed runs of each side (after one warm-up).")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads.")
    parser.add_argument("--no_memory", action="store_true", help="Skip the memory measurements.")
    parser.add_argument("--out", type=Path, default=None, help="Write the results as JSON here.")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, tokenizer, prompts = setup(args)
    ids, masks = elbo_inputs(model, tokenizer, prompts, args)
    mask_id = resolve_mask_token_id(tokenizer, model.config)
    with torch.no_grad():
        ours_val = sequence_elbo(model_logits_fn(model), ids, masks, mask_id, None, coupled=True)
        paper_val = paper_elbo_mc(model, ids, args.gen_length, masks, mask_id)
    agreement = float((ours_val - paper_val).abs().max())

    sections = {
        "sampler": (sampler_sides(model, tokenizer, prompts, args), "canvas tokens/s (B*L per second)"),
        "elbo_eval": (elbo_sides(model, tokenizer, ids, masks, args, grad=False), "sequences/s, no grad"),
        "elbo_train": (elbo_sides(model, tokenizer, ids, masks, args, grad=True), "sequences/s, forward+backward"),
    }
    result: dict = {
        "command": " ".join([sys.executable, *sys.argv]),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "platform": platform.platform(),
        "threads": args.threads,
        "model": args.model or f"random {args.recipe} architecture",
        "params": sum(p.numel() for p in model.parameters()),
        "batch_size": args.batch_size,
        "prompt_tokens": len(prompts[0]),
        "gen_length": args.gen_length,
        "block_length": args.block_length,
        "steps": args.steps,
        "num_mc": args.num_mc,
        "elbo_max_abs_difference_ours_vs_paper": agreement,
    }
    summary = {}
    for name, (sides, unit) in sections.items():
        runs = measure(sides, args.repeats)
        med = {side: statistics.median(r["units_per_s"] for r in rs) for side, rs in runs.items()}
        ratios = {f"{side}_over_paper": med[side] / med["paper_style"] for side in med if side != "paper_style"}
        result[name] = {"unit": unit, "runs": runs, "median": med, "ratios": ratios}
        if name == "sampler":
            result[name]["completion_tokens_per_call"] = {s: statistics.median(r["extra"] for r in rs) for s, rs in runs.items()}
        summary[name] = {"median": med, "ratios": {k: round(v, 2) for k, v in ratios.items()}}
    if not args.no_memory:
        result["memory_per_sample_bytes"] = {
            f"{name}:{side}": peak_memory_per_sample(fn, args.batch_size)
            for name, (sides, _) in sections.items() for side, fn in sides.items()
        }
        summary["memory_per_sample_bytes"] = result["memory_per_sample_bytes"]
    summary["elbo_agreement"] = agreement
    print(json.dumps(summary, indent=2))
    if args.out is not None:
        atomic_write_text(args.out, json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
