"""Parameter-name mapping for weight sync from a training module into a rollout engine's model.

Training wraps the policy (DeepSpeed / DDP add ``module.``; PEFT adds ``base_model.model.`` and moves a
wrapped layer's weight under ``.base_layer``), while the engine holds the plain Hugging Face model.
PEFT callers merge their adapters into the base weights first (``model.merge_adapter()``) and then send
the named tensors; the adapter tensors themselves (``lora_A``, ``lora_B``, ...) are skipped here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import torch

_WRAPPER_PREFIXES = ("module.", "_orig_mod.", "base_model.model.")
_ADAPTER_MARKER = re.compile(r"(^|\.)lora_[A-Za-z_]+(\.|$)")
_PEFT_ORIGINAL = re.compile(r"(^|\.)original_module\.")
_PEFT_SAVED = re.compile(r"\.modules_to_save\.[^.]+\.")


@dataclass(frozen=True)
class TrainerWeights:
    """A training module's weights as the trainer hands them to an engine for one sync: every parameter's
    name (as ``named_parameters`` gives it, wrappers included) and full shape, and ``gather(buckets)``, which
    yields the full tensors one bucket of names at a time. Gathering is the trainer's side of a sync (under
    ZeRO-3 each bucket is a collective every training rank runs together); engines only iterate it."""

    shapes: dict[str, tuple[int, ...]]
    gather: Callable[[list[list[str]]], Iterator[list[tuple[str, torch.Tensor]]]]

    def named_tensors(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Every parameter but the adapter tensors, one full tensor at a time."""
        for bucket in self.gather([[name] for name in self.shapes if not is_adapter_tensor(name)]):
            yield from bucket


def is_adapter_tensor(name: str) -> bool:
    """True for PEFT tensors that have no counterpart in the plain model: LoRA factors and magnitudes,
    and the frozen ``original_module`` copy PEFT keeps next to a trained ``modules_to_save`` module."""
    return bool(_ADAPTER_MARKER.search(name) or _PEFT_ORIGINAL.search(name))


def canonical_name(name: str) -> str:
    """The plain Hugging Face name of a parameter seen through DeepSpeed / DDP / torch.compile / PEFT.

    >>> canonical_name("module.base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight")
    'model.layers.0.self_attn.q_proj.weight'
    """
    stripped = True
    while stripped:
        stripped = False
        for prefix in _WRAPPER_PREFIXES:
            if name.startswith(prefix):
                name = name[len(prefix) :]
                stripped = True
    name = name.replace(".base_layer.", ".")
    return _PEFT_SAVED.sub(".", name)


def canonical_named_tensors(
    named_tensors: Iterable[tuple[str, torch.Tensor]],
) -> Iterator[tuple[str, str, torch.Tensor]]:
    """Yield ``(original_name, canonical_name, tensor)``, skipping adapter tensors (lazily, so a
    streamed, gathered-one-at-a-time state never has to sit in memory all at once)."""
    for name, tensor in named_tensors:
        if not is_adapter_tensor(name):
            yield name, canonical_name(name), tensor


class WeightReceiver:
    """Copies named tensors into a rollout engine's model in place and counts successful updates.

    Tensors are cast to each parameter's dtype and device on copy. Either name of a tied parameter
    (``lm_head.weight`` / ``model.embed_tokens.weight``) is accepted. An unknown name or a shape mismatch
    raises naming the parameter; tensors are streamed, so those before the bad one are already copied,
    and ``check_complete`` then raises until a later update succeeds.
    """

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.version = 0
        self._failed_at: str | None = None

    def update(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        targets = self.model.state_dict(keep_vars=True)  # keeps both names of tied parameters
        copied = 0
        with torch.no_grad():
            for name, canonical, tensor in canonical_named_tensors(named_tensors):
                target = targets.get(canonical)
                if target is None or target.shape != tensor.shape:
                    if copied:
                        self._failed_at = name
                    if target is None:
                        raise KeyError(
                            f"update_weights: the engine's model has no parameter {canonical!r} (sent as {name!r})"
                        )
                    raise ValueError(
                        f"update_weights: shape mismatch for {canonical!r} (sent as {name!r}): "
                        f"engine has {tuple(target.shape)}, got {tuple(tensor.shape)}"
                    )
                target.copy_(tensor)
                copied += 1
        self._failed_at = None
        self.version += 1

    def check_complete(self) -> None:
        """Raise if the last update stopped after copying part of the state."""
        if self._failed_at is not None:
            raise RuntimeError(
                f"update_weights failed at {self._failed_at!r} after copying part of the state; "
                "the model is a mix of two versions. Call update_weights again with a full state."
            )
