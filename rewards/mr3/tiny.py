"""The embedded tiny reward model: mR3-style verdicts on a checkable built-in task (arithmetic).

The judge sees a problem from the ``arithmetic`` task and candidate answers (numbers in fixed width,
``templates.compact_number``), and writes a reasoning trace, ``</think>``, and a JSON verdict, in the
``compact`` template style (``templates.compact_prompt``). The trace (``judge_trace``) *solves* the
problem and then *checks* each candidate against its own answer:

- pairwise: ``P|07-13=|A:-006|B:+006|<think>`` ->
  ``-13-07,16,-006;A-=0=0=6=B+!0=0=6=</think>{"score":"A"}``;
- binary:   ``C|23+07=|R:+031|<think>`` -> ``+23+07,10,+030;+=0=3=1!</think>{"score":"false"}``;
- pointwise (1..5): ``S|23+07=|R:+030|<think>`` -> ``+23+07,10,+030;+=0=3=0=</think>{"score":"5"}``
  (5 right, else 1).

The solution is worked column by column (``worked_solution``: the sign, the operands reordered so a
subtraction never borrows past zero, the ones column's carry/borrow flag and digit, then the answer), so
each character the judge writes depends on a few characters at fixed offsets, a function a 3-layer
character-level model learns from the train split and applies to unseen problems. The check
(``check_trace``) copies each character of a candidate and marks it ``=`` or ``!`` against the answer;
the verdict then only looks for a ``!``. With a reference answer in the prompt (``with_reference``,
reference-guided judging, 30% of the warm-start examples) the judge skips the working and copies the
reference as its answer. Wrong candidates are near misses (off by 1, 2, 10, a sign flip or a random
value), so the judge must compute rather than spot a format cue. Training problems come from the task's
train split and evaluation problems from its disjoint test split.

``warm_start`` (the ``reward-mr3`` recipe's warm start in ``posttrain.models.tiny``) is a plain torch
SFT loop on freshly drawn examples (loss on the completion, the trace and the verdict weighed up).
``pairwise_accuracy`` evaluates through the same pipeline the server uses (compact prompts ->
``HFRolloutEngine`` -> ``parse_verdict`` -> rewards). ``python -m rewards.mr3.tiny`` prints and saves
held-out pairwise and binary accuracy before and after the warm start (``benchmarks/results/mr3_tiny_rm.json``,
reported in ``benchmarks/BENCHMARKS.md`` section 4: the judge solving the problem itself and shown the reference;
an untrained model writes no readable verdict).

Deviation from the paper: mR3 distils long free-text reasoning from gpt-oss-120b into Qwen3 models;
here the "reasoning" is a worked solution and a character-by-character check written by a program,
because a 3-layer character-level model with a 256-token context cannot hold mR3's prompt or its
traces, and it can only judge what it can compute. (Earlier versions whose trace skipped the working,
going straight to the answer or to per-character marks, stayed near chance: the model learnt the format
and the majority mark, never the comparison.) The same traces go through the SFT data builder
(``rewards.mr3.data``, ``--style compact``) and ``posttrain/train.py --algo sft --raw_prompts true``.
"""

from __future__ import annotations

import json
import random
import re
import time
from pathlib import Path
from typing import Any

import torch

from posttrain.common.cli_help import CommandParser
from posttrain.common.padding import left_pad
from posttrain.engines.base import SamplingParams
from posttrain.engines.hf import HFRolloutEngine
from posttrain.models.likelihood import causal_token_logprobs
from posttrain.models.tiny import (
    RECIPES,
    WarmStartProgress,
    build_model,
    build_tiny,
    build_tokenizer,
    warm_start_update,
)
from posttrain.tasks.arithmetic import ArithmeticTask
from rewards.mr3.scoring import aggregate, plan_samples
from rewards.mr3.templates import (
    COMPACT_VERDICT_TOKENS,
    EvalItem,
    compact_number,
    compact_problem,
    compact_prompt,
    format_verdict,
)

MIX = (("pairwise", 0.5), ("binary", 0.35), ("pointwise", 0.15))
REFERENCE_FRACTION = 0.3  # share of warm-start examples that show the judge the gold answer
DECISION_WEIGHT = 4.0  # the one verdict token carries little of a mean token loss; weigh it up
TRACE_WEIGHT = 2.0  # the worked solution and the check marks are the judgement itself
_PROBLEM = re.compile(r"(\d\d)([+-])(\d\d)=")


