"""VLLMRolloutEngine on vLLM's CPU build (no mocks): greedy decodes the HF model on a tiny model and on
SmolLM2-135M (also under a JSON schema: vLLM's structured outputs vs our xgrammar mask), sampled log-probs
equal the HF scoring of the same tokens (the masked distribution's under a schema), seeds, stops, weight
sync through vLLM's weight-transfer protocol, and the clear errors. One engine start per model (module
fixtures).

Greedy is checked through log-probs of vLLM's own tokens (``tests.e2e.sync_harness.assert_greedy_of``: the HF
model scores them as vLLM did, and each is the HF argmax up to a near-tie), never by comparing token sequences:
two kernels may break a near-tie of the same weights differently and decode different, equally greedy, tokens."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from posttrain.algos.sequences import pack_sequences
from posttrain.config import ConfigError
from posttrain.engines.base import RolloutEngine, SamplingParams, sample_seed
from posttrain.engines.hf import HFRolloutEngine
from posttrain.engines.vllm import VLLMRolloutEngine
from posttrain.engines.vllm_setup import vllm_servable_problem
from posttrain.models.likelihood import causal_token_logprobs
from posttrain.models.loading import load_causal_lm, load_tokenizer
from posttrain.tasks import TASKS
from posttrain.tasks.prompts import encode_prompts
from tests.e2e.sync_harness import assert_engine_holds, assert_greedy_of, completion_logprobs

pytest.importorskip("vllm")

pytestmark = pytest.mark.heavy  # starts vLLM engines (a tiny model and SmolLM2-135M)


def tiny_vllm_recipe():
    """The embedded arithmetic policy's vLLM-servable twin (3 heads of 32: vLLM's CPU attention has no head
    size 24, the embedded default's) with a short warm start: tests need a model, not a good one."""
    from posttrain.models.tiny import RECIPES

    return dataclasses.replace(RECIPES.get("causal-arithmetic-vllm"), warm_start_steps=30)


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    from posttrain.models.tiny import build_recipe

    return str(build_recipe(tiny_vllm_recipe(), cache_dir=tmp_path_factory.mktemp("tiny-vllm")))


@pytest.fixture(scope="module")
def engine(tiny_path: str) -> VLLMRolloutEngine:
    return VLLMRolloutEngine.from_pretrained(tiny_path, max_num_seqs=64)


@pytest.fixture(scope="module")
def hf_model(tiny_path: str):
    return load_causal_lm(tiny_path)


@pytest.fixture(scope="module")
def prompt_ids(engine: VLLMRolloutEngine) -> list[list[int]]:
    examples = TASKS.get("arithmetic")().split("test")[:6]
    return encode_prompts(engine.tokenizer, examples, None, 256)


def _greedy(max_new_tokens: int = 12) -> SamplingParams:
    return SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0)


def test_is_a_rollout_engine(engine: VLLMRolloutEngine) -> None:
    assert isinstance(engine, RolloutEngine)
    assert engine.weight_version == 0


def test_greedy_decodes_the_hf_model(engine, hf_model, prompt_ids) -> None:
    ours = engine.generate(prompt_ids, _greedy())
    assert any(len(c) >= 2 for c in ours.completion_ids)  # a real comparison, not eos against eos
    assert ours.texts == engine.tokenizer.batch_decode(ours.completion_ids, skip_special_tokens=True)
    assert_greedy_of(hf_model, ours)  # greedy: unscaled model log-probs, each token the argmax up to a near-tie


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampled_logprobs_equal_the_hf_scoring_of_the_same_tokens(engine, hf_model, prompt_ids, temperature) -> None:
    rollouts = engine.generate(prompt_ids * 2, SamplingParams(max_new_tokens=12, temperature=temperature, seed=3))
    tensors = pack_sequences(rollouts.prompt_ids, rollouts.completion_ids, engine.tokenizer.pad_token_id)
    with torch.no_grad():
        scored, _ = causal_token_logprobs(hf_model, tensors["input_ids"], tensors["attention_mask"],
                                          temperature=temperature, last=tensors["completion_mask"].shape[1])
    for row, logprobs in enumerate(rollouts.logprobs):
        torch.testing.assert_close(torch.tensor(logprobs), scored[row, : len(logprobs)].float(), atol=1e-4, rtol=0)


