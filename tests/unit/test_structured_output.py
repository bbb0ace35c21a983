"""Structured output (``SamplingParams.json_schema``): the schema check at construction, the HF engine's
xgrammar mask (every completion a valid document, log-probs those of the masked distribution, the stop
token only after a complete document), and the engines that refuse it."""

from __future__ import annotations

import json

import jsonschema
import pytest
import torch

from posttrain.engines.base import SamplingParams, SamplingParamsError
from posttrain.engines.hf import HFRolloutEngine, process_logits
from posttrain.models.tiny import TinyRecipe, build_model, build_tokenizer

pytest.importorskip("xgrammar")

# No free-form strings: a random model could write one until the budget runs out (strings are tested on
# SmolLM2, tests/unit/test_rollout_vllm.py). The grammar is compact JSON, so nothing else can run on.
COLOURS = {"enum": ["red", "green", "blue", "yellow"]}
NUMBER = {"type": "integer", "minimum": 0, "maximum": 999}
RECORD = {"type": "object", "properties": {"answer": {"type": "integer", "minimum": 0, "maximum": 99},
                                           "ok": {"type": "boolean"}, "colour": COLOURS},
          "required": ["answer", "ok", "colour"], "additionalProperties": False}
PROMPTS = ["12+7=", "a", "hello there", "x*y"]


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


@pytest.fixture(scope="module")
def engine(tokenizer) -> HFRolloutEngine:
    recipe = TinyRecipe(name="test-structured", kind="causal", arch="qwen2", hidden_size=32, num_layers=2,
                        num_heads=4, num_kv_heads=2, intermediate_size=64, max_position_embeddings=128, task=None,
                        warm_start=None, warm_start_steps=0, lr=0.0, batch_size=1, seed=0)
    return HFRolloutEngine(build_model(recipe, tokenizer).eval(), tokenizer, max_batch_size=3)


@pytest.fixture(scope="module")
def prompt_ids(tokenizer) -> list[list[int]]:
    return [tokenizer(p, add_special_tokens=False)["input_ids"] for p in PROMPTS]


def test_the_schema_is_checked_at_construction() -> None:
    with pytest.raises(ValueError, match="json_schema is not valid JSON"):
        SamplingParams(json_schema='{"type": ')
    with pytest.raises(ValueError, match="json_schema must be a JSON object"):
        SamplingParams(json_schema="[1, 2]")
    with pytest.raises(ValueError, match="json_schema is not a valid JSON Schema at type"):
        SamplingParams(json_schema='{"type": "integr"}')
    with pytest.raises(ValueError, match="at properties/a/pattern"):
        SamplingParams(json_schema='{"properties": {"a": {"pattern": "("}}}')
    params = SamplingParams(json_schema=json.dumps(COLOURS))
    assert hash(params) == hash(SamplingParams(json_schema=json.dumps(COLOURS)))  # still hashable
    assert SamplingParams().json_schema is None


@pytest.mark.parametrize("schema", [COLOURS, NUMBER, RECORD], ids=["enum", "integer", "object"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_every_completion_is_a_valid_document(engine, prompt_ids, schema, temperature) -> None:
    params = SamplingParams(max_new_tokens=48, temperature=temperature, seed=4, json_schema=json.dumps(schema))
    out = engine.generate(prompt_ids * 2, params)  # 8 rows in chunks of 3: a fresh matcher per row per chunk
    eos = engine.tokenizer.eos_token_id
    for ids, text, reason in zip(out.completion_ids, out.texts, out.finish_reasons):
        jsonschema.validate(json.loads(text), schema)
        assert reason == "stop" and ids[-1] == eos and eos not in ids[:-1]
    free = engine.generate(prompt_ids, SamplingParams(max_new_tokens=48, temperature=temperature, seed=4))
    assert not all(_valid(text, schema) for text in free.texts)  # the mask is what made them valid


def _valid(text: str, schema: dict) -> bool:
    try:
        jsonschema.validate(json.loads(text), schema)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


@pytest.mark.parametrize("temperature,top_k", [(0.0, 0), (0.8, 0), (1.0, 3)])
def test_logprobs_are_those_of_the_masked_distribution(engine, prompt_ids, temperature, top_k) -> None:
    """Replays each completion without the KV cache, masking with a fresh matcher: the recorded log-prob
    of every token is its log-prob under the masked (then tempered, top-k) distribution."""
    params = SamplingParams(max_new_tokens=16, temperature=temperature, top_k=top_k, seed=2,
                            json_schema=json.dumps(NUMBER))
    out = engine.generate(prompt_ids, params)
    grammar = engine._schema_compiler.compile(params.json_schema, "test")
    masked_differs = False
    for prompt, ids, recorded in zip(prompt_ids, out.completion_ids, out.logprobs):
        rows = grammar.rows(1, [engine.tokenizer.eos_token_id])
        assert all(torch.isfinite(torch.tensor(recorded)))
        for t, token in enumerate(ids):
            with torch.no_grad():
                logits = engine.model(input_ids=torch.tensor([prompt + ids[:t]])).logits[:, -1]
            masked = rows.mask_(logits.clone(), [True])
            processed = masked if temperature == 0 else process_logits(masked, params)
            expected = torch.log_softmax(processed, -1)[0, token]
            assert recorded[t] == pytest.approx(float(expected), abs=1e-4)
            masked_differs |= abs(float(torch.log_softmax(logits.float(), -1)[0, token] - expected)) > 1e-3
            rows.accept([token], [True])
    assert masked_differs


def test_a_schema_the_grammar_compiler_rejects_names_the_engine(engine, prompt_ids) -> None:
    params = SamplingParams(max_new_tokens=4, json_schema='{"type": "integer", "minimum": 5, "maximum": 1}')
    with pytest.raises(SamplingParamsError, match="HFRolloutEngine: xgrammar cannot compile json_schema"):
        engine.generate(prompt_ids, params)


def test_engines_that_cannot_constrain_decoding_refuse(engine, tokenizer, prompt_ids) -> None:
    from posttrain.algos.prefix_rl.generation import PrefixThenTarget
    from posttrain.engines.diffusion import DiffusionRolloutEngine
    from posttrain.engines.fake import FakeEngine

    recipe = TinyRecipe(name="test-structured-diffusion", kind="diffusion", arch="qwen2", hidden_size=32,
                        num_layers=1, num_heads=4, num_kv_heads=2, intermediate_size=64, max_position_embeddings=128,
                        task=None, warm_start=None, warm_start_steps=0, lr=0.0, batch_size=1, seed=0)
    params = SamplingParams(max_new_tokens=4, json_schema=json.dumps(COLOURS))
    refusing = {"the diffusion sampler": DiffusionRolloutEngine(build_model(recipe, tokenizer), tokenizer),
                "the fake engine": FakeEngine(),
                "prefix-then-target": PrefixThenTarget(engine, engine, prefix_tokens=2, target_max_new_tokens=4,
                                                       target_temperature=1.0)}
    for name, refuser in refusing.items():
        with pytest.raises(SamplingParamsError, match=f"(?i){name}.*cannot constrain decoding to a JSON schema"):
            refuser.generate(prompt_ids, params)
