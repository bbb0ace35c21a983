"""A count-based character LM with an in-context copy cache: a scorer that provably *uses* context.

p(x_t | x_<t) = lam * cache(x_t) + (1 - lam) * background(x_t | x_{t-2}, x_{t-1}) where the background is
an add-k smoothed trigram model counted on training text, and the cache is the distribution of the tokens
that followed earlier occurrences, in the same sequence, of the last ``match`` tokens (the classic cache
LM; an explicit induction mechanism). ``lam`` = ``cache_weight`` when the suffix occurred before, else 0.

It is a *scoring-only* engine (``ScoringEngine.score`` like the HF engine's, exact), a named
baseline of ``posttrain data entropylong --model cachelm``: it predicts whatever followed the same
``match`` characters earlier, so on the planted corpus its "verification" is string matching (any
context sharing a 4-character template lowers the entropy). The default scorer is a pretrained neural LM
(``smollm2-135m``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from posttrain.engines.base import check_score_inputs
from posttrain.engines.scores import TokenScores


class CacheLMScorer:
    """A ``ScoringEngine`` (see the module docstring) counted on ``texts``."""

    def __init__(self, tokenizer, texts: Sequence[str], *, match: int = 4, cache_weight: float = 0.95,
                 add_k: float = 0.1) -> None:
        self.tokenizer = tokenizer
        self.match = match
        self.cache_weight = cache_weight
        self.vocab = len(tokenizer)
        counts: dict[tuple[int, int], np.ndarray] = defaultdict(lambda: np.zeros(self.vocab))
        bos = tokenizer.bos_token_id
        for text in texts:
            ids = [bos, bos] + list(tokenizer(text, add_special_tokens=False)["input_ids"])
            for i in range(2, len(ids)):
                counts[(ids[i - 2], ids[i - 1])][ids[i]] += 1
        self._tri = {k: (v + add_k) / (v.sum() + add_k * self.vocab) for k, v in counts.items()}
        self._uniform = np.full(self.vocab, 1.0 / self.vocab)

    def _score_one(self, ids: list[int], entropy: bool, mass_above: bool) -> TokenScores:
        seen: dict[tuple[int, ...], np.ndarray] = {}
        lps, ents, masses, tied = [], [], [], []
        m = self.match
        for t in range(1, len(ids)):
            prev2 = ids[t - 2] if t >= 2 else ids[0]
            p = self._tri.get((prev2, ids[t - 1]), self._uniform)
            key = tuple(ids[t - m:t]) if t >= m else None
            if key is not None and key in seen:
                cache = seen[key] / seen[key].sum()
                p = self.cache_weight * cache + (1 - self.cache_weight) * p
            obs = p[ids[t]]
            lps.append(math.log(obs))
            if entropy:
                nz = p[p > 0]
                ents.append(float(-(nz * np.log(nz)).sum()))
            if mass_above:
                masses.append(float(p[p > obs].sum()))
                tied.append(float(p[p == obs].sum()))
            if key is not None:
                seen.setdefault(key, np.zeros(self.vocab))[ids[t]] += 1
        return TokenScores(ids[1:], lps, ents if entropy else None, masses if mass_above else None,
                           tied_mass=tied if mass_above else None)

    def score(self, sequences: list[list[int]], *, entropy: bool = True, mass_above: bool = False,
              full: bool = False) -> list[TokenScores]:
        """Exact scores of positions 1..T-1 of every token-id sequence (no full distributions)."""
        if full:
            raise ValueError("the copy-cache LM does not return full distributions")
        return [self._score_one(ids, entropy, mass_above) for ids in check_score_inputs(sequences)]