def test_top_k_logprobs_are_those_of_the_processed_distribution(engine, hf_model, prompt_ids) -> None:
    from posttrain.engines.hf import process_logits

    params = SamplingParams(max_new_tokens=1, temperature=0.8, top_k=3, seed=1)
    rollouts = engine.generate(prompt_ids, params)
    tokenizer = engine.tokenizer
    for prompt, ids, logprobs in zip(prompt_ids, rollouts.completion_ids, rollouts.logprobs):
        with torch.no_grad():
            logits = hf_model(input_ids=torch.tensor([prompt])).logits[0, -1]
        expected = torch.log_softmax(process_logits(logits.unsqueeze(0), params), -1)[0, ids[0]]
        assert logprobs[0] == pytest.approx(float(expected), abs=1e-4), tokenizer.decode(prompt)


def test_seeds_repeat_and_copies_differ(engine, prompt_ids) -> None:
    group = [prompt_ids[0]] * 8
    params = SamplingParams(max_new_tokens=12, temperature=1.0, seed=11)
    first, again = engine.generate(group, params), engine.generate(group, params)
    assert first.completion_ids == again.completion_ids
    assert len({tuple(c) for c in first.completion_ids}) > 1  # G copies of one prompt differ
    other = engine.generate(group, dataclasses.replace(params, seed=12))
    assert other.completion_ids != first.completion_ids
    # sample i is seeded base.sample_seeds(seed, prompts)[i], as on the remote workers: distinct prompts
    # sample_seed(seed, i), copies of one prompt the seeds that follow their first's
    assert [p.seed for p in engine._vllm_params(params, [[1], [2], [3]])] == [sample_seed(11, i) for i in range(3)]
    assert [p.seed for p in engine._vllm_params(params, [[1], [1], [2]])] == [sample_seed(11, 0), sample_seed(11, 0) + 1,
                                                                             sample_seed(11, 2)]


def test_a_seeded_batch_larger_than_one_scheduler_step(engine, prompt_ids) -> None:
    """More prompt tokens than one vLLM scheduler step holds (4096): with chunked prefill vLLM split a seeded
    request and its CPU sampler died rewinding that request's generator ("CPU Generator does not use offset",
    a real-model GRPO step of 16 prompts x 8 samples). Every prompt must be answered, and the seeded samples
    must not depend on how many other requests shared the call."""
    tokens = [token for prompt in prompt_ids for token in prompt] * 20
    long = [tokens[:100] for _ in range(120)]  # 120 x 100 prompt tokens, 64 scheduled at once
    assert all(len(p) == 100 for p in long)  # 64 x 100 > 4096 tokens
    params = SamplingParams(max_new_tokens=4, temperature=1.0, seed=5)
    many = engine.generate(long, params)
    assert len(many.completion_ids) == 120 and all(many.completion_ids)
    assert engine.generate(long[:3], params).completion_ids == many.completion_ids[:3]


def test_eos_stop_ids_and_max_tokens(engine, prompt_ids) -> None:
    greedy = engine.generate(prompt_ids, _greedy())
    eos = engine.tokenizer.eos_token_id
    for ids, reason in zip(greedy.completion_ids, greedy.finish_reasons):
        assert (reason == "stop") == (ids[-1] == eos) and eos not in ids[:-1]
    prompt = engine.tokenizer("a b c", add_special_tokens=False)["input_ids"]  # rambles on before its eos
    long = engine.generate([prompt], _greedy()).completion_ids[0]
    assert len(long) >= 4
    stop = long[2]
    stopped = engine.generate([prompt], dataclasses.replace(_greedy(), stop_token_ids=(stop,)))
    assert stopped.completion_ids[0] == long[: long.index(stop) + 1]
    assert stopped.finish_reasons == ["stop"]
    short = engine.generate([prompt], _greedy(max_new_tokens=2))
    assert short.completion_ids[0] == long[:2] and short.finish_reasons == ["length"]


