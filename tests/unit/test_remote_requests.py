"""The remote rollout engine's requests and weight dtype, without workers: per-sample seeds that do not depend
on how prompts are grouped into requests, the cut of a worker's share into one request per group of copies,
and the dtype the weights travel in (the workers' served dtype, asked at the first sync)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import torch

from posttrain.engines.base import sample_seed, sample_seeds
from posttrain.engines.remote import RemoteVLLMEngine, request_runs
from posttrain.engines.weight_sync import WorkerError
from posttrain.engines.weight_sync.remote_sync import wire_dtype


def test_copies_of_a_prompt_get_consecutive_seeds_and_distinct_prompts_their_own() -> None:
    prompts = [[1, 2], [1, 2], [1, 2], [3], [1, 2]]
    a, d, e = sample_seed(9, 0), sample_seed(9, 3), sample_seed(9, 4)
    assert sample_seeds(9, prompts) == [a, a + 1, a + 2, d, e]
    assert sample_seeds(9, [[5], [6]]) == [sample_seed(9, 0), sample_seed(9, 1)]  # as before for distinct prompts


def test_a_share_is_cut_into_one_request_per_group_of_copies() -> None:
    prompts = [[1]] * 3 + [[2]] * 3
    seeds = sample_seeds(4, prompts)
    assert request_runs(prompts, seeds, slice(0, 6)) == [(0, 3), (3, 3)]
    # a worker whose slice starts inside a group asks for the rest of it, seeded from its first sample there
    assert request_runs(prompts, seeds, slice(2, 6)) == [(2, 1), (3, 3)]
    assert request_runs(prompts, None, slice(0, 4)) == [(0, 3), (3, 1)]  # unseeded copies still go together
    # copies whose seeds do not follow one another (not one run) are separate requests
    assert request_runs([[1], [1]], [10, 12], slice(0, 2)) == [(0, 1), (1, 1)]
    assert request_runs(prompts, seeds, slice(3, 3)) == []


def test_weights_travel_in_the_dtype_the_workers_serve(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="posttrain.engines.weight_sync.remote_sync"):
        assert wire_dtype(torch.float32, {"http://a:1": "bfloat16", "http://b:1": "bfloat16"}) == torch.bfloat16
    assert "sent as torch.bfloat16" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="posttrain.engines.weight_sync.remote_sync"):
        assert wire_dtype(torch.float32, {"http://a:1": "float32"}) == torch.float32
    assert caplog.text == ""  # the trainer's own dtype: nothing to say
    with pytest.raises(WorkerError, match=r"http://a:1, http://b:1.*different dtypes"):
        wire_dtype(torch.float32, {"http://a:1": "bfloat16", "http://b:1": "float32"})
    with pytest.raises(WorkerError, match=r"http://a:1.*serves float8_e4m3fn.*--dtype"):
        wire_dtype(torch.bfloat16, {"http://a:1": "float8_e4m3fn"})


def test_the_first_sync_asks_the_workers_dtype_once_and_sends_in_it(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = RemoteVLLMEngine(["http://127.0.0.1:9"], tokenizer=object(), dtype=torch.float32)  # contacts nothing
    asked: list[str] = []
    sent: list[tuple[torch.dtype, int]] = []
    monkeypatch.setattr(engine._control[0], "served_dtype", lambda: asked.append("dtype") or "bfloat16")
    monkeypatch.setattr(engine._control[0], "logprobs_mode", lambda: "processed_logprobs")

    def send(source: Any, version: int) -> None:
        sent.append((source.dtype, version))
        assert all(t.dtype == torch.bfloat16 for _, t in source)  # the tensors themselves are cast

    monkeypatch.setattr(engine._weights, "push", send)
    weights = [("model.embed_tokens.weight", torch.ones(4, 2)), ("model.norm.weight", torch.ones(2))]
    engine.update_weights(weights, version=1)
    engine.update_weights(weights, version=2)
    assert sent == [(torch.bfloat16, 1), (torch.bfloat16, 2)] and asked == ["dtype"]
    engine.close()



def test_a_worker_reporting_raw_log_probs_is_refused_naming_it() -> None:
    from posttrain.engines.weight_sync.remote_sync import check_logprobs_mode

    check_logprobs_mode("http://w:1", "processed_logprobs")
    with pytest.raises(WorkerError, match="http://w:1.*raw_logprobs.*processed_logprobs"):
        check_logprobs_mode("http://w:1", "raw_logprobs")
