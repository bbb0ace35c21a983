"""What one Ray actor of a pipeline stage reserves: a GPU when it loads a model onto a CUDA device.

Ray places an actor on a node with the resources it asks for and sets ``CUDA_VISIBLE_DEVICES`` to the GPU it
reserved; an actor that asks for none shares whatever GPU torch finds with every other actor, so two
engines land on one card while the others stay idle. ``actor_gpus`` decides the request from the stage's
engines and ``--device``: an engine the actor loads itself (an HF model, colocated vLLM) needs one GPU on a
CUDA device (so does no engine named: the embedded default model); an engine served elsewhere (``http://...``, ``vllm-remote:...``), the count-based ``cachelm``,
the ``fake`` engine and an engine object already built in this process need none.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from posttrain.engines.spec import CacheLMSpec, FakeSpec, HTTPSpec, VLLMRemoteSpec, parse_engine_spec

NO_LOCAL_MODEL = (HTTPSpec, VLLMRemoteSpec, CacheLMSpec, FakeSpec)
"""Engine kinds that hold no model on the actor's device."""


def is_cuda_device(device: str) -> bool:
    """``cuda`` or ``cuda:N``."""
    return device == "cuda" or device.startswith("cuda:")


def loads_local_model(engine: Any) -> bool:
    """Whether an actor given ``engine`` (an engine spec string, None for the embedded default model, or an
    engine object) loads a model itself."""
    if engine is None:
        return True
    if not isinstance(engine, str):
        return False
    return not isinstance(parse_engine_spec(engine), NO_LOCAL_MODEL)


def actor_gpus(engines: Iterable[Any], device: str) -> float:
    """GPUs one actor reserves: 1 when ``device`` is a CUDA device and the actor loads one of ``engines``
    itself (``loads_local_model``), else 0. An actor holding several local engines (a stage with a
    generator and a judge) still reserves one GPU: they share it, as they would in one process."""
    return 1 if is_cuda_device(device) and any(loads_local_model(e) for e in engines) else 0
