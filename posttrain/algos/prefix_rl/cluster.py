"""Prefix Clustering's maths ("Parameter-Efficient Reinforcement Learning using Prefix Optimization", ICLR 2026):
embed k-token prefixes, cluster them with k-means, pick the number of clusters by the elbow rule, and take each
cluster's representative. Pure functions over tensors, with explicit seeds; ``cluster_cli`` runs the models.

Embedding (the paper does not say which it uses): a positional one-hot of the prefix's token ids, one feature per
(position, token) pair for each of its k positions. Two prefixes are then as close as the number of positions
where their tokens agree, which is what "the same opening" means for the short, mostly identical openings of one
model. When the pairs fit in ``dims`` columns (``length * vocab_size <= dims``: the character-level tiny models,
about 110 tokens, k = 8 or 16) the one-hot is exact, column ``position * vocab_size + token``. On real
vocabularies (49,152 tokens for SmolLM2) each pair is hashed into ``dims`` buckets by a real hash of the pair,
BLAKE2b of ``"position:token"`` (8-byte digest, big-endian) mod ``dims`` (``pair_bucket``), so collisions are
scattered and only add a little noise. A linear index ``(position * vocab_size + token) mod dims`` would not
do: whenever ``vocab_size`` is a multiple of ``dims`` (49,152 = 12 x 4,096) the position term cancels and a
prefix and any permutation of it get the same features.
Prefixes shorter than k (the sample ended) leave their missing positions empty.

k-means: k-means++ initialisation from a seeded ``torch.Generator``, then Lloyd iterations until no point
changes cluster (an emptied cluster keeps its centroid). Elbow rule: over c = 1..C, the c whose (c, inertia)
point lies farthest below the chord from the first point to the last, both axes scaled to [0, 1].
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch


def pair_bucket(position: int, token: int, dims: int) -> int:
    """The hashed column of the (position, token) pair: BLAKE2b of ``"position:token"`` (8-byte digest, read
    big-endian) mod ``dims``; the same as ``printf 'position:token' | b2sum -l 64``, mod ``dims``."""
    digest = hashlib.blake2b(f"{position}:{token}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % dims


def prefix_features(prefixes: list[list[int]], length: int, vocab_size: int, dims: int = 4096) -> torch.Tensor:
    """``[N, min(length * vocab_size, dims)]`` float32 positional one-hots of the prefixes: exact when the
    pairs fit in ``dims`` columns, else hashed by ``pair_bucket`` (module docstring); tokens past ``length``
    are ignored."""
    if length < 1 or vocab_size < 1 or dims < 1:
        raise ValueError(f"length {length}, vocab_size {vocab_size} and dims {dims} must be >= 1")
    exact = length * vocab_size <= dims
    width = length * vocab_size if exact else dims
    features = torch.zeros(len(prefixes), width, dtype=torch.float32)
    for row, ids in enumerate(prefixes):
        for position, token in enumerate(ids[:length]):
            if not 0 <= token < vocab_size:
                raise ValueError(f"prefix {row}: token id {token} at position {position} is outside the vocabulary "
                                 f"of {vocab_size}")
            column = position * vocab_size + token if exact else pair_bucket(position, token, dims)
            features[row, column] += 1.0
    return features


@dataclass(frozen=True)
class KMeansFit:
    """One k-means solution: ``centroids [c, D]``, ``labels [N]`` and the inertia (sum of squared distances)."""

    centroids: torch.Tensor
    labels: torch.Tensor
    inertia: float


def _squared_distances(points: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    return ((points[:, None, :] - centroids[None, :, :]) ** 2).sum(-1)


def kmeans_plus_plus(points: torch.Tensor, clusters: int, generator: torch.Generator) -> torch.Tensor:
    """k-means++ seeding: the first centroid uniformly, each next one with probability proportional to the
    squared distance to the nearest centroid so far (uniformly when every point is already a centroid)."""
    n = points.shape[0]
    chosen = [int(torch.randint(n, (1,), generator=generator))]
    nearest = _squared_distances(points, points[chosen]).squeeze(1)
    for _ in range(1, clusters):
        weights = nearest if float(nearest.sum()) > 0 else torch.ones(n)
        index = int(torch.multinomial(weights, 1, generator=generator))
        chosen.append(index)
        nearest = torch.minimum(nearest, _squared_distances(points, points[index : index + 1]).squeeze(1))
    return points[chosen].clone()


def kmeans(points: torch.Tensor, clusters: int, seed: int, max_iterations: int = 100) -> KMeansFit:
    """k-means with ``clusters`` clusters over ``points [N, D]`` (k-means++ seeded by ``seed``, then Lloyd
    iterations until the labels stop changing or ``max_iterations``)."""
    if not 1 <= clusters <= points.shape[0]:
        raise ValueError(f"clusters must be in [1, {points.shape[0]}] (the number of points), got {clusters}")
    points = points.float()
    centroids = kmeans_plus_plus(points, clusters, torch.Generator().manual_seed(seed))
    labels = _squared_distances(points, centroids).argmin(1)
    for _ in range(max_iterations):
        for c in range(clusters):
            members = points[labels == c]
            if len(members):
                centroids[c] = members.mean(0)
        new_labels = _squared_distances(points, centroids).argmin(1)
        if torch.equal(new_labels, labels):
            break
        labels = new_labels
    inertia = float(_squared_distances(points, centroids).gather(1, labels[:, None]).sum())
    return KMeansFit(centroids, labels, inertia)


def elbow(inertias: list[float]) -> int:
    """The number of clusters (1-based: ``inertias[i]`` is the fit with i + 1 clusters) at the elbow: the point
    farthest below the chord from the first to the last, both axes scaled to [0, 1]; ties go to fewer
    clusters. Fewer than 3 fits have no elbow: the largest count is returned (1 when nothing is left to
    explain, i.e. the first inertia is 0)."""
    if not inertias:
        raise ValueError("elbow needs the inertia of at least one fit")
    first, last = inertias[0], inertias[-1]
    if first <= 0:
        return 1
    n = len(inertias)
    if n < 3:
        return n
    span = (first - last) or 1.0
    best, best_gap = 1, 0.0
    for i, inertia in enumerate(inertias):
        x = i / (n - 1)
        chord = 1.0 - x  # the chord from (0, 1) to (1, 0) in scaled coordinates
        gap = chord - (inertia - last) / span
        if gap > best_gap + 1e-12:
            best, best_gap = i + 1, gap
    return best


def representatives(points: torch.Tensor, fit: KMeansFit) -> list[int]:
    """Per cluster, the index of its member nearest the centroid (a real prefix; the lowest index on ties);
    -1 for an empty cluster."""
    distances = _squared_distances(points.float(), fit.centroids)
    out = []
    for c in range(fit.centroids.shape[0]):
        members = (fit.labels == c).nonzero().flatten()
        out.append(int(members[distances[members, c].argmin()]) if len(members) else -1)
    return out


def best_cluster(scores: list[float]) -> int:
    """The index of the highest train score (the first on ties): the paper's i_max."""
    if not scores:
        raise ValueError("best_cluster needs at least one score")
    return max(range(len(scores)), key=lambda i: (scores[i], -i))
