"""The trainer's weights as vLLM's weight-transfer protocol reads them (``WeightSource``): checkpoint names, full
shapes, one wire dtype, one bucket per decoder layer (vLLM's ``layerwise_groups``), whichever transport sends
them (``posttrain-gloo``, ``weight_sender.py``, or vLLM's ``nccl``) and whichever engine receives them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch
from vllm.distributed.weight_transfer.base import ParamMeta, WeightSource, layerwise_groups

from posttrain.engines.weight_sync.weights import (
    TrainerWeights,
    canonical_name,
    canonical_named_tensors,
    is_adapter_tensor,
)


class TrainerWeightSource(WeightSource):
    """The policy's weights as vLLM expects them: checkpoint names (``weights.canonical_name``; LoRA
    adapter tensors skipped, so PEFT callers merge first), full shapes (ZeRO-3 partitions included),
    one wire dtype, gathered a bucket (decoder layer) at a time by the trainer's ``TrainerWeights.gather``.
    Under ZeRO-3 every training rank must iterate it together (the gathers are collectives)."""

    def __init__(self, weights: TrainerWeights, dtype: torch.dtype) -> None:
        self.weights = weights
        self.dtype = dtype
        self._params = [(n, shape) for n, shape in weights.shapes.items() if not is_adapter_tensor(n)]
        names = [canonical_name(n) for n, _ in self._params]
        if len(set(names)) != len(names):
            seen: set[str] = set()
            dup = next(n for n in names if n in seen or seen.add(n))
            raise ValueError(f"two trainer parameters map to the checkpoint name {dup!r}")
        self._canonical = dict(zip((n for n, _ in self._params), names))

    def metadata(self) -> list[ParamMeta]:
        return [ParamMeta(self._canonical[n], self.dtype, tuple(shape)) for n, shape in self._params]

    def groups(self) -> list[list[str]]:
        return layerwise_groups([self._canonical[n] for n, _ in self._params])

    def iter_groups(self) -> Iterator[tuple[list[str], list[torch.Tensor]]]:
        by_canonical = {self._canonical[n]: n for n, _ in self._params}
        buckets = [[by_canonical[c] for c in group] for group in self.groups()]
        for bucket in self.weights.gather(buckets):
            tensors = [t.to(self.dtype) for _, t in bucket]
            if any(t.is_cuda for t in tensors):  # the gather and cast may run on other streams: land them first
                torch.cuda.synchronize(tensors[0].device)
            yield [self._canonical[n] for n, _ in bucket], tensors

    def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
        for names, tensors in self.iter_groups():
            yield from zip(names, tensors)


class NamedTensorSource(WeightSource):
    """A one-off ``WeightSource`` over already-full ``(name, tensor)`` pairs (names mapped by
    ``weights.canonical_name``, adapter tensors skipped), one bucket per decoder layer."""

    def __init__(self, named_tensors: Iterable[tuple[str, torch.Tensor]], dtype: torch.dtype) -> None:
        self.dtype = dtype
        self._tensors = {canonical: tensor for _, canonical, tensor in canonical_named_tensors(named_tensors)}
        if not self._tensors:
            raise ValueError("update_weights got no tensors to send")

    def metadata(self) -> list[ParamMeta]:
        return [ParamMeta(n, self.dtype, tuple(t.shape)) for n, t in self._tensors.items()]

    def groups(self) -> list[list[str]]:
        return layerwise_groups(list(self._tensors))

    def iter_groups(self) -> Iterator[tuple[list[str], list[torch.Tensor]]]:
        for group in self.groups():
            yield group, [self._tensors[n].to(self.dtype) for n in group]

    def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
        for names, tensors in self.iter_groups():
            yield from zip(names, tensors)
