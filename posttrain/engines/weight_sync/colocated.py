"""The colocated vLLM engine's weight sync on CPU (``vllm_setup.GLOO_TRANSFER``): ``posttrain-gloo``'s sender
(``weight_sender.py``) driving the in-process ``vllm.LLM`` through ``LocalClient``."""

from __future__ import annotations

from typing import Any

from posttrain.engines.weight_sync.rendezvous import free_port
from posttrain.engines.weight_sync.weight_sender import WeightSender
from posttrain.engines.weight_sync.weight_transfer import GlooTrainerInitInfo


class LocalClient:
    """``VLLMWeightSyncClient`` over an in-process ``vllm.LLM`` (the colocated placement)."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        self.llm.init_weight_transfer_engine({"init_info": init_info})

    def start_weight_update(self) -> None:
        self.llm.start_weight_update()

    def update_weights(self, update_info: dict[str, Any]) -> None:
        self.llm.update_weights({"update_info": update_info})

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        self.llm.finish_weight_update(weight_version=weight_version)


def open_colocated_sender(llm: Any, timeout_s: float) -> WeightSender:
    """The sender of every sync into the in-process ``llm``: a two-rank gloo group on the loopback interface
    (this process on both sides), each collective and call bounded by ``timeout_s``."""
    info = GlooTrainerInitInfo(master_address="127.0.0.1", master_port=free_port(), world_size=2,
                               timeout_s=timeout_s, rank=0)
    return WeightSender.trainer_init(info, client=LocalClient(llm), peer="the colocated vLLM engine")
