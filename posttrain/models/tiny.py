"""The one tiny-model factory: a character-level tokenizer, named model recipes, their builds and a cache.

Every embedded default (causal policy, diffusion policy, reward model, corpus LM) is a ``TinyRecipe``
in ``RECIPES``. ``build_tiny(name)`` builds the tokenizer and model, runs the recipe's warm start (a
"module:function" imported at build time; the SFT ones are in ``posttrain.algos.warm_start``, since models
sit below the algorithms) and saves everything (safetensors + ``recipe.json``) under ``<cache>/posttrain/tiny/<name>-<hash>``, where
the hash covers every recipe field and ``CODE_VERSION``. Builds are atomic and guarded by a file lock,
so several ranks may call ``build_tiny`` at once: one builds, the others wait and reuse. A build runs
on one intra-op thread whatever the caller's setting: parallel reductions add in a thread-dependent
order, and the warm start amplifies those last-bit differences into a different model (the diffusion
Sudoku warm start's held-out score changed with the thread count: ``benchmarks/espo_sudoku.md``, "An earlier
measurement, and why it changed"), so the cache would otherwise depend on who built it first. The tiny models
gain nothing from a second thread (``benchmarks/BENCHMARKS.md`` section 1b times a build on one and two).
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import importlib
import json
import logging
import os
import shutil
import string
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    AutoModelForCausalLM,
    LlamaConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen2Config,
)

from posttrain.common.cli_help import CommandParser
from posttrain.common.registry import Registry

logger = logging.getLogger(__name__)

CODE_VERSION = "5"
"""Bump when the tokenizer, model construction or a warm start changes, so cached builds are redone."""

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>", "<mask>")
CHAT_MARKERS = ("<|system|>", "<|user|>", "<|assistant|>")
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{{ '<|' + m['role'] + '|>' + m['content'] }}"
    "{% if m['role'] == 'assistant' %}{{ eos_token }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
_CHARS = tuple(c for c in string.printable if c not in "\x0b\x0c\r")


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A deterministic character-level tokenizer: printable ASCII, special tokens and chat markers.

    Every character is one token (others map to ``<unk>``); ``<pad> <bos> <eos> <unk> <mask>`` and
    the chat markers ``<|system|> <|user|> <|assistant|>`` are single special tokens. The chat
    template renders ``<bos><|user|>PROMPT<|assistant|>ANSWER<eos>``; padding is on the left.
    """
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS + CHAT_MARKERS + _CHARS)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
        mask_token="<mask>",
        additional_special_tokens=list(CHAT_MARKERS),
        padding_side="left",
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


