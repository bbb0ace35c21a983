"""The tiny-model factory: tokenizer, recipes, deterministic models, warm start and the build cache."""

from __future__ import annotations

import dataclasses
import multiprocessing
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from posttrain.models import tiny
from posttrain.models.loading import load_causal_lm, load_tokenizer
from posttrain.models.tiny import (
    CHAT_MARKERS,
    RECIPES,
    SPECIAL_TOKENS,
    TinyRecipe,
    build_model,
    build_recipe,
    build_tokenizer,
    default_recipe_for,
    tiny_main,
    vllm_variant,
)

SMALL = dataclasses.replace(RECIPES.get("causal-arithmetic"), name="test-small", hidden_size=32, num_layers=1,
                            num_heads=2, num_kv_heads=1, intermediate_size=64, warm_start_steps=3, batch_size=8)
BARE = dataclasses.replace(SMALL, name="test-bare", warm_start=None, warm_start_steps=0)


@pytest.fixture(scope="session")
def small_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_recipe(SMALL, cache_dir=tmp_path_factory.mktemp("cache"))


def test_tokenizer_round_trip_and_single_token_specials() -> None:
    tok = build_tokenizer()
    text = "What is 12+7?\n  Answer: -19 (ok)"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text)
    assert tok.decode(ids) == text
    for token in SPECIAL_TOKENS + CHAT_MARKERS:
        assert len(tok(token, add_special_tokens=False)["input_ids"]) == 1
    assert tok.mask_token_id is not None and tok.pad_token_id is not None
    assert tok.padding_side == "left"
    assert len({tok.pad_token_id, tok.bos_token_id, tok.eos_token_id, tok.mask_token_id, tok.unk_token_id}) == 5


def test_chat_template_with_generation_prompt() -> None:
    tok = build_tokenizer()
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "1+1="}]
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text == "<bos><|system|>be brief<|user|>1+1=<|assistant|>"
    full = tok.apply_chat_template(messages + [{"role": "assistant", "content": "2"}], tokenize=False)
    assert full == "<bos><|system|>be brief<|user|>1+1=<|assistant|>2<eos>"


def test_recipes_declared() -> None:
    assert {"causal-arithmetic", "causal-countdown", "causal-sudoku", "diffusion-sudoku", "diffusion-countdown",
            "reward-mr3", "corpus-lm"} <= set(RECIPES.names())
    assert default_recipe_for("sudoku") == "causal-sudoku"
    assert default_recipe_for("sudoku", "diffusion") == "diffusion-sudoku"
    assert default_recipe_for("dataset") == "causal-arithmetic"
    with pytest.raises(KeyError, match="no tiny recipe"):
        default_recipe_for("chess")


def test_every_causal_policy_has_a_vllm_servable_twin() -> None:
    for name in RECIPES.names():
        base = RECIPES.get(name)
        if base.kind != "causal" or name.endswith("-vllm"):
            assert vllm_variant(name) == name  # no twin: diffusion, reward and corpus models keep their own
            continue
        twin = RECIPES.get(vllm_variant(name))
        assert twin.name == f"{name}-vllm" and twin.hidden_size // twin.num_heads == 32 and twin.num_kv_heads == 1
        assert dataclasses.replace(twin, name=name, num_heads=base.num_heads, num_kv_heads=base.num_kv_heads) == base
    assert RECIPES.get("causal-arithmetic").num_heads == 4  # the recipe the benchmarks were measured on
    assert default_recipe_for("arithmetic") == "causal-arithmetic"  # a twin is never a task's default


def test_recipe_validation_names_recipe() -> None:
    with pytest.raises(ValueError, match="'bad'.*num_heads"):
        dataclasses.replace(SMALL, name="bad", num_heads=3)


def test_fingerprint_changes_with_any_field() -> None:
    assert SMALL.fingerprint() == dataclasses.replace(SMALL).fingerprint()
    assert SMALL.fingerprint() != dataclasses.replace(SMALL, lr=SMALL.lr * 2).fingerprint()
    assert SMALL.fingerprint() != dataclasses.replace(SMALL, seed=1).fingerprint()


def test_build_model_deterministic_and_leaves_global_rng_alone() -> None:
    tok = build_tokenizer()
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a, b = build_model(BARE, tok), build_model(BARE, tok)
    assert torch.equal(torch.random.get_rng_state(), before)
    for (name, pa), (_, pb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(pa, pb), name
    other = build_model(dataclasses.replace(BARE, seed=1), tok)
    assert not torch.equal(a.model.embed_tokens.weight, other.model.embed_tokens.weight)
    assert a.config.vocab_size == len(tok) and a.config.tie_word_embeddings


def test_saved_model_loads_offline(small_dir: Path) -> None:
    assert (small_dir / "model.safetensors").is_file() and (small_dir / "recipe.json").is_file()
    model = AutoModelForCausalLM.from_pretrained(small_dir)
    tok = AutoTokenizer.from_pretrained(small_dir)
    assert tok.mask_token_id is not None and tok.chat_template
    ids = tok.apply_chat_template([{"role": "user", "content": "2+2="}], add_generation_prompt=True,
                                  return_tensors="pt", return_dict=True)["input_ids"]
    out = model.generate(ids, max_new_tokens=3, do_sample=False)
    assert out.shape[1] <= ids.shape[1] + 3
    assert load_tokenizer(str(small_dir)).padding_side == "left"
    assert not load_causal_lm(str(small_dir)).training


def test_warm_start_changes_weights(small_dir: Path) -> None:
    trained = AutoModelForCausalLM.from_pretrained(small_dir)
    fresh = build_model(SMALL, build_tokenizer())
    assert not torch.equal(trained.model.embed_tokens.weight, fresh.model.embed_tokens.weight)


def test_cache_reuses_and_force_rebuilds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Path] = []
    real = tiny._build_into

    def counting(recipe: TinyRecipe, directory: Path) -> None:
        calls.append(directory)
        real(recipe, directory)

    monkeypatch.setattr(tiny, "_build_into", counting)
    leftover = tiny.recipe_dir(BARE, tmp_path).with_name(f".test-bare-{BARE.fingerprint()}.dead")
    leftover.mkdir(parents=True)
    first = build_recipe(BARE, cache_dir=tmp_path)
    assert not leftover.exists()
    second = build_recipe(BARE, cache_dir=tmp_path)
    assert first == second and len(calls) == 1
    assert first.name == f"test-bare-{BARE.fingerprint()}" and first.parent == tmp_path / "posttrain" / "tiny"
    third = build_recipe(BARE, cache_dir=tmp_path, force=True)
    assert third == first and len(calls) == 2 and (third / "model.safetensors").is_file()
    assert sorted(p.name for p in first.parent.iterdir() if p.is_dir()) == [first.name]


