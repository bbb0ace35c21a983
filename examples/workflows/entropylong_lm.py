"""EntropyLong -> long-context training: language modelling on the assembled sequences, and the held-out effect.

    python examples/workflows/entropylong_lm.py [--out DIR] [--model MODEL] [--no_ablation]

1. ``posttrain data entropylong`` writes ``OUT/data/sequences.jsonl``: each root document of the built-in
   corpus (planted "Place: CODE." facts shared by a definition and a usage document) with the contexts whose
   entropy reduction was verified assembled in front of it.
2. ``posttrain train --algo sft --task dataset --text_column text --eval_every 0``: the model (default
   smollm2-135m) trains with the language-modelling loss on every token of every sequence, one sequence per
   row (no packing), one epoch by default.
3. The ablation (the paper's comparison, in miniature): the same run on the root documents alone, the
   contexts cut off (``OUT/data/documents.jsonl``, the text from each row's ``d_offset_chars``).
4. The held-out probe: a corpus the runs never saw (other places, other codes; ``--probe_seed``). For each
   planted pair, the mean NLL of the usage document's dependent tokens (the code's characters 2..5, which
   nothing but the definition predicts) with the usage document alone and with the definition in front
   (joined by the pipeline's separator): the gap is what the model gets from a long-range context. Measured
   for the model before training, after training on the EntropyLong sequences, and after the ablation.
5. ``OUT/summary.json``: the pipeline's counts, the training curves and the probe table.

``--data_args`` / ``--train_args`` (one quoted string each) go to those commands (the train flags override the
defaults below); the tests run this in miniature that way.
"""

from __future__ import annotations

import json
import math

import torch
from workflow_steps import Workflow, curve, final_checkpoint, workflow_parser

from data_pipelines.common.corpus import make_corpus
from posttrain.models.loading import load_causal_lm, load_tokenizer
from posttrain.models.pretrained import resolve_model_name

TRAIN_DEFAULTS = ["--prompts_per_step", "2", "--micro_batch_size", "1", "--lr", "2e-5", "--eval_every", "0",
                  "--save_every", "0"]


def dependent_span(document: str, place: str, code: str) -> tuple[int, int]:
    """Character span of the code's characters 2..5 in ``document``'s planted fact ("Place: CODE.")."""
    fact = f"{place.capitalize()}: {code}"
    start = document.find(fact)
    if start < 0:
        raise ValueError(f"planted fact {fact!r} not found in the document {document[:60]!r}...")
    code_start = start + len(fact) - len(code)
    return code_start + 1, code_start + len(code)


def span_token_positions(offsets: list[tuple[int, int]], start: int, end: int) -> list[int]:
    """Indices of the tokens whose character range overlaps ``[start, end)``, the first token excepted
    (nothing predicts it)."""
    return [i for i, (a, b) in enumerate(offsets) if i > 0 and a < end and b > start]


@torch.no_grad()
def span_nll(model: torch.nn.Module, tokenizer, text: str, start: int, end: int) -> tuple[float, int]:
    """Summed NLL of the tokens of ``text`` overlapping characters ``[start, end)``, and their count."""
    encoded = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    positions = span_token_positions(encoded["offset_mapping"], start, end)
    ids = torch.tensor([encoded["input_ids"]])
    logp = torch.log_softmax(model(ids).logits[0].float(), dim=-1)
    return -sum(float(logp[i - 1, ids[0, i]]) for i in positions), len(positions)


def probe(model_path: str, pairs: list[dict], separator: str) -> dict:
    """Mean NLL per dependent token with the usage document alone and with its definition in front."""
    tokenizer, model = load_tokenizer(model_path), load_causal_lm(model_path)
    totals = {"alone": [0.0, 0], "with_context": [0.0, 0]}
    for pair in pairs:
        start, end = dependent_span(pair["use"], pair["place"], pair["code"])
        prefix = pair["definition"] + separator
        for key, text, shift in (("alone", pair["use"], 0), ("with_context", prefix + pair["use"], len(prefix))):
            nll, count = span_nll(model, tokenizer, text, start + shift, end + shift)
            totals[key][0] += nll
            totals[key][1] += count
    alone, with_context = (totals[k][0] / totals[k][1] for k in ("alone", "with_context"))
    return {"nll_alone": round(alone, 4), "nll_with_context": round(with_context, 4),
            "context_gain": round(alone - with_context, 4), "dependent_tokens": totals["alone"][1]}


def held_out_pairs(seed: int, num_entities: int) -> list[dict]:
    """The planted (definition, usage) pairs of a fresh prose corpus (the pipeline's default style)."""
    corpus = make_corpus(num_entities=num_entities, num_misc=0, seed=seed, style="prose")
    texts = {d["id"]: d["text"] for d in corpus.documents}
    return [{"use": texts[dep["doc"]], "definition": texts[dep["needs"]], "place": dep["entity"], "code": dep["code"]}
            for dep in corpus.dependencies]


def main(argv: list[str] | None = None) -> int:
    p = workflow_parser(__doc__, "entropylong-lm", "data", "train")
    p.add_argument("--model", default="smollm2-135m", help="the causal model trained (and the probe's tokenizer)")
    p.add_argument("--probe_seed", type=int, default=1000, help="seed of the held-out corpus")
    p.add_argument("--probe_entities", type=int, default=16, help="planted pairs in the held-out corpus")
    p.add_argument("--no_ablation", action="store_true", help="skip the run on the documents without contexts")
    args = p.parse_args(argv)
    flow = Workflow("entropylong-lm", args.out)
    data = args.out / "data"
    flow.run("entropylong", ["posttrain", "data", "entropylong", "--output", str(data), "--no_progress",
                             *args.data_args])
    rows = [json.loads(line) for line in (data / "sequences.jsonl").read_text().splitlines() if line.strip()]
    (data / "documents.jsonl").write_text("".join(json.dumps({"id": r["id"], "text": r["text"][r["d_offset_chars"]:]})
                                                  + "\n" for r in rows))
    model_path = resolve_model_name(args.model)
    tokenizer = load_tokenizer(model_path)
    longest = max(len(tokenizer(r["text"])["input_ids"]) for r in rows) + 1  # + EOS
    steps = math.ceil(len(rows) / 2)  # one epoch at the default 2 sequences per step
    runs = {"entropylong": data / "sequences.jsonl", **({} if args.no_ablation else {"documents_only": data / "documents.jsonl"})}
    results: dict[str, dict] = {}
    for name, dataset in runs.items():
        train_dir = args.out / f"train-{name}"
        metrics = flow.train(f"train-{name}", ["--algo", "sft", "--task", "dataset", "--dataset", str(dataset),
                                               "--text_column", "text", "--model", args.model, "--steps", str(steps),
                                               "--max_target_tokens", str(longest), *TRAIN_DEFAULTS],
                             train_dir, args.train_args)
        results[name] = {"checkpoint": str(final_checkpoint(train_dir)), "curve": curve(metrics, "loss", "train/")}
    separator = rows[0]["params"]["separator"]
    pairs = held_out_pairs(args.probe_seed, args.probe_entities)
    table = {"before": probe(model_path, pairs, separator),
             **{f"after_{name}": probe(run["checkpoint"], pairs, separator) for name, run in results.items()}}
    flow.write_summary({
        "model": args.model, "sequences": len(rows),
        "sequences_with_contexts": sum(1 for r in rows if r["contexts"]),
        "tokens_per_sequence_max": longest, "epoch_steps": steps,
        "probe": {"held_out_seed": args.probe_seed, "pairs": len(pairs), **table},
        "runs": results,
    })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