def test_update_weights_then_greedy_equals_the_new_model(engine, hf_model, prompt_ids) -> None:
    changed = load_causal_lm(hf_model.name_or_path)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in changed.parameters():
            param.add_(0.05 * torch.randn(param.shape, generator=generator))
    before = engine.generate(prompt_ids, _greedy())
    engine.update_weights(changed.named_parameters(), version=7)
    assert engine.weight_version == 7
    after = engine.generate(prompt_ids, _greedy())
    assert_greedy_of(changed, after)
    pad = engine.tokenizer.pad_token_id  # the new weights, not the old: the check tells them apart
    assert_engine_holds(after.logprobs, completion_logprobs(changed, after, pad), completion_logprobs(hf_model, after, pad))
    assert after.weight_version == 7
    engine.update_weights(hf_model.named_parameters())  # back to the checkpoint, next version
    assert engine.weight_version == 8
    assert engine.generate(prompt_ids, _greedy()).completion_ids == before.completion_ids


def test_sleep_is_a_no_op_on_cpu(engine, prompt_ids) -> None:
    engine.sleep()
    assert engine.generate(prompt_ids[:1], _greedy()).completion_ids


def test_bad_inputs_fail_clearly(engine, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="prompt 1 is empty"):
        engine.generate([[5], []], _greedy())
    diffusion = tmp_path / "diffusion"
    diffusion.mkdir()
    (diffusion / "config.json").write_text(json.dumps({"posttrain_kind": "diffusion", "hidden_size": 64,
                                                       "num_attention_heads": 2}))
    assert "diffusion sampler" in vllm_servable_problem(str(diffusion))
    with pytest.raises(ValueError, match="--rollout diffusion"):
        VLLMRolloutEngine.from_pretrained(str(diffusion))
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "config.json").write_text(json.dumps({"hidden_size": 96, "num_attention_heads": 4}))
    assert "head size 24" in vllm_servable_problem(str(odd))


def test_json_schema_greedy_decodes_the_masked_hf_model_and_logprobs_are_masked(engine, hf_model, prompt_ids) -> None:
    """vLLM's structured outputs decode greedily the HF model under our xgrammar mask (the same log-probs of
    its tokens, each the masked argmax up to a near-tie), every completion is valid, and sampled log-probs are
    those of the masked distribution."""
    import jsonschema

    from posttrain.engines.hf import process_logits

    schema = {"type": "integer", "minimum": 0, "maximum": 99999}  # no whitespace: ends within the budget
    hf = HFRolloutEngine(hf_model, engine.tokenizer)
    greedy = SamplingParams(max_new_tokens=12, temperature=0.0, json_schema=json.dumps(schema))
    ours = engine.generate(prompt_ids, greedy)
    assert ours.finish_reasons == ["stop"] * len(prompt_ids)
    for text in ours.texts:
        jsonschema.validate(json.loads(text), schema)
    hf.generate(prompt_ids[:1], greedy)  # builds the HF engine's schema compiler
    assert_greedy_of(hf_model, ours, hf._schema_compiler.compile(greedy.json_schema, "test"),
                     [engine.tokenizer.eos_token_id])
    sampled = dataclasses.replace(greedy, temperature=0.8, seed=5)
    rollouts = engine.generate(prompt_ids, sampled)
    grammar = hf._schema_compiler.compile(sampled.json_schema, "test")
    for prompt, ids, logprobs, text in zip(prompt_ids, rollouts.completion_ids, rollouts.logprobs, rollouts.texts):
        jsonschema.validate(json.loads(text), schema)
        rows = grammar.rows(1, [engine.tokenizer.eos_token_id])
        for t, token in enumerate(ids):
            with torch.no_grad():
                logits = hf_model(input_ids=torch.tensor([prompt + ids[:t]])).logits[:, -1]
            expected = torch.log_softmax(process_logits(rows.mask_(logits, [True]), sampled), -1)[0, token]
            assert logprobs[t] == pytest.approx(float(expected), abs=1e-4)
            rows.accept([token], [True])


