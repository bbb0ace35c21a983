"""Exact token scores of a Hugging Face causal LM: what ``HFRolloutEngine.score`` computes.

Full softmax in float32 per position: log-probs (``likelihood.logprobs_from_logits``), entropies
(``likelihood.entropy_from_logits``), DMAP mass above and tied mass of the observed token
(``scores.mass_above_from_logits``, ``scores.tied_mass_from_logits``) and, with ``full=True``, the ``[T-1, V]`` log-prob distributions. Sequences are sorted by length so that a
batch holds similar lengths, left-padded (``models.padding``: positions from the attention mask, so a
padded row scores exactly like the sequence alone), and a batch is bounded both by ``max_batch_size``
rows and by ``max_batch_tokens`` padded tokens.
"""

from __future__ import annotations

import torch

from posttrain.common.padding import left_pad, left_padded_positions
from posttrain.engines.scores import TokenScores, mass_above_from_logits, tied_mass_from_logits
from posttrain.models.likelihood import entropy_from_logits, logprobs_from_logits


def length_sorted_batches(lengths: list[int], max_batch_size: int, max_batch_tokens: int) -> list[list[int]]:
    """Indices of ``lengths`` grouped longest first, each group within ``max_batch_size`` rows and
    ``max_batch_tokens`` padded tokens (a single sequence longer than that is a batch of its own)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        # longest first: the first index of a batch sets its padded width
        if current and (len(current) >= max_batch_size or lengths[current[0]] * (len(current) + 1) > max_batch_tokens):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


@torch.inference_mode()
def score_causal_lm(model: torch.nn.Module, sequences: list[list[int]], pad_id: int, *, device: torch.device,
                    max_batch_size: int, max_batch_tokens: int, entropy: bool, mass_above: bool,
                    full: bool) -> list[TokenScores]:
    """Scores of positions 1..T-1 of every sequence (each at least 2 tokens), in input order."""
    results: list[TokenScores | None] = [None] * len(sequences)
    for batch in length_sorted_batches([len(s) for s in sequences], max_batch_size, max_batch_tokens):
        input_ids, mask = left_pad([sequences[i] for i in batch], pad_id)
        input_ids, mask = input_ids.to(device), mask.to(device)
        logits = model(input_ids=input_ids, attention_mask=mask, position_ids=left_padded_positions(mask)).logits
        width = logits.size(1)
        for row, i in enumerate(batch):
            n = len(sequences[i])
            step_logits = logits[row, width - n : -1].float()  # position t predicts token t + 1
            targets = input_ids[row, width - n + 1 :]
            results[i] = TokenScores(
                token_ids=list(sequences[i][1:]),
                logprobs=logprobs_from_logits(step_logits, targets).tolist(),
                entropies=entropy_from_logits(step_logits).tolist() if entropy else None,
                mass_above=mass_above_from_logits(step_logits, targets).tolist() if mass_above else None,
                distributions=torch.log_softmax(step_logits, -1).cpu() if full else None,
                tied_mass=tied_mass_from_logits(step_logits, targets).tolist() if mass_above else None,
            )
    return results  # type: ignore[return-value]
