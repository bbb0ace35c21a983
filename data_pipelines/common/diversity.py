"""Diversity metrics of a set of texts' embeddings, as DESIGNER reports them for question sets.

DESIGNER (Liu, Zhao, ..., Zheng, "DESIGNER: Design-Logic-Guided Multidisciplinary Data Synthesis for LLM
Reasoning", 2025) compares question sets by five numbers on sentence embeddings: mean pairwise cosine
distance, mean pairwise L2 distance, mean 1-nearest-neighbour cosine distance, k-means inertia, and the
"radius" (geometric mean of the per-dimension standard deviations). Higher means more spread out.

No function builds the ``n x n`` similarity matrix: the mean pairwise cosine distance and the mean squared
L2 distance have closed forms (through the sum of the vectors), the mean L2 distance and the 1-NN distance
are computed in row blocks of ``block`` rows (``block x n`` at a time). Means over pairs are over the
``n (n - 1)`` ordered pairs ``i != j``.

CLI body (``posttrain data diversity``): ``add_diversity_args(parser)`` / ``run_diversity(args) -> int``,
JSONL (or any ``open_source`` format) in, ``--field`` the text field, JSON report out.
"""

from __future__ import annotations

import json
import math

import numpy as np

from posttrain.common.files import atomic_write_text


