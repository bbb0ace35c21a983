"""The two sides of a weight sync: the trainer lends ``TrainerWeights`` (names, full shapes, a bucket gatherer;
``posttrain.weight_sync``), the engine loads them (``posttrain.engines.weight_sync.load_weights``) without seeing the
trainer's module; PEFT adapters are merged for the push and unmerged after it."""

from __future__ import annotations

import copy

import pytest
import torch

from posttrain.engines.base import Sleeps, SyncsWeights
from posttrain.engines.hf import HFRolloutEngine
from posttrain.engines.weight_sync import (
    TrainerWeights,
    load_weights,
    rest_rollout,
    wake_rollout,
    wake_rollout_weights,
)
from posttrain.models.tiny import TinyRecipe, build_model, build_tokenizer
from posttrain.weight_sync import push_weights, trainer_weights


def _model(seed: int) -> torch.nn.Module:
    recipe = TinyRecipe(name="test-sync", kind="causal", arch="qwen2", hidden_size=32, num_layers=1, num_heads=4,
                        num_kv_heads=2, intermediate_size=64, max_position_embeddings=64, task=None, warm_start=None,
                        warm_start_steps=0, lr=0.0, batch_size=1, seed=seed)
    return build_model(recipe, build_tokenizer()).eval()


def test_trainer_weights_name_every_parameter_and_gather_in_the_asked_buckets() -> None:
    model = _model(0)
    weights = trainer_weights(model, zero_stage=0)
    assert weights.shapes == {n: tuple(p.shape) for n, p in model.named_parameters()}
    first, second = list(weights.shapes)[:2]
    buckets = list(weights.gather([[first, second], [first]]))
    assert [[n for n, _ in b] for b in buckets] == [[first, second], [first]]
    assert torch.equal(buckets[0][0][1], dict(model.named_parameters())[first])


def test_named_tensors_skip_adapter_tensors() -> None:
    tensors = {"w": torch.ones(2), "q.lora_A.default.weight": torch.zeros(1), "q.base_layer.weight": torch.ones(1)}
    weights = TrainerWeights({n: tuple(t.shape) for n, t in tensors.items()},
                             lambda buckets: ([(n, tensors[n]) for n in b] for b in buckets))
    assert [n for n, _ in weights.named_tensors()] == ["w", "q.base_layer.weight"]


def test_an_in_process_engine_ends_with_the_trainers_weights() -> None:
    trained, engine = _model(1), HFRolloutEngine(_model(0), build_tokenizer())
    load_weights(engine, trainer_weights(trained, zero_stage=0), version=3)
    for (name, mine), (_, theirs) in zip(engine.model.named_parameters(), trained.named_parameters()):
        assert torch.equal(mine, theirs), name


def test_push_weights_merges_a_peft_adapter_for_the_push_and_unmerges_it() -> None:
    peft = pytest.importorskip("peft")
    trained = peft.get_peft_model(_model(1), peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for name, tensor in trained.named_parameters():
            if "lora_B" in name:
                tensor.normal_(generator=torch.Generator().manual_seed(0))
    engine = HFRolloutEngine(_model(0), build_tokenizer())
    before = copy.deepcopy(dict(trained.named_parameters()))
    push_weights(engine, trained, zero_stage=0, step=1)
    ids = torch.tensor([[3, 4, 5]])
    with torch.no_grad():
        torch.testing.assert_close(engine.model(input_ids=ids).logits, trained(input_ids=ids).logits)
    for name, tensor in trained.named_parameters():  # unmerged again (merge + unmerge round in float32)
        torch.testing.assert_close(tensor, before[name], rtol=0, atol=1e-6, msg=name)


class _WholeSyncEngine(SyncsWeights, Sleeps):
    """A stand-in for the vLLM engines: declares both capabilities and records what it is asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def sync_from(self, weights: TrainerWeights, version: int) -> None:
        self.calls.append(("sync_from", (weights, version)))

    def update_weights(self, named_tensors: object) -> None:
        self.calls.append(("update_weights", named_tensors))

    def sleep(self, discard_weights: bool = False) -> None:
        self.calls.append(("sleep", discard_weights))

    def wake_weights(self) -> None:
        self.calls.append(("wake_weights", None))

    def wake_up(self) -> None:
        self.calls.append(("wake_up", None))


def test_an_engine_that_syncs_weights_whole_gets_them_whole_and_sleeps_around_training() -> None:
    engine, weights = _WholeSyncEngine(), trainer_weights(_model(1), zero_stage=0)
    load_weights(engine, weights, version=4)
    rest_rollout(engine, syncs_next=True)
    wake_rollout_weights(engine)
    wake_rollout(engine)
    assert engine.calls == [("sync_from", (weights, 4)), ("sleep", True), ("wake_weights", None), ("wake_up", None)]


def test_an_engine_without_the_capabilities_takes_named_tensors_and_is_never_put_to_sleep() -> None:
    engine = HFRolloutEngine(_model(0), build_tokenizer())
    assert not isinstance(engine, (SyncsWeights, Sleeps))
    rest_rollout(engine, syncs_next=True)  # nothing to free: a no-op, not an error
    wake_rollout_weights(engine)
    wake_rollout(engine)
    load_weights(engine, trainer_weights(_model(1), zero_stage=0), version=1)
    assert engine.weight_version == 1