@dataclass(frozen=True)
class TinyRecipe:
    """How to build and warm-start one embedded tiny model."""

    name: str
    """Registry name, also the prefix of the cache directory."""
    kind: str
    """"causal" (policy), "diffusion" (masked-diffusion policy), "reward" (generative RM) or "corpus" (LM)."""
    arch: str
    """Transformers architecture of the config: "qwen2" or "llama"."""
    hidden_size: int
    """Width of the residual stream."""
    num_layers: int
    """Number of transformer blocks."""
    num_heads: int
    """Attention heads (hidden_size must divide by it)."""
    num_kv_heads: int
    """Key/value heads (grouped-query attention; num_heads must divide by it)."""
    intermediate_size: int
    """Width of the MLP."""
    max_position_embeddings: int
    """Longest sequence the model supports."""
    task: str | None
    """Task whose train split the warm start uses (a name in ``posttrain.tasks.base.TASKS``), or None."""
    warm_start: str | None
    """Warm-start function as "module:function" with signature (model, tokenizer, recipe, generator)."""
    warm_start_steps: int
    """Optimizer steps the warm start takes (0 = keep the random initialisation)."""
    lr: float
    """Warm-start AdamW learning rate."""
    batch_size: int
    """Warm-start examples per optimizer step."""
    seed: int
    """Seed for the initial weights and the warm start's generator."""
    target_noise: float = 0.0
    """Fraction of warm-start targets replaced by the task's ``distractor`` (a systematic error)."""
    hint_fraction: float = 0.0
    """Fraction of SFT warm-start examples shown as GPO's hinted guider prompt (``posttrain.algos.gpo.hint``)
    with the clean answer as target; the other examples are plain and keep ``target_noise``. Hashed into
    the fingerprint only when non-zero, so adding this field left every other recipe's cache key as it was."""
    hint_template: str = ""
    """The guider-prompt template of the hinted examples (``posttrain.algos.gpo.hint.privileged_examples``);
    required when ``hint_fraction`` is set, hashed only when set (like ``hint_fraction``), so a new
    template is a new cache key."""

    data_version: int = 0
    """Bumped when the warm-start task's data changes while the recipe's fields stay (the cache key covers the
    recipe, not the data it is built from); hashed only when non-zero, like ``hint_fraction``."""

    def __post_init__(self) -> None:
        kinds = ("causal", "diffusion", "reward", "corpus")
        if self.kind not in kinds:
            raise ValueError(f"recipe {self.name!r}: kind {self.kind!r} not in {kinds}")
        if self.arch not in _CONFIGS:
            raise ValueError(f"recipe {self.name!r}: arch {self.arch!r} not in {sorted(_CONFIGS)}")
        if self.hidden_size % self.num_heads or self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"recipe {self.name!r}: hidden_size {self.hidden_size} must divide by num_heads "
                f"{self.num_heads}, which must divide by num_kv_heads {self.num_kv_heads}"
            )
        if not 0 <= self.hint_fraction < 1:
            raise ValueError(f"recipe {self.name!r}: hint_fraction {self.hint_fraction} must be in [0, 1)")
        if bool(self.hint_fraction) != bool(self.hint_template):
            raise ValueError(f"recipe {self.name!r}: hint_fraction {self.hint_fraction} and hint_template "
                             f"{self.hint_template!r} must be set together")

    def fingerprint(self) -> str:
        """Short hash of every field plus ``CODE_VERSION``: the cache key (the hint fields and ``data_version``
        only when set)."""
        fields = dataclasses.asdict(self)
        fields["warm_start"] = FORMER_WARM_STARTS.get(self.warm_start, self.warm_start)
        for name in ("hint_fraction", "hint_template", "data_version"):
            if not fields[name]:
                del fields[name]
        payload = json.dumps({**fields, "code_version": CODE_VERSION}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:12]


_CONFIGS = {"qwen2": Qwen2Config, "llama": LlamaConfig}

FORMER_WARM_STARTS = {
    "posttrain.algos.warm_start:sft_warm_start": "posttrain.models.tiny:sft_warm_start",
    "posttrain.algos.warm_start:sft_task_warm_start": "posttrain.models.tiny:sft_task_warm_start",
    "posttrain.algos.warm_start:diffusion_warm_start": "posttrain.models.diffusion:warm_start",
}
"""Warm starts that moved (out of ``models/``, which must not import the algorithms) hash under their former
"module:function": the fingerprint keys what a build does, so moving its code leaves every cached build valid."""

RECIPES: Registry[TinyRecipe] = Registry("tiny recipe")

_SFT = "posttrain.algos.warm_start:sft_warm_start"
_SFT_TASK = "posttrain.algos.warm_start:sft_task_warm_start"
_DIFFUSION = "posttrain.algos.warm_start:diffusion_warm_start"
_POLICY = {"arch": "qwen2", "hidden_size": 96, "num_layers": 3, "num_heads": 4, "num_kv_heads": 2,
           "intermediate_size": 256, "max_position_embeddings": 256, "lr": 3e-3, "batch_size": 64, "seed": 0}


def _declare(recipe: TinyRecipe) -> TinyRecipe:
    RECIPES.register(recipe.name)(recipe)
    return recipe


