"""DESIGNER's design-logic deduplication: a similarity-threshold graph, its components, a medoid each.

DESIGNER (Liu et al., 2025): within a discipline, logics whose embeddings have cosine similarity
``S_ij >= tau`` (0.85) are joined; every connected component keeps its medoid
``argmax_i sum_{j in C, j != i} S_ij``. Edges come from a FAISS range search on normalised embeddings
(``IndexFlatIP``), never an ``n x n`` matrix; components from union-find; medoids from the component's own
small similarity block.
"""

from __future__ import annotations

import numpy as np


class UnionFind:
    """Disjoint sets over ``0..n-1`` with path halving and union by size."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))
        self.size = [1] * n

    def find(self, x: int) -> int:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        if self.size[ra] < self.size[rb]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.size[ra] += self.size[rb]

    def components(self) -> list[list[int]]:
        """Components as sorted index lists, ordered by their smallest member."""
        groups: dict[int, list[int]] = {}
        for i in range(len(self.parent)):
            groups.setdefault(self.find(i), []).append(i)
        return sorted(groups.values(), key=lambda g: g[0])


def threshold_edges(vectors: np.ndarray, tau: float) -> list[tuple[int, int]]:
    """Pairs ``i < j`` with inner product ``>= tau`` (cosine for normalised rows), by FAISS range search."""
    import faiss

    x = np.ascontiguousarray(vectors, dtype=np.float32)
    index = faiss.IndexFlatIP(x.shape[1])
    index.add(x)
    # range_search keeps scores > radius; nudge down so that ties at tau count as the paper's >=
    lims, _, ids = index.range_search(x, float(np.nextafter(np.float32(tau), np.float32(-1))))
    edges = []
    for i in range(len(x)):
        for j in ids[lims[i]:lims[i + 1]]:
            if i < int(j):
                edges.append((i, int(j)))
    return edges


def medoid(vectors: np.ndarray, members: list[int]) -> int:
    """The member with the largest summed similarity to the other members (ties: the smallest index)."""
    block = vectors[members] @ vectors[members].T
    totals = block.sum(axis=1) - np.diag(block)
    return members[int(np.argmax(totals))]


def dedup_logics(vectors: np.ndarray, groups: list[str], tau: float = 0.85) -> tuple[list[int], dict[int, int]]:
    """Indices kept (one medoid per component, components found within each group) and
    ``{dropped index: its component's medoid}``."""
    if len(vectors) != len(groups):
        raise ValueError(f"{len(vectors)} embeddings for {len(groups)} group labels")
    keep: list[int] = []
    dropped: dict[int, int] = {}
    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    for members in by_group.values():
        sub = vectors[members]
        forest = UnionFind(len(members))
        for a, b in threshold_edges(sub, tau):
            forest.union(a, b)
        for component in forest.components():
            centre = medoid(sub, component)
            keep.append(members[centre])
            for j in component:
                if j != centre:
                    dropped[members[j]] = members[centre]
    return sorted(keep), dropped