def test_a_schema_vllm_rejects_names_the_engine(engine, prompt_ids) -> None:
    from posttrain.engines.base import SamplingParamsError

    bad = SamplingParams(max_new_tokens=4, json_schema='{"type": "integer", "minimum": 5, "maximum": 1}')
    with pytest.raises(SamplingParamsError, match="VLLMRolloutEngine: vLLM rejects json_schema"):
        engine.generate(prompt_ids, bad)


def test_config_refuses_what_vllm_cannot_serve(tmp_path: Path) -> None:
    from posttrain.algos.pg import GRPOConfig

    embedded = GRPOConfig(rollout="vllm", output_dir=str(tmp_path))
    embedded.validate()  # without --model: the embedded default's vLLM-servable twin
    assert embedded.embedded_recipe("causal") == "causal-arithmetic-vllm"
    assert GRPOConfig(rollout="hf").embedded_recipe("causal") == "causal-arithmetic"
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "config.json").write_text(json.dumps({"hidden_size": 96, "num_attention_heads": 4}))
    with pytest.raises(ConfigError, match=f"'rollout'.*{odd} has attention head size 24"):  # a user's --model
        GRPOConfig(rollout="vllm", model=str(odd), output_dir=str(tmp_path)).validate()
    with pytest.raises(ConfigError, match="tis_cap"):
        GRPOConfig(rollout="vllm", tis_cap=-1.0, model=str(tmp_path), output_dir=str(tmp_path)).validate()


# --- SmolLM2-135M: a real pretrained model and tokenizer -------------------------------------------

@pytest.fixture(scope="module")
def smollm2_engine(smollm2: str) -> VLLMRolloutEngine:
    return VLLMRolloutEngine.from_pretrained(smollm2, max_model_len=512, max_num_seqs=8)


@pytest.fixture(scope="module")
def smollm2_hf(smollm2: str) -> HFRolloutEngine:
    return HFRolloutEngine(load_causal_lm(smollm2), load_tokenizer(smollm2))


def _chat_prompts(tokenizer, questions: tuple[str, ...]) -> list[list[int]]:
    from posttrain.models.chat import render_chat

    return [tokenizer(render_chat(tokenizer, [{"role": "user", "content": q}]), add_special_tokens=False)["input_ids"]
            for q in questions]


def test_smollm2_greedy_decodes_the_hf_model(smollm2_hf: HFRolloutEngine, smollm2_engine: VLLMRolloutEngine) -> None:
    prompts = _chat_prompts(smollm2_hf.tokenizer, ("What is the capital of France?", "Name a colour."))
    ours = smollm2_engine.generate(prompts, _greedy(max_new_tokens=10))
    assert_greedy_of(smollm2_hf.model, ours)
    assert "Paris" in ours.texts[0]


def test_smollm2_json_schema_greedy_decodes_the_hf_model(smollm2_hf, smollm2_engine) -> None:
    """A judge-like object schema on a real tokenizer: valid documents, greedy under the HF model's masked
    distribution."""
    import jsonschema

    schema = {"type": "object", "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 5},
                                               "reason": {"type": "string", "maxLength": 16}},
              "required": ["score", "reason"], "additionalProperties": False}
    prompts = _chat_prompts(smollm2_hf.tokenizer, ("Rate 'The cat sat.' from 1 to 5, as JSON.",
                                                   "Is Paris in France? Answer in JSON."))
    params = SamplingParams(max_new_tokens=48, temperature=0.0, json_schema=json.dumps(schema))
    ours = smollm2_engine.generate(prompts, params)
    assert ours.finish_reasons == ["stop"] * 2
    for text in ours.texts:
        jsonschema.validate(json.loads(text), schema)
    smollm2_hf.generate(prompts[:1], params)  # builds the HF engine's schema compiler
    assert_greedy_of(smollm2_hf.model, ours, smollm2_hf._schema_compiler.compile(params.json_schema, "test"),
                     [smollm2_hf.tokenizer.eos_token_id])