# The arithmetic policy's warm start learns from labels where half the targets carry a sign error
# (ArithmeticTask.distractor): a systematic mistake, as SFT on noisy data leaves, that the
# verifier-rewarded RL of the demo can find and remove. The other recipes use clean labels.
_declare(TinyRecipe(name="causal-arithmetic", kind="causal", task="arithmetic", warm_start=_SFT,
                    warm_start_steps=800, target_noise=0.5, **_POLICY))
# `--algo gpo`'s embedded default (GPOConfig.tiny_recipe) and its LLM benchmark (benchmarks/gpo_llm.md):
# the same policy, but a quarter of its warm start shows the GPO guider's hinted prompt (the arithmetic
# task's compensation hint, which does not state the answer) with the clean answer, so the guider starts
# stronger than the unhinted learner. The plain prompts keep causal-arithmetic's label noise and get 900
# steps' worth.
_declare(TinyRecipe(name="causal-arithmetic-hint", kind="causal", task="arithmetic", warm_start=_SFT,
                    warm_start_steps=1200, target_noise=0.5, hint_fraction=0.25,
                    hint_template="{prompt}\nHint: {hint}.", **_POLICY))
# DuPO's embedded default (`--algo dupo`, `posttrain dupo-rerank`): one model for the primal word problems and
# their dual questions (task word-arithmetic-sft), half the primal targets replaced by a systematic error (the
# last operation forgotten) so DuPO's label-free reward has mistakes to remove; the dual targets are clean,
# since DuPO presumes a dual solver more reliable than the primal. data_version 2 asks every operand under the
# true answer and under a wrong one (often the primal's own mistake), the primal twice, so that its dual solver
# recovers operands under the true answer far more often than under the taught mistake (the rates, against
# data version 0's: benchmarks/dupo.md, benchmarks/results/dupo_judge.json).
_declare(TinyRecipe(name="causal-word-arithmetic", kind="causal", task="word-arithmetic", warm_start=_SFT_TASK,
                    warm_start_steps=2000, target_noise=0.5, data_version=2, **_POLICY))
# DuPO's translation dual (`--algo dupo --dual_task translation --task word-translation`): the same policy on
# the synthetic English-to-Zed task, primal and back-translation questions (task word-translation-sft), half the
# primal targets with the word order left unreversed; the back-translation targets are clean.
_declare(TinyRecipe(name="causal-word-translation", kind="causal", task="word-translation", warm_start=_SFT_TASK,
                    warm_start_steps=300, target_noise=0.5, **_POLICY))
# Prefix-RL's embedded default (`--algo prefix-rl`, `posttrain prefix-cluster`; posttrain.tasks.answer_format):
# a target the size of the other policies and a tinier adapter (the policy prefix-rl trains), both warm-started
# on every training problem once in each answer format, so either opens either way on any input. The target
# comes first: it is the task's default policy (default_recipe_for), which makes `--algo grpo --task
# answer-format` full-sequence RL on the target; PrefixRLConfig.tiny_recipe names the adapter.
_declare(TinyRecipe(name="causal-answer-format", kind="causal", task="answer-format", warm_start=_SFT_TASK,
                    warm_start_steps=500, **{**_POLICY, "batch_size": 32}))
_declare(TinyRecipe(name="causal-answer-format-adapter", kind="causal", task="answer-format",
                    warm_start=_SFT_TASK, warm_start_steps=300,
                    **{**_POLICY, "hidden_size": 64, "num_layers": 2, "intermediate_size": 128, "batch_size": 32}))
_declare(TinyRecipe(name="causal-countdown", kind="causal", task="countdown", warm_start=_SFT,
                    warm_start_steps=800, **_POLICY))
_declare(TinyRecipe(name="causal-sudoku", kind="causal", task="sudoku", warm_start=_SFT,
                    warm_start_steps=220, **_POLICY))
