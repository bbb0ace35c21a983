"""Deterministic, resumable order over the training split.

Epoch ``e`` visits the examples in a permutation drawn from ``derive_seed(seed, "epoch", e)`` (or, with ``shuffle=False``,
in the dataset's own order, e.g. a curriculum written easy-to-hard); a step takes the next
``batch_size`` of them, crossing into the next epoch when one runs out. The whole state is the
number of examples consumed, so resuming (including exactly at an epoch boundary) replays nothing
and skips nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

import torch

from posttrain.common.seeds import derive_seed

T = TypeVar("T")


class EpochSampler(Generic[T]):
    def __init__(self, items: Sequence[T], batch_size: int, seed: int, shuffle: bool = True) -> None:
        if not items:
            raise ValueError("the training split is empty")
        self.items = items
        self.batch_size = batch_size
        self.seed = seed
        self.shuffle = shuffle
        self.consumed = 0
        self._cached_epoch = -1
        self._order: list[int] = []

    @property
    def epoch(self) -> int:
        return self.consumed // len(self.items)

    def _permutation(self, epoch: int) -> list[int]:
        if epoch != self._cached_epoch:
            if self.shuffle:
                generator = torch.Generator().manual_seed(derive_seed(self.seed, "epoch", epoch))
                self._order = torch.randperm(len(self.items), generator=generator).tolist()
            else:
                self._order = list(range(len(self.items)))
            self._cached_epoch = epoch
        return self._order

    def next_batch(self) -> list[T]:
        batch = []
        for _ in range(self.batch_size):
            epoch, index = divmod(self.consumed, len(self.items))
            batch.append(self.items[self._permutation(epoch)[index]])
            self.consumed += 1
        return batch

    def state_dict(self) -> dict[str, int]:
        return {"consumed": self.consumed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.consumed = int(state["consumed"])