def _check(vectors: np.ndarray, least: int = 2) -> np.ndarray:
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"embeddings must be a 2-d array [n, d], got shape {x.shape}")
    if x.shape[0] < least:
        raise ValueError(f"need at least {least} embeddings, got {x.shape[0]}")
    return x


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero)."""
    x = np.asarray(vectors, dtype=np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def mean_pairwise_cosine_distance(vectors: np.ndarray) -> float:
    """Mean of ``1 - cos(x_i, x_j)`` over ``i != j``; closed form ``1 - (|sum u|^2 - n) / (n (n - 1))``
    with ``u`` the normalised rows (``sum_{i != j} u_i.u_j = |sum u|^2 - sum |u_i|^2``)."""
    u = normalise(_check(vectors))
    n = u.shape[0]
    total = u.sum(axis=0)
    off_diagonal = float(total @ total) - float((u * u).sum())
    return 1.0 - off_diagonal / (n * (n - 1))


def mean_pairwise_sq_l2(vectors: np.ndarray) -> float:
    """Mean of ``|x_i - x_j|^2`` over ``i != j``; closed form ``(2 n sum |x_i|^2 - 2 |sum x|^2) / (n (n - 1))``."""
    x = _check(vectors)
    n = x.shape[0]
    total = x.sum(axis=0)
    return (2 * n * float((x * x).sum()) - 2 * float(total @ total)) / (n * (n - 1))


def _row_blocks(n: int, block: int):
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    for start in range(0, n, block):
        yield start, min(n, start + block)


def _sq_distances(x: np.ndarray, start: int, stop: int, sq_norms: np.ndarray) -> np.ndarray:
    """``[stop - start, n]`` squared L2 distances of rows ``start:stop`` to all rows (clipped at 0)."""
    d = sq_norms[start:stop, None] + sq_norms[None, :] - 2.0 * (x[start:stop] @ x.T)
    return np.maximum(d, 0.0)


def mean_pairwise_l2(vectors: np.ndarray, block: int = 1024) -> float:
    """Mean of ``|x_i - x_j|`` over ``i != j``, ``block`` rows at a time (no closed form for the root)."""
    x = _check(vectors)
    n = x.shape[0]
    sq_norms = (x * x).sum(axis=1)
    total = 0.0
    for start, stop in _row_blocks(n, block):
        d = np.sqrt(_sq_distances(x, start, stop, sq_norms))
        d[np.arange(stop - start), np.arange(start, stop)] = 0.0
        total += float(d.sum())
    return total / (n * (n - 1))


def mean_nn_cosine_distance(vectors: np.ndarray, block: int = 1024) -> float:
    """Mean over points of ``1 - max_{j != i} cos(x_i, x_j)``: the distance to the nearest other point."""
    u = normalise(_check(vectors))
    n = u.shape[0]
    nearest = np.empty(n)
    for start, stop in _row_blocks(n, block):
        sims = u[start:stop] @ u.T
        sims[np.arange(stop - start), np.arange(start, stop)] = -np.inf
        nearest[start:stop] = sims.max(axis=1)
    return float(np.mean(1.0 - nearest))


def kmeans_inertia(vectors: np.ndarray, k: int, seed: int = 0) -> float:
    """Sum of squared distances to the nearest of ``k`` k-means centres (scikit-learn, ``n_init=4``).
    It grows with ``n``: compare sets of equal size, or use the per-point value."""
    from sklearn.cluster import KMeans

    x = _check(vectors)
    if not 1 <= k <= x.shape[0]:
        raise ValueError(f"k must be in [1, n={x.shape[0]}], got {k}")
    return float(KMeans(n_clusters=k, n_init=4, random_state=seed).fit(x).inertia_)


def radius(vectors: np.ndarray, eps: float = 1e-12) -> float:
    """Geometric mean of the per-dimension standard deviations (population std, ``ddof=0``); a dimension
    with zero spread counts as ``eps`` so the log stays finite."""
    x = _check(vectors)
    std = x.std(axis=0)
    return float(math.exp(np.mean(np.log(np.maximum(std, eps)))))


def diversity_report(vectors: np.ndarray, k: int | None = None, seed: int = 0, block: int = 1024) -> dict:
    """All five metrics (and the mean squared L2 and per-point inertia) of one embedding set.
    ``k`` defaults to ``min(10, n)``."""
    x = _check(vectors)
    n = x.shape[0]
    k = min(10, n) if k is None else k
    inertia = kmeans_inertia(x, k, seed)
    return {"n": n, "dim": int(x.shape[1]),
            "mean_pairwise_cosine_distance": mean_pairwise_cosine_distance(x),
            "mean_pairwise_l2": mean_pairwise_l2(x, block),
            "mean_pairwise_sq_l2": mean_pairwise_sq_l2(x),
            "mean_1nn_cosine_distance": mean_nn_cosine_distance(x, block),
            "kmeans_k": k, "kmeans_inertia": inertia, "kmeans_inertia_per_point": inertia / n,
            "radius": radius(x)}


def texts_diversity(texts: list[str], embedder, k: int | None = None, seed: int = 0) -> dict:
    """``diversity_report`` of ``embedder.encode(texts)`` (the embedder's name recorded)."""
    report = diversity_report(embedder.encode(texts), k=k, seed=seed)
    return {"embedder": getattr(embedder, "name", type(embedder).__name__), **report}


def add_diversity_args(parser) -> None:
    from data_pipelines.common.embed import add_embedder_arg

    parser.add_argument("input", help="question set: JSONL / Parquet / save_to_disk / hub dataset")
    parser.add_argument("--field", default="question", help="record field holding the text")
    add_embedder_arg(parser)
    parser.add_argument("--k", type=int, default=None, help="k-means clusters for the inertia (default min(10, n))")
    parser.add_argument("--limit", type=int, default=0, help="use only the first N records (0 = all)")
    parser.add_argument("--seed", type=int, default=0, help="k-means seed")
    parser.add_argument("--output", default=None, help="write the JSON report here too (default: stdout only)")


def run_diversity(args) -> int:
    from data_pipelines.common.embed import load_embedder
    from data_pipelines.common.io import read_text_records

    try:
        texts = [r[args.field] for r in read_text_records(args.input, args.field, args.limit)]
        report = {"input": args.input, "field": args.field,
                  **texts_diversity(texts, load_embedder(args.embedder), k=args.k, seed=args.seed)}
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    text = json.dumps(report, indent=2) + "\n"
    print(text, end="")
    if args.output:
        atomic_write_text(args.output, text)
    return 0
