"""Token scores of engines that only see the top-k log-probs of each position (vLLM's ``prompt_logprobs``,
an OpenAI-compatible server's ``echo=true, logprobs=k``): the approximations are those of
``posttrain.engines.scores`` (``topk_entropy``, ``topk_mass_above``, ``topk_tied_mass``), so
``TokenScores.exact`` is False."""

from __future__ import annotations

import math
from collections.abc import Sequence

from posttrain.engines.scores import TokenScores, topk_entropy, topk_mass_above, topk_tied_mass


def scores_from_topk(token_ids: list[int], observed: Sequence[float | None], tops: Sequence[Sequence[float]],
                     *, entropy: bool, mass_above: bool) -> TokenScores:
    """``TokenScores`` of the scored ``token_ids`` from, per position, the observed token's log-prob
    (``None``, as servers send for an unrepresentable value, becomes ``-inf``) and the top-k log-probs
    (the observed token among them only when it ranks in the top-k). ``mass_above`` also gives the tied
    mass (the DMAP interval width)."""
    if not len(token_ids) == len(observed) == len(tops):
        raise ValueError(f"top-k scores are misaligned: {len(token_ids)} tokens, {len(observed)} observed "
                         f"log-probs, {len(tops)} top-k lists")
    logprobs = [-math.inf if lp is None else float(lp) for lp in observed]
    return TokenScores(
        token_ids=list(token_ids),
        logprobs=logprobs,
        entropies=[topk_entropy(top) for top in tops] if entropy else None,
        mass_above=[topk_mass_above(top, lp)[0] for top, lp in zip(tops, logprobs)] if mass_above else None,
        exact=False,
        tied_mass=[topk_tied_mass(top, lp)[0] for top, lp in zip(tops, logprobs)] if mass_above else None,
    )
