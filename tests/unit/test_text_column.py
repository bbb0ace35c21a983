"""Plain-text language modelling: the dataset task's ``text_column`` gives ``TextExample``s, and ``--algo sft``
trains on every token of each document (the first excepted: nothing predicts it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from posttrain.algos.base import AlgoContext
from posttrain.algos.sft import SFT, SFTConfig, split_text_examples
from posttrain.config import ConfigError, TrainConfig
from posttrain.metrics import PhaseTimer
from posttrain.models.tiny import build_tokenizer
from posttrain.tasks.base import Example
from posttrain.tasks.dataset import DatasetError, DatasetTask
from posttrain.tasks.prompts import TextExample, encode_prompts


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_text_column_reads_documents_and_keeps_other_columns(tmp_path: Path) -> None:
    data = _write(tmp_path / "seq.jsonl", [{"id": f"d{i}", "text": f"doc {i} text", "num_tokens": i} for i in range(4)])
    task = DatasetTask(str(data), text_column="text", test_fraction=0.25)
    examples = task.split("train") + task.split("test")
    assert len(examples) == 4 and all(isinstance(e, TextExample) for e in examples)
    by_id = {e.columns["id"]: e for e in examples}
    assert by_id["d2"].text == "doc 2 text" and by_id["d2"].columns == {"id": "d2", "num_tokens": 2}
    assert by_id["d2"].prompt == "" and by_id["d2"].answer == ""


def test_a_bad_text_row_is_named(tmp_path: Path) -> None:
    data = _write(tmp_path / "seq.jsonl", [{"text": "fine"}, {"body": "no text field"}])
    with pytest.raises(DatasetError, match=r"line 2: text field 'text' must be a non-empty string"):
        DatasetTask(str(data), text_column="text")
    with pytest.raises(ValueError, match="exclude each other"):
        DatasetTask(str(data), text_column="text", raw_prompts=True)


def test_text_examples_split_into_first_token_and_every_later_token() -> None:
    tokenizer = build_tokenizer()  # one token per character, no special tokens added to plain text
    a, b, c = (tokenizer.convert_tokens_to_ids(ch) for ch in "abc")
    firsts, rests = split_text_examples(tokenizer, [TextExample("", "", text="abc")], max_tokens=4)
    assert firsts == [[a]] and rests == [[b, c, tokenizer.eos_token_id]]
    with pytest.raises(ValueError, match="4 tokens with EOS, over max_target_tokens=3"):
        split_text_examples(tokenizer, [TextExample("", "", text="abc")], max_tokens=3)
    with pytest.raises(ValueError, match="example 1 has a prompt"):
        split_text_examples(tokenizer, [TextExample("", "", text="a"), Example("q", "a")], max_tokens=8)
    with pytest.raises(ValueError, match="plain text"):
        encode_prompts(tokenizer, [TextExample("", "", text="a")], None, 8)


def test_sft_loss_on_text_is_the_mean_nll_of_every_token_but_the_first() -> None:
    tokenizer = build_tokenizer()
    torch.manual_seed(0)
    policy = LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32,
                                          num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                          pad_token_id=tokenizer.pad_token_id)).eval()
    config = SFTConfig(algo="sft", task="dataset", dataset="unused.jsonl", text_column="text", eval_every=0)
    ctx = AlgoContext(tokenizer=tokenizer, reward_fn=None, is_correct=None, timer=PhaseTimer(),
                      device=torch.device("cpu"))
    algo = SFT(config, ctx)
    texts = ["hello", "a longer line"]
    experience, metrics = algo.make_experience([TextExample("", "", text=t) for t in texts], policy, step=0)
    assert metrics["train/target_tokens"] == sum(len(t) for t in texts)  # chars + EOS, minus the first
    with torch.no_grad():
        loss = algo.loss(policy, experience, iteration=0).loss
        nlls = []
        for text in texts:  # each document alone, unpadded: log-softmax of the logits at every next token
            ids = torch.tensor([tokenizer(text)["input_ids"] + [tokenizer.eos_token_id]])
            logp = torch.log_softmax(policy(ids).logits[0, :-1].float(), dim=-1)
            nlls.append(-logp.gather(1, ids[0, 1:, None]).squeeze(1))
    expected = torch.cat(nlls).mean()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-4)


def test_text_column_config_is_checked() -> None:
    TrainConfig(algo="sft", task="dataset", dataset="d.jsonl", text_column="text", eval_every=0).validate()
    for bad in ({"algo": "grpo"}, {"eval_every": 50}, {"task": "arithmetic"}):
        args = {"algo": "sft", "task": "dataset", "dataset": "d.jsonl", "text_column": "text", "eval_every": 0, **bad}
        with pytest.raises(ConfigError, match="text_column"):
            TrainConfig(**args).validate()