# The diffusion Sudoku policy's warm start learns from labels where half the targets swap the 1s and 2s
# of the blank cells (SudokuTask.distractor): deliberately noisy SFT targets, a systematic error of the kind
# SFT on noisy data leaves. ESPO's demo then raises the held-out solve rate above the warm start's
# (benchmarks/espo_sudoku.md; the warm start, and so the numbers, differ by CPU:
# benchmarks/results/espo_demo_machines.json).
_declare(TinyRecipe(name="diffusion-sudoku", kind="diffusion", task="sudoku",
                    warm_start=_DIFFUSION, warm_start_steps=800, target_noise=0.5,
                    **_POLICY))
_declare(TinyRecipe(name="diffusion-countdown", kind="diffusion", task="countdown",
                    warm_start=_DIFFUSION, warm_start_steps=200, **_POLICY))
_declare(TinyRecipe(name="reward-mr3", kind="reward", task=None, warm_start="rewards.mr3.tiny:warm_start",
                    warm_start_steps=1200, **_POLICY))
# Text2Grad's embedded default (posttrain.tasks.step_arithmetic): the policy learns step solutions where half the
# targets carry one wrong step result (carried on), so a span reward model has localised errors to point at.
_declare(TinyRecipe(name="causal-step-arithmetic", kind="causal", task="step-arithmetic", warm_start=_SFT_TASK,
                    warm_start_steps=800, target_noise=0.5, **_POLICY))
# The tiny span reward model (rewards.text2grad.tiny): program-written "spans" feedback as compact JSON on responses
# with injected step errors and on the warm-start policy's own samples, the poor spans weighted in the loss. data
# version 1: the targets say "incomplete" when steps are missing; 2: the policy samples and the weights, wider
# (128) and longer (2500 steps), because the 700-step, 96-wide critic on noisy responses alone flagged poor steps
# at chance (issue 41; benchmarks/text2grad.md).
_declare(TinyRecipe(name="reward-text2grad", kind="reward", task="step-arithmetic-feedback",
                    warm_start="rewards.text2grad.tiny:warm_start", warm_start_steps=2500, data_version=2,
                    **{**_POLICY, "batch_size": 16, "hidden_size": 128, "intermediate_size": 384, "lr": 2e-3}))
# Text2Grad's "spans without critique" ablation: the same model, data and warm start with the critique field
# removed from every target, so the model marks spans without writing its analysis first.
_declare(dataclasses.replace(RECIPES.get("reward-text2grad"), name="reward-text2grad-nocritique",
                             task="step-arithmetic-feedback-nocritique"))
_declare(TinyRecipe(name="corpus-lm", kind="corpus", task=None,
                    warm_start="data_pipelines.common.corpus:warm_start", warm_start_steps=200, **_POLICY))