def test_cache_root_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POSTTRAIN_CACHE", str(tmp_path))
    assert tiny.recipe_dir(BARE).parent == tmp_path / "posttrain" / "tiny"


def _build_in_child(cache: str) -> str:
    torch.set_num_threads(1)
    return str(build_recipe(BARE, cache_dir=cache))


def test_concurrent_builds_end_with_one_valid_dir(tmp_path: Path) -> None:
    with multiprocessing.get_context("fork").Pool(2) as pool:
        paths = pool.map(_build_in_child, [str(tmp_path)] * 2)
    assert paths[0] == paths[1]
    root = tmp_path / "posttrain" / "tiny"
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == [Path(paths[0]).name]
    AutoModelForCausalLM.from_pretrained(paths[0])


def test_warm_start_import_error_names_recipe(tmp_path: Path) -> None:
    broken = dataclasses.replace(BARE, name="test-broken", warm_start="no.such.module:fn", warm_start_steps=1)
    with pytest.raises(ImportError, match="test-broken.*no.such.module"):
        build_recipe(broken, cache_dir=tmp_path)
    assert not any(p.is_dir() for p in (tmp_path / "posttrain" / "tiny").iterdir())


def test_tiny_main_lists(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert tiny_main(["--list", "--cache_dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "causal-arithmetic" in out and "not built" in out
    assert "causal-arithmetic-vllm " in out


def test_resolve_model_path(monkeypatch: pytest.MonkeyPatch) -> None:
    from posttrain import config as config_module
    from posttrain.config import TrainConfig

    built: list[str] = []
    monkeypatch.setattr(config_module, "build_tiny", lambda name: built.append(name) or Path("/cache") / name)
    assert config_module.resolve_model_path(TrainConfig(model="org/model")) == "org/model"
    assert config_module.resolve_model_path(TrainConfig(task="countdown")) == "/cache/causal-countdown"
    assert config_module.resolve_model_path(TrainConfig(task="sudoku"), kind="diffusion") == "/cache/diffusion-sudoku"
    assert config_module.resolve_model_path(TrainConfig(task="dataset", dataset="x.jsonl")) == "/cache/causal-arithmetic"
    assert config_module.resolve_model_path(TrainConfig(rollout="vllm")) == "/cache/causal-arithmetic-vllm"
    assert config_module.resolve_model_path(TrainConfig(rollout="vllm-remote:http://h:1", task="countdown")) == \
        "/cache/causal-countdown-vllm"
    assert built == ["causal-countdown", "diffusion-sudoku", "causal-arithmetic", "causal-arithmetic-vllm",
                     "causal-countdown-vllm"]


def test_load_tokenizer_falls_back_to_eos_for_padding(small_dir: Path, tmp_path: Path) -> None:
    tok = AutoTokenizer.from_pretrained(small_dir)
    tok.pad_token = None
    tok.padding_side = "right"
    tok.save_pretrained(tmp_path)
    loaded = load_tokenizer(str(tmp_path))
    assert loaded.pad_token == "<eos>" and loaded.padding_side == "left"


def test_warm_start_runs_on_one_thread_and_restores_the_callers(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The cached model must not depend on the builder's thread count (reduction order), also in a process
    where vLLM has replaced ``torch.set_num_threads`` with a no-op."""
    seen: list[int] = []
    real = tiny.resolve_warm_start

    def recording(recipe: TinyRecipe) -> Callable[..., None]:
        warm = real(recipe)

        def run(*args: object) -> None:
            seen.append(torch.get_num_threads())
            warm(*args)

        return run

    monkeypatch.setattr(tiny, "resolve_warm_start", recording)
    # what vLLM's CPU worker does to every process that starts an in-process engine
    monkeypatch.setattr(torch, "set_num_threads", lambda count: None)
    previous = torch.get_num_threads()
    tiny.set_intra_op_threads(2)
    try:
        build_recipe(dataclasses.replace(SMALL, name="test-threads", warm_start_steps=1), cache_dir=tmp_path)
        assert seen == [1]
        assert torch.get_num_threads() == 2
    finally:
        tiny.set_intra_op_threads(previous)
