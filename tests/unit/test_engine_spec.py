"""Engine specs (posttrain.engines.spec): the one string form on every form and every bad form, each spec's
own validation, and the builder's dispatch and cache (posttrain.engines.build)."""

from __future__ import annotations

import pytest

from posttrain.config import ConfigError, build_config, help_text
from posttrain.engines.build import ENGINE_BUILDERS, build_engine, cached_engine
from posttrain.engines.fake import FakeEngine
from posttrain.engines.hf import HFRolloutEngine
from posttrain.engines.http import OpenAIHTTPEngine
from posttrain.engines.spec import (
    CacheLMSpec,
    DiffusionSpec,
    EngineSpecError,
    FakeSpec,
    HFSpec,
    HTTPSpec,
    VLLMRemoteSpec,
    VLLMSpec,
    parse_engine_spec,
)
from posttrain.models.tiny import TinyRecipe, build_model, build_tokenizer


@pytest.mark.parametrize("text,spec", [
    ("hf", HFSpec()),
    ("hf:/ckpt/step-10", HFSpec("/ckpt/step-10")),
    ("/ckpt/step-10", HFSpec("/ckpt/step-10")),
    ("smollm2-135m", HFSpec("smollm2-135m")),
    ("org/model", HFSpec("org/model")),
    ("transformers", HFSpec()),
    ("transformers:org/model", HFSpec("org/model")),
    ("tiny", HFSpec()),
    ("corpus-lm", HFSpec()),
    ("diffusion", DiffusionSpec()),
    ("diffusion:/llada", DiffusionSpec("/llada")),
    ("vllm", VLLMSpec()),
    ("vllm:smollm2-135m", VLLMSpec("smollm2-135m")),
    ("vllm-remote:http://a:8100", VLLMRemoteSpec(("http://a:8100",))),
    ("vllm-remote: http://a:8100/ ,https://b:1", VLLMRemoteSpec(("http://a:8100", "https://b:1"))),
    ("http://127.0.0.1:8000", HTTPSpec("http://127.0.0.1:8000")),
    ("http://127.0.0.1:8000/v1/", HTTPSpec("http://127.0.0.1:8000/v1")),
    ("https://h:1/v1#served-name", HTTPSpec("https://h:1/v1", "served-name")),
    ("fake", FakeSpec()),
    ("cachelm", CacheLMSpec()),
])
def test_every_form_parses(text: str, spec) -> None:
    assert parse_engine_spec(text) == spec
    assert parse_engine_spec(str(spec)) == spec  # the string form round-trips


@pytest.mark.parametrize("text,problem", [
    ("", "name an engine"),
    ("   ", "name an engine"),
    ("hf:", "nothing after 'hf:'"),
    ("vllm:", "nothing after 'vllm:'"),
    ("vllm-remote", "'urls' = '' is invalid: no worker URL"),
    ("vllm-remote:", "nothing after 'vllm-remote:'"),
    ("vllm-remote:h1:8100", "'h1:8100' must look like http://HOST:PORT"),
    ("vllm-remote:http://a:1,http://a:1", "listed more than once"),
    ("http", "'url' = '' is invalid: must look like http://HOST:PORT"),
    ("http:x", "write the URL itself"),
    ("http://", "must look like http://HOST:PORT"),
    ("http://h:1#", "name the model after '#'"),
    ("http://h 1:2", "must look like"),
    ("fake:/model", "fake takes no path"),
    ("cachelm:x", "cachelm takes no path"),
    ("tiny:x", "tiny takes no path"),
    ("sglang:/model", "unknown engine kind 'sglang'"),
])
def test_every_bad_form_names_the_problem(text: str, problem: str) -> None:
    with pytest.raises(EngineSpecError, match=problem):
        parse_engine_spec(text)


def test_specs_validate_their_own_options() -> None:
    for spec, option, value, allowed in [
        (DiffusionSpec, "block_length", 0, "must be >= 1"),
        (DiffusionSpec, "steps", -1, "must be >= 0"),
        (DiffusionSpec, "remasking", "greedy", "low_confidence or random"),
        (VLLMSpec, "gpu_memory_utilization", 1.5, r"\(0, 1\]"),
        (VLLMSpec, "sync_timeout_s", 0.0, "> 0"),
        (VLLMSpec, "max_model_len", 0, ">= 1"),
        (FakeSpec, "base_latency_s", -1.0, ">= 0"),
    ]:
        with pytest.raises(EngineSpecError, match=rf"engine spec {spec.kind}: option '{option}' = .* {allowed}"):
            spec(**{option: value})
    with pytest.raises(EngineSpecError, match="'generation_timeout_s'.*must be > 0"):
        VLLMRemoteSpec(("http://a:1",), generation_timeout_s=0)
    with pytest.raises(EngineSpecError, match="'path' = ''"):
        HFSpec("")


