"""The data pipelines' ``vllm:PATH`` spec builds the project's vLLM engine (vLLM's CPU build): it scores
text through the pipelines' conventions (top-k, ``exact`` False), generates, and DMAP runs on it."""

from __future__ import annotations

import pytest
import torch

from data_pipelines.common.backends import encode_text, engine_label, load_backend
from posttrain.engines.base import SamplingParams
from tests.e2e.tiny_llama import save_tiny_llama

pytest.importorskip("vllm")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> str:
    return save_tiny_llama(tmp_path_factory.mktemp("tiny-llama-data"), num_layers=1, seed=4)


def test_vllm_spec_scores_generates_and_maps(model_dir):
    from data_pipelines.dmap.pipeline import map_texts
    from posttrain.engines.vllm import VLLMRolloutEngine

    engine = load_backend(f"vllm:{model_dir}", top_k=25)  # above vLLM's default max_logprobs of 20
    assert isinstance(engine, VLLMRolloutEngine) and engine.score_top_k == 25
    assert engine_label(engine).startswith("VLLMRolloutEngine(")
    hf = load_backend(model_dir)
    texts = ["registry of kupam: the seal KBY1A.", "a b\nc"]
    seqs = [encode_text(engine.tokenizer, t) for t in texts]
    for approx, exact in zip(engine.score(seqs, mass_above=True), hf.score(seqs, mass_above=True)):
        assert approx.token_ids == exact.token_ids and not approx.exact
        assert torch.allclose(torch.tensor(approx.logprobs), torch.tensor(exact.logprobs), atol=1e-3)
        assert len(approx.tied_mass) == len(approx.mass_above) == len(approx.logprobs)
    out = engine.generate([seqs[0][:5]], SamplingParams(max_new_tokens=8, seed=0))
    assert 0 < len(out.completion_ids[0]) == len(out.logprobs[0]) <= 8
    result = map_texts(engine, texts, seed=0)
    assert not result.exact and result.x.numel() == sum(len(s) - 1 for s in seqs)
