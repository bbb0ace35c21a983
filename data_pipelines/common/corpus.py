"""The built-in synthetic corpus with planted long-range facts, and the warm start of the corpus LM.

Every document is fictional and lower-case except for *seal codes*: five upper-case/digit characters
whose first character is the upper-cased initial of the place they belong to (``velnor`` -> ``V7QXM``).
Three kinds of documents:

- ``def-XXX``: a registry entry that *defines* the seal code of a place.
- ``use-XXX``: a courier story that *uses* the same code; without the definition its characters 2..5
  are unpredictable (high entropy), with the definition prepended a model that copies from context
  predicts them (low entropy). This is the planted long-range dependency.
- ``misc-XXX``: filler with an unrelated code that is defined nowhere (a decoy for retrieval).

``style="prose"`` writes the same three kinds for a pretrained LM (``smollm2-135m``, the default scorer
of ``posttrain data entropylong``): the planted fact as a bare "Velnor: V7QXM." between slices of lists
every LM knows by heart (numbers, months, weekdays), and no other wording, so the only content two
documents share is a planted fact. (An earlier layout, "Seal of Velnor, registered. ... The seal of
Velnor is V7QXM. ...", put the highest-entropy tokens on shared template words, "Seal" at the start and
"seal" after a list, so the planted partner was the best context for 1 root in 12 under the paper's
rule; with this layout for 5 in 16. Measured with SmolLM2-135M, 8 entities: ``benchmarks/BENCHMARKS.md``.)
The three kinds differ only in which other document, if any, shares their fact.

Ground truth (``Corpus.dependencies``): each ``use`` document needs its ``def`` document. Because the
fact is symmetric (the ``use`` document also pins down the code in the ``def`` document),
``Corpus.true_pairs()`` holds both directions.

``warm_start`` trains the tiny corpus LM (``posttrain.models.tiny`` recipe ``corpus-lm``) on freshly
generated text (other seeds than the demo corpus, with random codes, so it learns to *copy from
context*, not to memorise codes): first short echo drills (a list of codes written twice, on which a
copy mechanism forms within a few hundred steps), then a mix of far echo drills (filler between the
two lists, so copying must reach over document distances), copy drills and 1-3 documents with the
matching definition present or absent (copying pays only when the code's place matches).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch

from posttrain.models.likelihood import causal_token_logprobs
from posttrain.models.tiny import warm_start_update

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


_KNOWN_LISTS = [
    ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"],
    ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
     "November", "December"],
    ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"],
]


def _known_list(rng: random.Random) -> str:
    """5-7 consecutive items of a list an LM knows by heart: text it predicts without any context."""
    items = rng.choice(_KNOWN_LISTS)
    start = rng.randrange(len(items) - 6)
    return ", ".join(items[start:start + rng.randint(5, 7)]) + "."


def prose_fact(place: str, code: str) -> str:
    """The planted sentence of the prose style: ``"Velnor: V7QXM."``."""
    return f"{place.capitalize()}: {code}."


def fact_prose(rng: random.Random, place: str, code: str) -> str:
    """A prose document: two known-list slices, the planted fact, two more slices."""
    before, after = f"{_known_list(rng)} {_known_list(rng)}", f"{_known_list(rng)} {_known_list(rng)}"
    return f"{before} {prose_fact(place, code)} {after}"


STYLES = {"chars": (definition_doc, usage_doc, misc_doc), "prose": (fact_prose, fact_prose, fact_prose)}
"""Document writers (definition, usage, decoy) per corpus style."""


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


def make_corpus(num_entities: int = 40, num_misc: int = 20, seed: int = 0, style: str = "chars") -> Corpus:
    """A deterministic corpus: ``num_entities`` (def, use) pairs plus ``num_misc`` decoys, shuffled;
    ``style`` is ``"chars"`` (for the character-level models) or ``"prose"`` (for a pretrained LM)."""
    if style not in STYLES:
        raise ValueError(f"corpus style must be one of {sorted(STYLES)}, got {style!r}")
    write_def, write_use, write_misc = STYLES[style]
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
        docs.append({"id": def_id, "kind": "def", "text": write_def(rng, place, code)})
        docs.append({"id": use_id, "kind": "use", "text": write_use(rng, place, code)})
        deps.append({"doc": use_id, "needs": def_id, "entity": place, "code": code})
    for j in range(num_misc):
        place = places[num_entities + j]
        docs.append({"id": f"misc-{j:03d}", "kind": "misc", "text": write_misc(rng, place, fresh_code(place))})
    rng.shuffle(docs)
    return Corpus(documents=docs, dependencies=deps)


def _distinct_places(rng: random.Random, n: int) -> list[str]:
    """``n`` fresh place names with pairwise different initials (so their codes start differently)."""
    places: list[str] = []
    while len(places) < n:
        p = _place(rng)
        if all(p[0] != q[0] for q in places):
            places.append(p)
    return places


def echo_drill(rng: random.Random, far: bool = False, shuffle: bool = False) -> str:
    """A list of 2-6 random seal codes, then the same codes again (characters 2..5 of a repeated code are
    predictable only by copying: the classic task on which induction heads form).

    ``far`` puts 0-4 filler sentences between the lists (copy distances of up to ~200 characters, as
    between a definition and a usage) and ``shuffle`` repeats the codes in another order (so only
    content-based copying works, not copying at a fixed offset)."""
    codes = [_code(rng, p) for p in _distinct_places(rng, rng.randint(2, 4) if far else rng.randint(3, 6))]
    again = codes[:]
    if shuffle:
        rng.shuffle(again)
    middle = _filler(rng, rng.randint(0, 4)) if far else ""
    return "seals: " + " ".join(codes) + "." + (" " + middle if middle else "") + "\n\nagain: " + " ".join(again) + "."


def training_text(rng: random.Random) -> str:
    """One sequence of the warm start's second phase.

    10% short echo drills, 45% far echo drills (half shuffled), 15% copy drills (2-4 short definitions,
    then uses of all but one of them in shuffled order), 30% 1-3 documents joined by blank lines: 45% a
    definition then its usage (copying pays), 15% the reverse, 25% an unrelated definition before a
    usage (copying must *not* happen), 15% a single document of any kind.
    """
    u = rng.random()
    if u < 0.10:
        return echo_drill(rng)
    if u < 0.55:
        return echo_drill(rng, far=True, shuffle=rng.random() < 0.5)
    if u < 0.70:
        places = _distinct_places(rng, rng.randint(2, 4))
        codes = [_code(rng, p) for p in places]
        defs = [f"registry of {p}: the seal {c}." for p, c in zip(places, codes)]
        order = list(range(len(places)))
        rng.shuffle(order)
        uses = [f"a courier from {places[i]} showed the seal {codes[i]}." for i in order[:-1]]
        return " ".join(defs) + "\n\n" + " ".join(uses)
    a, b = _distinct_places(rng, 2)
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


ECHO_FRACTION = 0.25
"""Share of the warm-start steps spent on short echo drills before the mixed phase (``training_text``)."""


def warm_start(model, tokenizer, recipe, generator: torch.Generator) -> None:
    """Train the corpus LM in place on freshly generated synthetic text (plain AdamW loop).

    Curriculum: the first ``ECHO_FRACTION`` of ``recipe.warm_start_steps`` are short echo drills (cheap
    sequences on which a copy mechanism forms within a few hundred steps), the rest are
    ``training_text`` sequences (documents, definitions and usages, plus short and far drills meant to
    stretch copying to document distances). ``recipe.batch_size`` sequences per step, the recipe's LR
    with a 2% linear warm-up, constant, then a linear decay to 10% over the last 30% of the steps;
    sequences truncated to 512 tokens. The python ``random`` stream is seeded from ``generator``, so the
    build is deterministic.

    This model learns to copy inside the short drills but stays tied to their format, so EntropyLong's
    verification keeps no planted pair with it; ``CacheLMScorer`` (``--model cachelm``) is the copying scorer
    meanwhile (``benchmarks/BENCHMARKS.md``).
    """
    from tqdm.auto import tqdm


    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator).item())
    rng = random.Random(seed)
    steps = max(1, int(recipe.warm_start_steps))
    echo_steps = int(steps * ECHO_FRACTION)
    warmup = max(1, steps // 50)

    def lr_lambda(s: int) -> float:
        return min((s + 1) / warmup, max(0.1, (steps - s) / (0.3 * steps)), 1.0)

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
        warm_start_update(model, optimizer, scheduler, loss)
        bar.set_postfix(loss=f"{loss.item():.3f}")
    model.eval()