# vLLM-servable twins of the causal policies, for `--rollout vllm` / `vllm-remote` runs without --model
# (`vllm_variant`): vLLM's CPU attention does not implement the policies' head size of 24 (96 / 4 heads), so
# each twin has heads of 32 (3 for a width of 96, 2 for the prefix adapter's 64) and 1 KV head; task, data,
# label noise and warm start are the base recipe's.
# The base recipes are untouched (benchmarks were measured on them).
VLLM_HEAD_SIZE = 32
"""Attention head size of the vLLM twins (one vLLM's CPU attention serves)."""
VLLM_VARIANTS: dict[str, str] = {
    base: _declare(dataclasses.replace(RECIPES.get(base), name=f"{base}-vllm",
                                       num_heads=RECIPES.get(base).hidden_size // VLLM_HEAD_SIZE, num_kv_heads=1)).name
    for base in RECIPES.names() if RECIPES.get(base).kind == "causal"
}


def vllm_variant(name: str) -> str:
    """The vLLM-servable twin of recipe ``name`` (``VLLM_VARIANTS``), or ``name`` itself when it has none."""
    return VLLM_VARIANTS.get(name, name)


def default_recipe_for(task: str, kind: str = "causal") -> str:
    """Name of the recipe for ``task`` and ``kind`` (never a vLLM twin: ``vllm_variant`` maps to those);
    unknown pairs fail listing what exists."""
    if task == "dataset" and kind == "causal":
        return "causal-arithmetic"
    twins = set(VLLM_VARIANTS.values())
    for name in (n for n in RECIPES.names() if n not in twins):
        recipe = RECIPES.get(name)
        if recipe.task == task and recipe.kind == kind:
            return name
    known = ", ".join(f"{RECIPES.get(n).kind}/{RECIPES.get(n).task}" for n in RECIPES.names())
    raise KeyError(f"no tiny recipe for task {task!r} and kind {kind!r}; known (kind/task): {known}")


def build_model(recipe: TinyRecipe, tokenizer: PreTrainedTokenizerFast) -> PreTrainedModel:
    """A randomly initialised causal LM from ``recipe`` (every kind gets this architecture; the diffusion
    helper makes attention bidirectional).

    Weights depend only on ``recipe.seed``; the global RNG state is restored afterwards.
    """
    config = _CONFIGS[recipe.arch](
        vocab_size=len(tokenizer),
        hidden_size=recipe.hidden_size,
        intermediate_size=recipe.intermediate_size,
        num_hidden_layers=recipe.num_layers,
        num_attention_heads=recipe.num_heads,
        num_key_value_heads=recipe.num_kv_heads,
        max_position_embeddings=recipe.max_position_embeddings,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(recipe.seed)
        model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=torch.float32)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


WarmStart = Callable[[PreTrainedModel, PreTrainedTokenizerFast, TinyRecipe, torch.Generator], None]


def resolve_warm_start(recipe: TinyRecipe) -> WarmStart:
    """Import the recipe's "module:function" warm start, naming the recipe when that fails."""
    spec = recipe.warm_start or ""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"recipe {recipe.name!r}: warm_start {spec!r} must look like 'module:function'")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ImportError(f"recipe {recipe.name!r}: cannot import warm_start {spec!r}: {err}") from err


def warm_start_update(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                      scheduler: torch.optim.lr_scheduler.LRScheduler, loss: torch.Tensor) -> None:
    """One optimizer step of a warm start: backward, gradient norm clipped at 1, step, schedule advanced."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()


class WarmStartProgress:
    """Progress of a warm start: a tqdm bar on a terminal; otherwise (output going to a log file) a line every
    5% of the steps, so a first build that takes minutes shows in the log that it is alive."""

    def __init__(self, name: str, total: int) -> None:
        from tqdm.auto import tqdm

        self.name, self.total, self.step, self.started = name, total, 0, time.monotonic()
        self.terminal = sys.stderr.isatty()
        self.every = max(1, total // 20)
        self.bar = tqdm(total=total, desc=f"warm start {name}", leave=False, disable=not self.terminal)

    def update(self, loss: float) -> None:
        """Count one step and show its loss."""
        self.step += 1
        if self.terminal:
            self.bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
            self.bar.update(1)
        elif self.step % self.every == 0 or self.step == self.total:
            print(f"warm start {self.name}: step {self.step}/{self.total} ({100 * self.step // self.total}%), "
                  f"loss {loss:.3f}, {time.monotonic() - self.started:.0f} s", file=sys.stderr, flush=True)

    def close(self) -> None:
        self.bar.close()


def cache_root(cache_dir: str | Path | None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir)
    return Path(os.environ.get("POSTTRAIN_CACHE") or Path.home() / ".cache")


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Exclusive ``fcntl`` lock on ``path`` for the duration of the block (released if the process dies)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def recipe_dir(recipe: TinyRecipe, cache_dir: str | Path | None = None) -> Path:
    """Where ``recipe`` is (or would be) cached: ``<cache>/posttrain/tiny/<name>-<fingerprint>``."""
    return cache_root(cache_dir) / "posttrain" / "tiny" / f"{recipe.name}-{recipe.fingerprint()}"


def build_recipe(recipe: TinyRecipe, cache_dir: str | Path | None = None, force: bool = False) -> Path:
    """Build, warm-start and save ``recipe`` unless a finished build is cached; returns its directory.

    The build happens in a temporary sibling directory that is renamed into place only when complete,
    under a file lock, so concurrent callers never see a half-written model.
    """
    target = recipe_dir(recipe, cache_dir)
    with file_lock(target.with_name(target.name + ".lock")):
        if target.is_dir() and not force:
            logger.info("tiny model %s: reused %s", recipe.name, target)
            return target
        for stale in target.parent.glob(f".{target.name}.*"):
            shutil.rmtree(stale, ignore_errors=True)  # left by a build that died while holding the lock
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            _build_into(recipe, staging)
            if target.exists():
                trash = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
                os.replace(target, trash / "old")
                shutil.rmtree(trash)
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    logger.info("tiny model %s: built %s", recipe.name, target)
    return target


def set_intra_op_threads(count: int) -> None:
    """Set torch's intra-op thread count through the builtin itself: vLLM's CPU worker replaces
    ``torch.set_num_threads`` with a no-op in any process that started an in-process engine, after which the
    public name silently changes nothing."""
    torch._C.set_num_threads(count)


@contextmanager
def _single_thread() -> Iterator[None]:
    """One intra-op thread inside the block (a build's result must not depend on the thread count)."""
    previous = torch.get_num_threads()
    set_intra_op_threads(1)
    try:
        yield
    finally:
        set_intra_op_threads(previous)


def _build_into(recipe: TinyRecipe, directory: Path) -> None:
    tokenizer = build_tokenizer()
    model = build_model(recipe, tokenizer)
    if recipe.warm_start is not None and recipe.warm_start_steps > 0:
        generator = torch.Generator().manual_seed(recipe.seed)
        with _single_thread():
            resolve_warm_start(recipe)(model, tokenizer, recipe, generator)
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    payload = {**dataclasses.asdict(recipe), "code_version": CODE_VERSION, "fingerprint": recipe.fingerprint()}
    (directory / "recipe.json").write_text(json.dumps(payload, indent=2) + "\n")


def build_tiny(name: str, cache_dir: str | Path | None = None, force: bool = False) -> Path:
    """Build (or reuse the cached build of) the recipe called ``name``; returns the model directory."""
    return build_recipe(RECIPES.get(name), cache_dir=cache_dir, force=force)


def tiny_main(argv: list[str]) -> int:
    """``posttrain tiny [--recipe NAME] [--force] [--list] [--cache_dir DIR]``: build or list tiny models."""
    parser = CommandParser(prog="posttrain tiny", description="Build and cache the embedded tiny models.")
    parser.add_argument("--recipe", default="causal-arithmetic", choices=RECIPES.names(),
                        help="Recipe to build (default: causal-arithmetic).")
    parser.add_argument("--force", action="store_true", help="Rebuild even if a cached build exists.")
    parser.add_argument("--list", action="store_true", help="List the recipes and their cache directories.")
    parser.add_argument("--cache_dir", default=None, help="Cache root (default: $POSTTRAIN_CACHE or ~/.cache).")
    args = parser.parse_args(argv)
    if args.list:
        for name in RECIPES.names():
            recipe = RECIPES.get(name)
            path = recipe_dir(recipe, args.cache_dir)
            state = "built" if path.is_dir() else "not built"
            print(f"{name:27s} {recipe.kind:9s} task={recipe.task}  {state}  {path}")
        return 0
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    print(build_tiny(args.recipe, cache_dir=args.cache_dir, force=args.force))
    return 0
