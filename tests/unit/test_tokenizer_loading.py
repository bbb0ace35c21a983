"""The one tokenizer loader: a tiny model's folder keeps its whitespace ("a b\\nc" round-trips) whether or
not it carries the tiny build's recipe.json, where ``AutoTokenizer`` would follow the model type (qwen2) to
a tokenizer that drops spaces and newlines; real checkpoints still load through ``AutoTokenizer``."""

from __future__ import annotations

import json

from posttrain.models.loading import load_tokenizer, saved_as_generic_tokenizer


def test_tiny_folders_keep_whitespace(tmp_path):
    from posttrain.models.tiny import RECIPES, build_model, build_tokenizer

    tokenizer = build_tokenizer()
    build_model(RECIPES.get("reward-mr3"), tokenizer).save_pretrained(tmp_path)  # qwen2 config, no recipe.json
    tokenizer.save_pretrained(tmp_path)
    assert saved_as_generic_tokenizer(str(tmp_path))
    loaded = load_tokenizer(str(tmp_path))
    assert loaded.decode(loaded("a b\nc", add_special_tokens=False)["input_ids"]) == "a b\nc"
    assert loaded.padding_side == "left" and loaded.pad_token is not None


def test_named_tokenizer_classes_are_not_generic(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "Qwen2Tokenizer"}))
    assert not saved_as_generic_tokenizer(str(tmp_path))
    assert not saved_as_generic_tokenizer(str(tmp_path / "missing"))
    assert not saved_as_generic_tokenizer("org/hub-id")