def test_options_are_typed_and_unknown_ones_name_the_known() -> None:
    spec = parse_engine_spec("vllm", sleep="false", gpu_memory_utilization="0.5", max_model_len="none")
    assert spec == VLLMSpec(sleep=False, gpu_memory_utilization=0.5, max_model_len=None)
    assert spec.with_options({"sync_timeout_s": 3}) == VLLMSpec(sleep=False, gpu_memory_utilization=0.5,
                                                                sync_timeout_s=3.0)
    with pytest.raises(EngineSpecError, match="'block_length'.*the hf engine has no such option .*path"):
        parse_engine_spec("hf", block_length=8)
    with pytest.raises(EngineSpecError, match="'steps' = 'many' is invalid: expected a int"):
        parse_engine_spec("diffusion", steps="many")
    with pytest.raises(EngineSpecError, match="'path'.*already gives it"):
        parse_engine_spec("hf:/a", path="/b")


def test_trainer_rollout_is_a_nested_spec_with_the_old_flags_as_aliases() -> None:
    from posttrain.algos.pg import GRPOConfig

    new = build_config(GRPOConfig, ["--rollout", "vllm", "--rollout.sleep", "false", "--rollout.sync_timeout_s", "9"])
    old = build_config(GRPOConfig, ["--rollout", "vllm", "--vllm_sleep", "false", "--worker_timeout_s", "9"])
    assert new.rollout == old.rollout == VLLMSpec(sleep=False, sync_timeout_s=9.0)
    saved = new.to_dict()
    assert saved["rollout"] == "vllm" and saved["rollout.sleep"] is False and saved["rollout.sync_timeout_s"] == 9.0
    with pytest.raises(ConfigError, match=r"'rollout.gpu_memory_utilization' = 2.0 is invalid: must be in \(0, 1\]"):
        build_config(GRPOConfig, ["--rollout", "vllm", "--vllm_gpu_memory_utilization", "2"])
    with pytest.raises(ConfigError, match="'rollout' = 'nope:x'.*unknown engine kind"):
        build_config(GRPOConfig, ["--rollout", "nope:x"])
    with pytest.raises(ConfigError, match="'rollout' = 'hf:/ckpt'.*without a path"):
        build_config(GRPOConfig, ["--rollout", "hf:/ckpt"]).validate()
    text = help_text(GRPOConfig, "grpo")
    assert "--rollout.sleep (vllm, default True; also --vllm_sleep)" in text
    assert "--rollout.generation_timeout_s (vllm-remote" in text and "--rollout.block_length" not in text  # grpo: no diffusion


def test_builder_dispatches_on_the_kind() -> None:
    tokenizer = build_tokenizer()
    recipe = TinyRecipe(name="test-build", kind="causal", arch="qwen2", hidden_size=32, num_layers=1, num_heads=4,
                        num_kv_heads=2, intermediate_size=64, max_position_embeddings=64, task=None, warm_start=None,
                        warm_start_steps=0, lr=0.0, batch_size=1, seed=0)
    model = build_model(recipe, tokenizer)
    hf = build_engine(HFSpec(), model=model, tokenizer=tokenizer, device="cpu", max_batch_size=3)
    assert isinstance(hf, HFRolloutEngine) and hf.model is model and hf.max_batch_size == 3
    http = build_engine(parse_engine_spec("http://127.0.0.1:1/v1#served"), tokenizer=tokenizer, top_k=50)
    assert isinstance(http, OpenAIHTTPEngine) and http.model == "served" and http.top_k == 20
    fake = build_engine(FakeSpec(base_latency_s=0.5))
    assert isinstance(fake, FakeEngine) and fake.base_latency_s == 0.5
    with pytest.raises(ValueError, match="the hf engine has no model"):
        build_engine(HFSpec())
    with pytest.raises(ValueError, match="needs the served model's tokenizer"):
        build_engine(HTTPSpec("http://h:1"))
    assert set(ENGINE_BUILDERS.names()) >= {"hf", "diffusion", "vllm", "vllm-remote", "http", "fake"}


def test_cached_engine_builds_once_per_spec_and_settings() -> None:
    first = cached_engine(FakeSpec(per_item_latency_s=0.25))
    assert cached_engine(FakeSpec(per_item_latency_s=0.25)) is first
    assert cached_engine(FakeSpec(per_item_latency_s=0.5)) is not first
    with pytest.raises(ValueError, match="plain values"):
        cached_engine(HFSpec(), model=object())