def arithmetic_problems(split: str) -> list[tuple[str, int]]:
    """``(problem, answer)`` pairs of the ``arithmetic`` task's ``train`` or ``test`` split."""
    return [(e.prompt, int(e.answer)) for e in ArithmeticTask().split(split)]


def wrong_answer(correct: int, rng: random.Random) -> int:
    """A plausible wrong answer: off by 1 or 2, by 10, sign-flipped, or random."""
    while True:
        kind = rng.random()
        if kind < 0.5:
            cand = correct + rng.choice([-2, -1, 1, 2])
        elif kind < 0.7:
            cand = correct + rng.choice([-10, 10])
        elif kind < 0.8 and correct != 0:
            cand = -correct
        else:
            cand = rng.randint(-49, 98)
        if cand != correct:
            return cand


def worked_solution(problem: str) -> str:
    """The judge's working for a two-operand problem, column by column (``07-13=`` -> ``-13-07,16,``): the
    sign of the result, the operands reordered so the larger comes first for a subtraction, then the ones
    column as carry/borrow flag and digit. The answer that follows (``-006``) copies the sign and the ones
    digit and gets its tens digit from the operands' tens digits and the flag: every step looks at a
    few characters at fixed offsets. ``ValueError`` for a text without such a problem (``compact_problem``)."""
    match = _PROBLEM.fullmatch(compact_problem(problem))  # always matches: compact_problem writes that form
    a, op, b = int(match.group(1)), match.group(2), int(match.group(3))
    x, y = (b, a) if op == "-" and a < b else (a, b)
    sign = "-" if op == "-" and a < b else "+"
    ones = x % 10 + y % 10 if op == "+" else x % 10 - y % 10
    flag = int(ones >= 10) if op == "+" else int(ones < 0)
    return f"{sign}{x:02d}{op}{y:02d},{flag}{ones % 10},"


def check_trace(answer: int, candidate: str) -> str:
    """The check of one candidate: each character of its fixed-width form followed by ``=`` when the
    correct answer has the same character there, else ``!`` (``+056`` against ``+058`` -> ``+=0=5=6!``; a
    missing character is written ``_`` and marked ``!``).
    Each mark compares the token just copied with one token of the answer written earlier in the trace, at
    a fixed offset; the verdict then only looks for a ``!``."""
    ref = compact_number(str(answer))
    cand = compact_number(candidate)
    return "".join(f"{cand[i] if i < len(cand) else '_'}{'=' if i < len(cand) and i < len(ref) and cand[i] == ref[i] else '!'}"
                   for i in range(max(len(ref), len(cand))))


def judge_trace(problem: str, answer: int, candidates: list[str], with_reference: bool) -> str:
    """The full reasoning: the worked solution (skipped when the reference answer is shown), the answer in
    fixed width, then the check of each candidate (labelled ``A`` / ``B`` when there are two)."""
    work = "" if with_reference else worked_solution(problem)
    labels = "AB" if len(candidates) == 2 else ""
    checks = "".join(f"{labels[i] if labels else ''}{check_trace(answer, c)}" for i, c in enumerate(candidates))
    return f"{work}{compact_number(str(answer))};{checks}"


def make_example(problem: str, answer: int, mode: str, rng: random.Random,
                 with_reference: bool = False) -> tuple[EvalItem, str, Any]:
    """One (item, target completion, label) triple. The label is the index of the correct response for
    pairwise, the correctness (bool) for binary, the target score for pointwise. ``with_reference`` shows
    the judge the gold answer (reference-guided judging), which lets it skip the worked solution."""
    if mode == "pairwise":
        wrong = wrong_answer(answer, rng)
        first_correct = rng.random() < 0.5
        responses = [str(answer), str(wrong)] if first_correct else [str(wrong), str(answer)]
        score = "Assistant A" if first_correct else "Assistant B"
        label: Any = 0 if first_correct else 1
    else:
        candidate = answer if rng.random() < 0.5 else wrong_answer(answer, rng)
        responses = [str(candidate)]
        if mode == "binary":
            score = "true" if candidate == answer else "false"
            label = candidate == answer
        else:
            score = label = "5" if candidate == answer else "1"
    item = EvalItem(mode, problem, responses, reference=str(answer) if with_reference else None)
    reasoning = judge_trace(problem, answer, responses, with_reference)
    return item, format_verdict(score, reasoning=reasoning, style="compact"), label


