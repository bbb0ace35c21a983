"""DESIGNER's seed-question sampling: k-means per discipline, then a fixed difficulty ratio per cluster.

DESIGNER (Liu et al., 2025) clusters each discipline's questions (k-means, k chosen by silhouette score)
and draws the same number of questions from every cluster at Very Hard : Hard : Medium = 3 : 2 : 1,
filling a shortfall of hard questions with easier ones. A cluster with too few questions of a level to
honour the ratio is reported (``ratio_shortfall``; ``sample_seeds`` returns one entry per such cluster), so
a user sees where the draw is easier than 3:2:1. Deviation: the paper sets per-discipline totals
from the bank's discipline distribution; here every cluster gets the same ``per_cluster`` quota.
"""

from __future__ import annotations

import random
from collections import Counter

import numpy as np

DIFFICULTIES = ("Easy", "Medium", "Hard", "Very Hard")
RATIO = {"Very Hard": 3, "Hard": 2, "Medium": 1}
"""The paper's draw ratio; Easy questions are drawn only to fill a shortfall."""


def ratio_quota(total: int, ratio: dict[str, int] = RATIO) -> dict[str, int]:
    """``total`` split by ``ratio`` (largest remainders go to the harder levels first)."""
    weight = sum(ratio.values())
    exact = {level: total * w / weight for level, w in ratio.items()}
    quota = {level: int(v) for level, v in exact.items()}
    order = sorted(ratio, key=lambda lv: (-(exact[lv] - quota[lv]), -DIFFICULTIES.index(lv)))
    for level in order[:total - sum(quota.values())]:
        quota[level] += 1
    return quota


def sample_cluster(difficulties: list[str], total: int, rng: random.Random,
                   ratio: dict[str, int] = RATIO) -> list[int]:
    """Indices of ``min(total, len)`` questions of one cluster drawn at ``ratio``; a level that runs short
    passes its remaining quota to the next easier level (Very Hard -> Hard -> Medium -> Easy), and what
    is still missing then comes from the hardest leftovers."""
    by_level: dict[str, list[int]] = {lv: [] for lv in DIFFICULTIES}
    for i, level in enumerate(difficulties):
        if level not in by_level:
            raise ValueError(f"question {i}: difficulty {level!r} is not one of {DIFFICULTIES}")
        by_level[level].append(i)
    for members in by_level.values():
        rng.shuffle(members)
    quota = ratio_quota(min(total, len(difficulties)), ratio)
    chosen: list[int] = []
    carry = 0
    for level in reversed(DIFFICULTIES):
        want = quota.get(level, 0) + carry
        take = by_level[level][:want]
        by_level[level] = by_level[level][want:]
        chosen += take
        carry = want - len(take)
    for level in reversed(DIFFICULTIES):
        if carry <= 0:
            break
        take = by_level[level][:carry]
        by_level[level] = by_level[level][carry:]
        chosen += take
        carry -= len(take)
    return sorted(chosen)


def ratio_shortfall(difficulties: list[str], total: int, ratio: dict[str, int] = RATIO) -> dict[str, int]:
    """Per level of ``ratio``: how many questions one cluster (its questions' ``difficulties``) lacks to fill
    that level's quota of a ``min(total, len)`` draw (``ratio_quota``); levels without a shortfall are left
    out, so ``{}`` means the ratio is honoured."""
    have = Counter(difficulties)
    quota = ratio_quota(min(total, len(difficulties)), ratio)
    return {level: want - have[level] for level, want in quota.items() if have[level] < want}


def choose_k_means(vectors: np.ndarray, k_max: int, seed: int = 0) -> np.ndarray:
    """Cluster labels from k-means with k in ``2..k_max`` chosen by the best silhouette score
    (one cluster when there are fewer than 3 points or ``k_max < 2``)."""
    n = len(vectors)
    if n < 3 or k_max < 2:
        return np.zeros(n, dtype=int)
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    best_labels, best_score = np.zeros(n, dtype=int), -2.0
    for k in range(2, min(k_max, n - 1) + 1):
        labels = KMeans(n_clusters=k, n_init=4, random_state=seed).fit_predict(vectors)
        if len(set(labels)) < 2:
            continue
        score = silhouette_score(vectors, labels)
        if score > best_score:
            best_labels, best_score = labels, score
    return best_labels


def sample_seeds(records: list[dict], vectors: np.ndarray, per_cluster: int, k_max: int,
                 seed: int = 0) -> tuple[list[dict], list[dict]]:
    """Seed questions: per discipline, clusters by ``choose_k_means``, ``sample_cluster`` from each. Each
    returned record gains ``cluster`` (``"discipline/k"``); order is the input order. Also returns one
    ``{"cluster", "size", "quota", "short"}`` per cluster whose draw could not honour the ratio
    (``ratio_shortfall``; ``short``: level -> questions missing), in cluster order."""
    rng = random.Random(seed)
    by_discipline: dict[str, list[int]] = {}
    for i, record in enumerate(records):
        by_discipline.setdefault(record["discipline"], []).append(i)
    picked: dict[int, str] = {}
    shortfalls: list[dict] = []
    for discipline in sorted(by_discipline):
        members = by_discipline[discipline]
        labels = choose_k_means(vectors[members], k_max, seed)
        for cluster in sorted(set(labels.tolist())):
            in_cluster = [members[j] for j in np.flatnonzero(labels == cluster)]
            levels = [records[i]["difficulty"] for i in in_cluster]
            name = f"{discipline}/{cluster}"
            for j in sample_cluster(levels, per_cluster, rng):
                picked[in_cluster[j]] = name
            short = ratio_shortfall(levels, per_cluster)
            if short:
                shortfalls.append({"cluster": name, "size": len(levels),
                                   "quota": ratio_quota(min(per_cluster, len(levels))), "short": short})
    return [{**records[i], "cluster": picked[i]} for i in sorted(picked)], shortfalls
