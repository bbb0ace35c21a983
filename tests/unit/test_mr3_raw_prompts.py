"""The dataset task's ``raw_prompts`` option: fully rendered prompts (mR3 SFT data) skip the chat template."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrain.config import ConfigError, TrainConfig
from posttrain.models.tiny import build_tokenizer
from posttrain.tasks.dataset import DatasetTask
from posttrain.tasks.prompts import RawPromptExample, encode_prompts


def _write(path: Path, prompts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"prompt": p, "answer": "x"}) + "\n" for p in prompts))
    return path


def test_raw_prompts_are_tokenized_as_they_are(tmp_path: Path) -> None:
    tokenizer = build_tokenizer()
    data = _write(tmp_path / "d.jsonl", ["<bos><|user|>2+2=<|assistant|>", "C|02+02=|R:+004|<think>"] * 3)
    raw = DatasetTask(str(data), raw_prompts=True, test_fraction=0.5)
    examples = raw.split("train") + raw.split("test")
    assert all(isinstance(e, RawPromptExample) for e in examples)
    by_prompt = {e.prompt: ids for e, ids in zip(examples, encode_prompts(tokenizer, examples, None, 256))}
    bos = tokenizer.bos_token_id
    rendered = by_prompt["<bos><|user|>2+2=<|assistant|>"]
    assert rendered == tokenizer("<bos><|user|>2+2=<|assistant|>", add_special_tokens=False)["input_ids"]
    assert rendered.count(bos) == 1  # the BOS in the text, not a second one
    compact = by_prompt["C|02+02=|R:+004|<think>"]
    assert compact == tokenizer("C|02+02=|R:+004|<think>", add_special_tokens=True)["input_ids"]  # usual specials
    templated = encode_prompts(tokenizer, DatasetTask(str(data)).split("train")[:1], None, 256)[0]
    assert tokenizer.decode(templated).count("<|user|>") >= 1  # without the option: the chat template
    with pytest.raises(ValueError, match="system prompt"):
        encode_prompts(tokenizer, examples[:1], "be nice", 256)


def test_raw_prompts_config_is_checked() -> None:
    TrainConfig(task="dataset", dataset="d.jsonl", raw_prompts=True).validate()
    with pytest.raises(ConfigError, match="raw_prompts"):
        TrainConfig(task="arithmetic", raw_prompts=True).validate()
    with pytest.raises(ConfigError, match="raw_prompts"):
        TrainConfig(task="dataset", dataset="d.jsonl", raw_prompts=True, system_prompt="hi").validate()
