"""EntropyLong's outputs scored against the planted (root, context) pairs of the built-in corpus
(``data_pipelines.common.corpus``): precision and recall of the verified contexts under any verify rule,
and the anchors' entropy before and after the contexts."""

from __future__ import annotations

from data_pipelines.entropylong.pipeline import RULE_FIELDS


def evaluate(outputs: list[dict], true_pairs: set[tuple[str, str]], epsilon: float | None = None,
             rule: str | None = None) -> dict:
    """Precision / recall of verified contexts against planted (root, context) pairs, and anchor entropies.

    With ``epsilon``/``rule`` given, the decision is recomputed from the stored candidate dI values
    (so one run evaluates several rules); otherwise the pipeline's ``kept`` flags are used.
    ``top1_planted``: over the roots with a planted partner among their candidates, the share whose best
    candidate by the rule's statistic (``max_delta`` for the paper's rule) is a planted partner: whether dI
    ranks the right context first, whatever the threshold.
    """
    roots = {o["id"] for o in outputs}
    truth = {p for p in true_pairs if p[0] in roots}
    predicted, retrieved = set(), set()
    statistic = RULE_FIELDS[rule or "anchor"]
    with_partner = [o for o in outputs if any((o["id"], c["doc_id"]) in truth for c in o["candidates"])]
    best_ok = [(o["id"], max(o["candidates"], key=lambda c: c[statistic])["doc_id"]) in truth for o in with_partner]
    for o in outputs:
        for c in o["candidates"]:
            retrieved.add((o["id"], c["doc_id"]))
            ok = c["kept"] if epsilon is None else c[RULE_FIELDS[rule or "anchor"]] > epsilon
            if ok:
                predicted.add((o["id"], c["doc_id"]))
    tp = len(predicted & truth)
    before = [a["entropy"] for o in outputs for a in o["anchors"] if a["entropy_with_contexts"] is not None]
    after = [a["entropy_with_contexts"] for o in outputs for a in o["anchors"] if a["entropy_with_contexts"] is not None]
    all_before = [a["entropy"] for o in outputs for a in o["anchors"]]
    return {
        "roots": len(roots), "true_pairs": len(truth), "predicted_pairs": len(predicted), "true_positives": tp,
        "precision": tp / len(predicted) if predicted else None,
        "recall": tp / len(truth) if truth else None,
        "retrieval_recall": len(retrieved & truth) / len(truth) if truth else None,
        "top1_planted": sum(best_ok) / len(best_ok) if best_ok else None,
        "anchors": len(all_before),
        "anchors_with_contexts": len(before),
        "anchor_entropy_before": sum(before) / len(before) if before else None,
        "anchor_entropy_after": sum(after) / len(after) if after else None,
        "anchor_entropy_before_all": sum(all_before) / len(all_before) if all_before else None,
    }
