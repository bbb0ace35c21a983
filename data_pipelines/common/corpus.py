"""The built-in synthetic corpus with planted long-range facts, and the warm start of the corpus LM.

Every document is fictional and lower-case except for *seal codes*: five upper-case/digit characters
whose first character is the upper-cased initial of the place they belong to (``velnor`` -> ``V7QXM``).
Three kinds of documents:

- ``def-XXX``: a registry entry that *defines* the seal code of a place.
- ``use-XXX``: a courier story that *uses* the same code; without the definition its characters 2..5
  are unpredictable (high entropy), with the definition prepended a model that copies from context
  predicts them (low entropy). This is the planted long-range dependency.
- ``misc-XXX``: filler with an unrelated code that is defined nowhere (a decoy for retrieval).

Ground truth (``Corpus.dependencies``): each ``use`` document needs its ``def`` document. Because the
fact is symmetric (the ``use`` document also pins down the code in the ``def`` document),
``Corpus.true_pairs()`` holds both directions.

``warm_start`` trains the tiny corpus LM (``posttrain.models.tiny`` recipe ``corpus-lm``) on freshly
generated text (other seeds than the demo corpus, so it learns to *copy from context*, not to memorise
codes): first echo drills (where an induction/copy mechanism forms), then sequences of 1-3 documents with
the matching definition present or absent, so that copying pays only when the code's place matches.
A tiny transformer needs well over 1,000 steps of batch 32 before content-based copying appears (see
``warm_start``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch

CODE_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "kl", "st", "tr"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ou"]
_CODAS = ["", "", "n", "r", "s", "l", "th", "m"]
_NOUNS = ["river", "market", "tower", "garden", "bridge", "harbor", "mill", "school", "forest", "road"]
_ADJS = ["quiet", "old", "busy", "green", "narrow", "cold", "bright", "small"]
_VERBS = ["walked to", "looked at", "painted", "cleaned", "visited", "passed"]
_PEOPLE = ["a farmer", "the baker", "a child", "the guard", "an old man", "the mayor"]


def _place(rng: random.Random) -> str:
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(2))


def _code(rng: random.Random, place: str) -> str:
    return place[0].upper() + "".join(rng.choice(CODE_CHARS) for _ in range(4))


def _filler(rng: random.Random, n: int) -> str:
    return " ".join(
        f"{rng.choice(_PEOPLE)} {rng.choice(_VERBS)} the {rng.choice(_ADJS)} {rng.choice(_NOUNS)}." for _ in range(n)
    )


def definition_doc(rng: random.Random, place: str, code: str) -> str:
    return f"registry of {place}: the seal {code}. {_filler(rng, 1)}"


def usage_doc(rng: random.Random, place: str, code: str) -> str:
    return f"{_filler(rng, 1)} a courier from {place} showed the seal {code}. {_filler(rng, 1)}"


def misc_doc(rng: random.Random, place: str, code: str) -> str:
    return f"{_filler(rng, 1)} near {place} a stone marked {code} lay by the road."


@dataclass
class Corpus:
    """Documents (``{"id", "text", "kind"}``) and the planted dependencies (``{"doc", "needs", ...}``)."""

    documents: list[dict]
    dependencies: list[dict] = field(default_factory=list)

    def true_pairs(self) -> set[tuple[str, str]]:
        """(root document id, context document id) pairs that share a planted fact, both directions."""
        pairs: set[tuple[str, str]] = set()
        for dep in self.dependencies:
            pairs.add((dep["doc"], dep["needs"]))
            pairs.add((dep["needs"], dep["doc"]))
        return pairs


def make_corpus(num_entities: int = 40, num_misc: int = 20, seed: int = 0) -> Corpus:
    """A deterministic corpus: ``num_entities`` (def, use) pairs plus ``num_misc`` decoys, shuffled."""
    rng = random.Random(seed)
    places: list[str] = []
    while len(places) < num_entities + num_misc:
        place = _place(rng)
        if place not in places:
            places.append(place)
    codes: set[str] = set()

    def fresh_code(place: str) -> str:
        while True:
            code = _code(rng, place)
            if code not in codes:
                codes.add(code)
                return code

    docs, deps = [], []
    for i in range(num_entities):
        place, code = places[i], fresh_code(places[i])
        def_id, use_id = f"def-{i:03d}", f"use-{i:03d}"
        docs.append({"id": def_id, "kind": "def", "text": definition_doc(rng, place, code)})
        docs.append({"id": use_id, "kind": "use", "text": usage_doc(rng, place, code)})
        deps.append({"doc": use_id, "needs": def_id, "entity": place, "code": code})
    for j in range(num_misc):
        place = places[num_entities + j]
        docs.append({"id": f"misc-{j:03d}", "kind": "misc", "text": misc_doc(rng, place, fresh_code(place))})
    rng.shuffle(docs)
    return Corpus(documents=docs, dependencies=deps)


def training_text(rng: random.Random) -> str:
    """One warm-start sequence.

    30% are echo drills (a list of random codes written twice: the classic task on which induction heads
    form), 30% copy drills (2-4 short definitions, then uses of all but one of them in shuffled order), so
    the tiny model learns to copy codes from context quickly; the other 40% are 1-3 documents joined by
    blank lines: 45% a definition then its usage (copying pays), 15% the reverse, 25% an unrelated
    definition before a usage (copying must *not* happen), 15% a single document of any kind.
    """
    u = rng.random()
    if u < 0.3:  # echo drill: a list of random codes, then the same list again (every repeat is copyable)
        return echo_drill(rng)
    if u < 0.6:  # dense copy drill: several definitions, then their uses in another order
        places = []
        while len(places) < rng.randint(2, 4):
            p = _place(rng)
            if all(p[0] != q[0] for q in places):
                places.append(p)
        codes = [_code(rng, p) for p in places]
        defs = [f"registry of {p}: the seal {c}." for p, c in zip(places, codes)]
        order = list(range(len(places)))
        rng.shuffle(order)
        uses = [f"a courier from {places[i]} showed the seal {codes[i]}." for i in order[:-1]]
        return " ".join(defs) + "\n\n" + " ".join(uses)
    a, b = _place(rng), _place(rng)
    while b[0] == a[0]:
        b = _place(rng)
    ca, cb = _code(rng, a), _code(rng, b)
    u = rng.random()
    if u < 0.45:
        parts = [definition_doc(rng, a, ca), usage_doc(rng, a, ca)]
        if rng.random() < 0.5:
            parts.insert(rng.randrange(2), definition_doc(rng, b, cb))
    elif u < 0.60:
        parts = [usage_doc(rng, a, ca), definition_doc(rng, a, ca)]
    elif u < 0.85:
        parts = [definition_doc(rng, b, cb), usage_doc(rng, a, ca)]
    else:
        parts = [rng.choice([definition_doc, usage_doc, misc_doc])(rng, a, ca)]
    return "\n\n".join(parts)


ECHO_FRACTION = 0.75
"""Share of the warm-start steps spent on echo drills before the mixed corpus phase."""


def echo_drill(rng: random.Random) -> str:
    """A list of random seal codes, then the same codes in a shuffled order: characters 2..5 of each
    repeated code are predictable only by content-based copying (an induction head keyed on the previous
    characters). The shuffle matters: with the same order a tiny model learns to copy by relative
    position instead, which does not transfer to the documents."""
    codes = [_code(rng, _place(rng)) for _ in range(rng.randint(3, 6))]
    again = codes[:]
    rng.shuffle(again)
    return "seals: " + " ".join(codes) + ".\n\nagain: " + " ".join(again) + "."


def warm_start(model, tokenizer, recipe, generator: torch.Generator) -> None:
    """Train the corpus LM in place on freshly generated synthetic text (plain AdamW loop).

    Curriculum: the first ``ECHO_FRACTION`` of ``recipe.warm_start_steps`` are echo drills (short, cheap
    sequences on which an induction/copy mechanism forms), the rest are ``training_text`` sequences
    (documents, definitions and usages, plus drills). ``recipe.batch_size`` sequences per step, the
    recipe's LR with a short warm-up and linear decay in the second phase, sequences truncated to 512
    tokens. The python ``random`` stream is seeded from ``generator``, so the build is deterministic.
    Measured on the shared 2-core CPU (status at hand-off): with *unshuffled* echo drills a copy
    mechanism appeared after ~800 steps of batch 32 at LR 1e-3 but copied by relative position and did
    not transfer to the documents; with the shuffled drills used now, 1,200 drill + 400 mixed steps
    (batch 32, LR 1e-3) give only partial copying in drills and none yet in the documents, so the
    corpus LM still needs a longer warm start (more steps) before EntropyLong's verification finds the
    planted facts with it. ``CacheLMBackend`` (``--model cachelm``) is the copying scorer meanwhile.
    """
    from tqdm.auto import tqdm

    from posttrain.models.likelihood import causal_token_logprobs

    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator).item())
    rng = random.Random(seed)
    steps = max(1, int(recipe.warm_start_steps))
    echo_steps = int(steps * ECHO_FRACTION)
    warmup = max(1, steps // 50)

    def lr_lambda(s: int) -> float:
        if s < echo_steps:
            return min(1.0, (s + 1) / warmup)
        return max(0.1, 1.0 - (s - echo_steps) / max(1, steps - echo_steps))

    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=0.0, betas=(0.9, 0.98))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
    bos, eos, pad = tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id
    model.train()
    bar = tqdm(range(steps), desc=f"warm start {getattr(recipe, 'name', 'corpus-lm')}", leave=False)
    for step in bar:
        make = echo_drill if step < echo_steps else training_text
        seqs = [[bos] + tokenizer(make(rng), add_special_tokens=False)["input_ids"][:510] + [eos]
                for _ in range(recipe.batch_size)]
        width = max(len(s) for s in seqs)
        input_ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for row, s in enumerate(seqs):  # left padding, the project's convention
            input_ids[row, width - len(s):] = torch.tensor(s)
            mask[row, width - len(s):] = 1
        logprobs, _ = causal_token_logprobs(model, input_ids, mask)
        loss_mask = mask[:, 1:].float()
        loss = -(logprobs * loss_mask).sum() / loss_mask.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        bar.set_postfix(loss=f"{loss.item():.3f}")
    model.eval()