def sample_batch(problems: list[tuple[str, int]], size: int, rng: random.Random) -> list[tuple[str, str]]:
    """``size`` (compact prompt, target) pairs on random problems, formats drawn from ``MIX``."""
    modes, weights = zip(*MIX)
    out = []
    for _ in range(size):
        problem, answer = problems[rng.randrange(len(problems))]
        with_reference = rng.random() < REFERENCE_FRACTION
        item, target, _ = make_example(problem, answer, rng.choices(modes, weights)[0], rng, with_reference)
        out.append((compact_prompt(item), target))
    return out


def _batch_tensors(tokenizer: Any, pairs: list[tuple[str, str]], decision_weight: float = 1.0,
                   trace_weight: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Left-padded prompt+target ids, attention mask, and loss weights over the target tokens (+ eos): the
    reasoning tokens (before ``</think>``; the tiny tokenizer is character-level, so characters are
    tokens) weigh ``trace_weight``, the tokens of the score value (the decision) ``decision_weight``."""
    seqs, n_target, decisions, n_trace = [], [], [], []
    for prompt, target in pairs:
        p = tokenizer(prompt, add_special_tokens=True)["input_ids"]
        t = tokenizer(target, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        head = target[: target.rindex('"score":"') + len('"score":"')]
        start = len(tokenizer(head, add_special_tokens=False)["input_ids"])
        seqs.append(p + t)
        n_target.append(len(t))
        decisions.append((start, len(t) - 3))  # score value tokens, before '"}' and eos
        n_trace.append(len(target.split("</think>", 1)[0]))
    width = max(len(s) for s in seqs)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids, mask = left_pad(seqs, pad, width)
    loss_mask = torch.zeros((len(seqs), width - 1))
    for row, (seq, nt, (d0, d1), nr) in enumerate(zip(seqs, n_target, decisions, n_trace)):
        first = width - nt - 1  # loss position predicting the first target token
        loss_mask[row, first:] = 1.0
        loss_mask[row, first: first + nr] = trace_weight
        loss_mask[row, first + d0: first + d1] = decision_weight
    return ids, mask, loss_mask


def sft_steps(model: Any, tokenizer: Any, steps: int, lr: float, batch_size: int, generator: torch.Generator,
              decision_weight: float = DECISION_WEIGHT, trace_weight: float = TRACE_WEIGHT,
              name: str = "reward-mr3") -> list[float]:
    """Plain AdamW SFT on freshly drawn compact verdict examples, in place; returns the losses. Progress
    (``WarmStartProgress``: a bar on a terminal, log lines otherwise) is shown under ``name``."""
    rng = random.Random(int(torch.randint(0, 2**31 - 1, (1,), generator=generator)))
    problems = arithmetic_problems("train")
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    warmup = max(1, steps // 20)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, 1.0 - s / max(1, steps)))
    model.train()
    losses = []
    progress = WarmStartProgress(name, steps)
    for _ in range(steps):
        ids, mask, loss_mask = _batch_tensors(tokenizer, sample_batch(problems, batch_size, rng), decision_weight,
                                              trace_weight)
        logprobs, _ = causal_token_logprobs(model, ids, mask)
        loss = -(logprobs * loss_mask).sum() / loss_mask.sum()
        warm_start_update(model, optimizer, scheduler, loss)
        losses.append(loss.item())
        progress.update(losses[-1])
    progress.close()
    model.eval()
    return losses


def warm_start(model: Any, tokenizer: Any, recipe: Any, generator: torch.Generator) -> None:
    """The ``reward-mr3`` recipe's warm start: ``recipe.warm_start_steps`` SFT steps (in place).

    The tiny-model builder runs it on one intra-op thread, as every warm start."""
    sft_steps(model, tokenizer, recipe.warm_start_steps, recipe.lr, recipe.batch_size, generator, name=recipe.name)


def eval_items(n: int = 256, seed: int = 0, mode: str = "pairwise",
               with_reference: bool = False) -> list[tuple[EvalItem, Any]]:
    """Held-out items (test-split problems) with their labels."""
    rng = random.Random(seed)
    problems = arithmetic_problems("test")
    out = []
    for i in range(n):
        problem, answer = problems[i % len(problems)]
        item, _, label = make_example(problem, answer, mode, rng, with_reference)
        out.append((item, label))
    return out


@torch.inference_mode()
def pairwise_accuracy(model: Any, tokenizer: Any, n: int = 256, seed: int = 0, swap_positions: bool = False,
                      max_batch_size: int = 64, with_reference: bool = False) -> dict[str, float]:
    """Greedy verdicts on held-out pairs: accuracy (ties and unreadable verdicts count as wrong),
    accuracy with ties as half, and the parse rate; also binary accuracy on held-out single answers.
    ``with_reference`` shows the judge the gold answer (reference-guided judging)."""
    torch.set_num_threads(1)  # see warm_start
    engine = HFRolloutEngine(model, tokenizer, max_batch_size=max_batch_size)
    params = SamplingParams(max_new_tokens=COMPACT_VERDICT_TOKENS, temperature=0.0)

    def run(mode: str) -> tuple[list[Any], list[Any]]:
        pairs = eval_items(n, seed, mode, with_reference)
        items = [it for it, _ in pairs]
        samples = plan_samples(items, None, "compact", 1, swap_positions)
        ids = [tokenizer(s.prompt, add_special_tokens=True)["input_ids"] for s in samples]
        texts = engine.generate(ids, params).texts
        return aggregate(items, samples, texts), [label for _, label in pairs]

    results, labels = run("pairwise")
    strict = half = parsed = 0.0
    for r, label in zip(results, labels):
        parsed += r.n_parsed / max(1, r.n_samples)
        p = r.p_first if r.parse_ok and r.p_first is not None else 0.5
        p_correct = p if label == 0 else 1.0 - p
        strict += 1.0 if p_correct > 0.5 else 0.0
        half += 1.0 if p_correct > 0.5 else (0.5 if p_correct == 0.5 else 0.0)
    bres, blabels = run("binary")
    bacc = sum(1.0 for r, y in zip(bres, blabels) if r.parse_ok and (r.reward > 0.5) == y) / len(bres)
    return {"pairwise_accuracy": strict / n, "pairwise_accuracy_ties_half": half / n, "parse_rate": parsed / n,
            "binary_accuracy": bacc, "n": n}


def main(argv: list[str] | None = None) -> int:
    """Build (or reuse) the ``reward-mr3`` tiny model and report held-out accuracy before/after warm start."""
    parser = CommandParser(prog="python -m rewards.mr3.tiny", description=main.__doc__)
    parser.add_argument("--n", type=int, default=256, help="held-out items per format")
    parser.add_argument("--cache_dir", default=None)
    parser.add_argument("--force", action="store_true", help="rebuild the cached model")
    parser.add_argument("--out", default="benchmarks/results/mr3_tiny_rm.json")
    args = parser.parse_args(argv)
    from transformers import AutoModelForCausalLM


    recipe = RECIPES.get("reward-mr3")
    tokenizer = build_tokenizer()
    wall, cpu = time.time(), time.process_time()
    path = build_tiny("reward-mr3", cache_dir=args.cache_dir, force=args.force)
    wall, cpu = time.time() - wall, time.process_time() - cpu
    models = {"before": build_model(recipe, tokenizer), "after": AutoModelForCausalLM.from_pretrained(path)}
    results: dict[str, Any] = {}
    for setting, with_reference in (("no_reference", False), ("with_reference", True)):
        results[setting] = {}
        for stage, model in models.items():
            for swap in (False, True):
                key = stage + ("_with_swap" if swap else "")
                results[setting][key] = pairwise_accuracy(model, tokenizer, n=args.n, swap_positions=swap,
                                                          with_reference=with_reference)
                print(setting, key, results[setting][key], flush=True)
    result = {"command": "python -m rewards.mr3.tiny" + (" --force" if args.force else ""),
              "recipe": {k: getattr(recipe, k) for k in ("warm_start_steps", "lr", "batch_size", "hidden_size",
                                                          "num_layers", "seed")},
              "held_out": "arithmetic test split (disjoint from the warm start's train problems); pairwise = the "
                          "correct answer against a near miss, binary = one answer, half of them correct (chance 50%)",
              **results,
              "warm_start": {"built_now": wall > 1.0, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
                             "threads": 1},
              "model_dir": str(path)}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
