"""Typed run configuration: dataclasses with a one-line doc per field, YAML + CLI overrides, validation.

Every algorithm has a config dataclass extending ``TrainConfig``. A field is declared with ``opt``:
its ``help`` is what ``--help`` prints, its ``choices`` are checked at start-up; a subclass changes inherited
defaults with ``@defaults(name=value)``, without redeclaring the field. Precedence, lowest
first: dataclass defaults, ``--config run.yaml``, ``--key value`` flags on the command line.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import logging
import os
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from posttrain.common.files import atomic_write_text
from posttrain.common.typed_values import coerce_value
from posttrain.engines.spec import (
    SPEC_CLASSES,
    VLLM_KINDS,
    EngineSpec,
    EngineSpecError,
    parse_engine_spec,
)
from posttrain.models.autocast import AUTOCAST_CHOICES
from posttrain.models.pretrained import resolve_model_name
from posttrain.models.tiny import RECIPES, build_tiny, default_recipe_for, vllm_variant

logger = logging.getLogger(__name__)

DEFAULT_ALGO = "grpo"
"""The algorithm of a run that names none (neither ``--algo`` nor an ``algo:`` key in its ``--config`` file)."""
VLLM_EMBEDDED_HELP = ("Without --model, vllm and vllm-remote start from the embedded model's vLLM-servable twin "
                      "(tiny recipe NAME-vllm: 3 heads of 32, since vLLM's CPU attention does not serve the default's "
                      "head size 24; same task, data, label noise and warm start).")
"""The ``rollout`` help's sentence on the embedded default of vLLM runs (``TrainConfig.embedded_recipe``)."""


class ConfigError(ValueError):
    """A bad configuration value: the message names the field, the value and what is allowed."""

    def __init__(self, name: str, value: Any, allowed: str) -> None:
        super().__init__(f"config field '{name}' = {value!r} is invalid: {allowed}")
        self.field_name = name


def opt(default: Any, help: str, choices: Sequence[Any] | None = None) -> Any:
    """Declare a documented config field (mutable defaults are copied per instance)."""
    meta = {"help": help, "choices": tuple(choices) if choices else None}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


def defaults(**values: Any) -> Callable[[type], type]:
    """Class decorator, placed under ``@dataclass``: the config subclass changes the defaults of inherited fields
    without redeclaring them, their type, help and choices staying the base's. A name that is not an inherited
    field, or that the class declares itself, is an error."""

    def apply(cls: type) -> type:
        declared = dict(inspect.get_annotations(cls))
        for name, value in values.items():
            owner = next((base for base in cls.__mro__[1:] if dataclasses.is_dataclass(base)
                          and name in {f.name for f in dataclasses.fields(base)}), None)
            if owner is None or name in declared:
                raise TypeError(f"{cls.__name__}: defaults() takes inherited fields only, not {name!r}")
            inherited = next(f for f in dataclasses.fields(owner) if f.name == name)
            declared[name] = typing.get_type_hints(owner)[name]
            setattr(cls, name, opt(value, inherited.metadata["help"], inherited.metadata["choices"]))
        cls.__annotations__ = declared
        return cls

    return apply


@dataclass
class TrainConfig:
    """Options shared by every algorithm."""

    # --- what to train -------------------------------------------------------------------------
    algo: str = opt(DEFAULT_ALGO, "Algorithm to run: --algo on the command line, else `algo:` in the --config file, "
                                  "else grpo (`posttrain train --help` lists them).")
    model: str | None = opt(None, "Model path or hub id; unset = the embedded tiny model for the task.")
    trust_remote_code: bool = opt(False, "Run the checkpoint's own modeling code (needed by e.g. LLaDA and Dream).")
    task: str = opt("arithmetic", "Built-in task (arithmetic, countdown, sudoku) or 'dataset' to use --dataset.")
    dataset: str | None = opt(None, "JSONL file or Hugging Face dataset id; used when --task dataset.")
    prompt_column: str = opt("prompt", "Dataset column holding the prompt.")
    answer_column: str = opt("answer", "Dataset column holding the reference answer.")
    test_fraction: float = opt(0.1, "Held-out fraction of a --dataset without a test split.")
    shuffle: bool = opt(True, "Visit the training split in a fresh seeded order each epoch; false = the file's "
                              "order (keeps a curriculum, e.g. mR3's easy-to-hard SFT data).")
    raw_prompts: bool = opt(False, "Feed --dataset prompts to the model as they are, without the chat template "
                            "(for prompts already fully rendered, e.g. mR3 SFT data from `python -m rewards.mr3.data`).")
    text_column: str | None = opt(None, "Dataset column of plain text to train on with a language-modelling loss on "
                                  "every token, no prompt (--task dataset, --algo sft, --eval_every 0; e.g. EntropyLong's "
                                  "`text`).")
    reward: str | None = opt(None, "Reward: unset = the task's verifier; or 'module:function' (TRL signature).")
    system_prompt: str | None = opt(None, "Optional system message put in front of every prompt.")
    # --- output and run control ----------------------------------------------------------------
    output_dir: str = opt("", "Where checkpoints, metrics and the resolved config go; empty = outputs/<algo>-<task>.")
    seed: int = opt(0, "Seed for data order, sampling and initialisation.")
    steps: int = opt(200, "Training steps: each takes one batch of prompts_per_step examples (and their rollouts) "
                          "and makes mu optimizer steps on it (steps x mu optimizer steps in all); save_every, "
                          "eval_every and log_every count training steps.")
    resume: str | None = opt(None, "'auto' = latest checkpoint in output_dir, or a checkpoint path.")
    save_every: int = opt(100, "Save a checkpoint every N steps (and at the end); 0 = only at the end.")
    keep_last: int = opt(2, "Keep only the newest N checkpoints.", None)
    eval_every: int = opt(50, "Evaluate on the held-out split every N steps (and at start and end); 0 = never.")
    eval_examples: int = opt(128, "Held-out examples per evaluation (0 = all).")
    pass_k: int = opt(4, "k for pass@k at evaluation (sampled at the rollout temperature); 1 = off.")
    log_every: int = opt(1, "Write metrics every N steps.")
    report_to: str = opt("jsonl,tensorboard", "Comma list of metric sinks: jsonl, tensorboard, wandb.")
    progress: bool = opt(True, "Show a progress bar on rank 0.")
    num_threads: int = opt(0, "torch CPU threads per rank; 0 = $OMP_NUM_THREADS if set, else cores / local ranks.")
    dist_timeout_s: float = opt(600.0, "Seconds a collective of the training ranks (barrier, ZeRO-3 gather, gradient "
                                       "all-reduce) may wait before the ranks fail: when one rank fails (e.g. rank 0 "
                                       "in a weight sync), the others fail within this. It must exceed the longest "
                                       "wait of one rank for another (a checkpoint save, an evaluation).")
    # --- batch shape ---------------------------------------------------------------------------
    prompts_per_step: int = opt(16, "Prompts per optimizer step across all ranks.")
    group_size: int = opt(8, "Completions sampled per prompt (G).")
    micro_batch_size: int = opt(32, "Samples per forward/backward on one rank.")
    mu: int = opt(1, "Inner iterations: optimizer steps made on each training step's batch.")
    # --- optimisation --------------------------------------------------------------------------
    lr: float = opt(1e-4, "Peak learning rate (AdamW).")
    weight_decay: float = opt(0.0, "AdamW weight decay.")
    warmup_steps: int = opt(0, "Linear warm-up, in optimizer steps (a run takes steps x mu of them).")
    lr_scheduler: str = opt("constant", "Learning-rate schedule after warm-up, over the run's steps x mu optimizer "
                                        "steps.", ["constant", "linear", "cosine"])
    max_grad_norm: float = opt(1.0, "Gradient clipping norm; 0 = off.")
    zero_stage: int = opt(0, "DeepSpeed ZeRO stage.", [0, 1, 2, 3])
    precision: str = opt("fp32", "Training precision.", ["fp32", "bf16"])
    autocast: str = opt("off", "bf16 autocast of the policy's forwards, weights and optimizer kept fp32 (with "
                               "--precision fp32): auto = on where the CPU multiplies bf16 natively (AMX-BF16 or "
                               "AVX512-BF16 in /proc/cpuinfo), off on other CPUs and on GPUs; bf16 = always; "
                               "off = never. Default off, so a run's numbers do not depend on which CPU it lands "
                               "on.", list(AUTOCAST_CHOICES))
    gradient_checkpointing: bool = opt(False, "Recompute activations in backward to save memory.")
    disable_dropout: bool = opt(True, "Turn every dropout of the trained models off (TRL's default): the old-policy "
                                      "log-probs are computed in eval mode and the loss in train mode, so with "
                                      "dropout on the ratio starts away from 1 before any update.")
    lora_r: int = opt(0, "LoRA rank via peft; 0 = full fine-tuning.")
    lora_alpha: int = opt(16, "LoRA alpha.")
    # --- sampling ------------------------------------------------------------------------------
    rollout: EngineSpec = opt("hf", "The policy's rollout engine, an engine spec: hf (our decoding loop), "
                                        "diffusion (masked-diffusion sampler), vllm (colocated in each rank), "
                                        "vllm-remote:URL[,URL] (`posttrain rollout-worker` servers); its options are "
                                        "--rollout.OPTION value (listed below). " + VLLM_EMBEDDED_HELP,
                              ["hf", "diffusion", *VLLM_KINDS])
    async_rollouts: bool = opt(False, "Generate the next steps' rollouts while this step trains (GRPO/RLOO); stale "
                                      "rollouts are corrected by --tis_cap (the ratio's old policy stays the "
                                      "trainer's).")
    max_staleness: int = opt(1, "--async_rollouts: how many weight versions a step's rollouts may lag the trained "
                                "policy (asserted); generation runs that many steps ahead. Above 1 it adds "
                                "staleness but no overlap: every sync waits for all launched generations, so only "
                                "one step's generation overlaps training either way.")
    sync_every: int = opt(1, "Push the trained weights into the rollout engine every N steps (1 = after every step); "
                             "rollouts in between are sampled by older weights (see --tis_cap).")
    rollout_batch_size: int = opt(0, "Most sequences generated in one batch; 0 = a whole step's samples on this rank.")
    max_prompt_tokens: int = opt(256, "Prompts longer than this are rejected with an error.")
    max_new_tokens: int = opt(16, "Maximum completion length in tokens.")
    temperature: float = opt(1.0, "Sampling temperature for rollouts.")
    top_p: float = opt(1.0, "Nucleus sampling threshold for rollouts.")
    top_k: int = opt(0, "Top-k sampling for rollouts; 0 = off.")

    def __post_init__(self) -> None:
        for name in spec_fields(type(self)):
            value = getattr(self, name)
            if isinstance(value, (str, dict)):
                setattr(self, name, engine_spec_value(name, value))
        if not self.output_dir:
            self.output_dir = f"outputs/{self.algo}-{self.task}"

    # -- derived values --------------------------------------------------------------------------
    @property
    def model_kind(self) -> str:
        """"diffusion" (a masked-diffusion LM, sampled by the diffusion sampler) or "causal"."""
        return "diffusion" if self.rollout.kind == "diffusion" else "causal"

    def tiny_recipe(self, kind: str) -> str:
        """The embedded tiny recipe a run without ``--model`` starts from: the task's ``kind`` recipe
        (an algorithm whose default needs another warm start overrides this)."""
        return default_recipe_for(self.task, kind)

    def embedded_recipe(self, kind: str) -> str:
        """The tiny recipe a run without ``--model`` is built from: ``tiny_recipe(kind)``, or with a vLLM
        rollout (``vllm``, ``vllm-remote``) that recipe's vLLM-servable twin (``models.tiny.vllm_variant``)."""
        name = self.tiny_recipe(kind)
        return vllm_variant(name) if self.rollout.kind in VLLM_KINDS else name

    def per_rank_prompts(self, world_size: int) -> int:
        return self.prompts_per_step // world_size

    def per_rank_samples(self, world_size: int) -> int:
        return self.per_rank_prompts(world_size) * self.group_size

    def grad_accum_steps(self, world_size: int) -> int:
        return max(1, self.per_rank_samples(world_size) // self.micro_batch_size)

    # -- validation ------------------------------------------------------------------------------
    def validate(self, world_size: int = 1) -> None:
        """Fail with the field, the value and what is allowed; called once per run, by
        ``posttrain.trainer.Trainer.from_config``, before anything is built or the process group joined."""
        for f in dataclasses.fields(self):
            choices = f.metadata.get("choices")
            value = getattr(self, f.name)
            if isinstance(value, EngineSpec):
                value = value.kind
            if choices and value not in choices:
                raise ConfigError(f.name, value, f"choose one of {list(choices)}")
        positive = ["steps", "prompts_per_step", "group_size", "micro_batch_size", "mu", "max_new_tokens",
                    "max_prompt_tokens", "log_every", "pass_k"]
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(name, getattr(self, name), "must be >= 1")
        for name in ["save_every", "eval_every", "eval_examples", "keep_last", "warmup_steps", "lora_r", "num_threads",
                     "rollout_batch_size"]:
            if getattr(self, name) < 0:
                raise ConfigError(name, getattr(self, name), "must be >= 0")
        if self.lr <= 0:
            raise ConfigError("lr", self.lr, "must be > 0")
        if self.dist_timeout_s <= 0:
            raise ConfigError("dist_timeout_s", self.dist_timeout_s, "must be > 0 seconds")
        _check_async_rollouts(self)
        _check_weight_sync(self)
        if self.temperature <= 0:
            raise ConfigError("temperature", self.temperature, "rollouts need a temperature > 0")
        if not 0 < self.top_p <= 1:
            raise ConfigError("top_p", self.top_p, "must be in (0, 1]")
        if not 0 < self.test_fraction < 1:
            raise ConfigError("test_fraction", self.test_fraction, "must be in (0, 1)")
        if self.lora_r and self.zero_stage == 3:
            raise ConfigError("lora_r", self.lora_r, "LoRA is supported with zero_stage 0, 1 or 2, not 3")
        if self.task == "dataset" and not self.dataset:
            raise ConfigError("dataset", self.dataset, "--task dataset needs --dataset PATH_OR_ID")
        if not self.model:
            _check_embedded_model(self)
        if self.raw_prompts and (self.task != "dataset" or self.system_prompt):
            raise ConfigError("raw_prompts", self.raw_prompts,
                              "applies to --task dataset only, and excludes --system_prompt (the prompt is used as is)")
        if self.text_column and (self.task != "dataset" or self.algo != "sft" or self.raw_prompts or self.eval_every):
            raise ConfigError("text_column", self.text_column,
                              "plain text trains with --task dataset --algo sft --eval_every 0 (no prompt to answer), "
                              "without --raw_prompts")
        if self.model and not self.trust_remote_code and _ships_own_code(self.model):
            raise ConfigError("trust_remote_code", False, f"the checkpoint {self.model} ships its own modeling code "
                              "(config.json has an auto_map); pass --trust_remote_code true to run it")
        if self.resume not in (None, "auto") and not Path(self.resume).exists():
            raise ConfigError("resume", self.resume, "use 'auto' or an existing checkpoint directory")
        if self.prompts_per_step % world_size:
            valid = [n for n in range(world_size, 4 * max(self.prompts_per_step, world_size) + 1, world_size)][:6]
            raise ConfigError("prompts_per_step", self.prompts_per_step,
                              f"must divide by the {world_size} ranks so each rank holds whole groups; "
                              f"valid values include {valid}")
        per_rank = self.per_rank_samples(world_size)
        if per_rank % self.micro_batch_size and self.micro_batch_size < per_rank:
            valid = [d for d in range(1, per_rank + 1) if per_rank % d == 0]
            raise ConfigError("micro_batch_size", self.micro_batch_size,
                              f"each rank holds {per_rank} samples per step "
                              f"(prompts_per_step {self.prompts_per_step} / {world_size} ranks x group_size "
                              f"{self.group_size}); valid micro-batch sizes: {valid}")
        for reason in self.incompatibilities():
            raise ConfigError(*reason)

    def incompatibilities(self) -> list[tuple[str, Any, str]]:
        """Algorithm-specific checks; subclasses return (field, value, allowed) triples."""
        return []

    # -- I/O ---------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Every field by name; an engine spec as its string form under its name and each of its options under
        ``NAME.OPTION`` (as ``--config`` and the command line read them)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, EngineSpec):
                out[f.name] = str(value)
                out.update({f"{f.name}.{k}": v for k, v in value.options().items()})
            else:
                out[f.name] = json.loads(json.dumps(value)) if isinstance(value, (list, dict)) else value
        return out

    def save(self, directory: str | os.PathLike) -> Path:
        """Write the resolved config as YAML next to the checkpoints (atomically)."""
        path = Path(directory) / "config.yaml"
        atomic_write_text(path, yaml.safe_dump(self.to_dict(), sort_keys=False))
        return path


def _check_embedded_model(config: TrainConfig) -> None:
    """Without ``--model`` a run starts from an embedded tiny model (``config.tiny_recipe``); when there is
    none for its task and model kind, fail at start-up naming the fix."""
    kind = config.model_kind
    try:
        config.tiny_recipe(kind)
    except KeyError:
        recipes = [RECIPES.get(name) for name in RECIPES.names()]
        tasks = sorted({r.task for r in recipes if r.kind == kind and r.task})
        raise ConfigError("task", config.task, f"there is no embedded tiny {kind} model for it; pass --task "
                          f"{' or --task '.join(tasks)} (the tasks with one), or name a checkpoint with "
                          "--model PATH_OR_HUB_ID") from None


def _check_async_rollouts(config: TrainConfig) -> None:
    """The asynchronous-rollout fields (``--async_rollouts``)."""
    if config.max_staleness < 1:
        raise ConfigError("max_staleness", config.max_staleness, "must be >= 1 (synchronous runs need no bound: "
                          "leave --async_rollouts false)")
    if config.async_rollouts and config.sync_every != 1:
        raise ConfigError("sync_every", config.sync_every, "--async_rollouts needs --sync_every 1 (its staleness "
                          "bound counts the syncs after every step)")


def _check_weight_sync(config: TrainConfig) -> None:
    """The sync policy and the rollout engine: it serves the policy (no path of its own), and the engine's
    own check of the run's model (``EngineSpec.config_problem``: for vLLM, installed and the model servable)."""
    if config.sync_every < 1:
        raise ConfigError("sync_every", config.sync_every, "must be >= 1 (steps between weight syncs)")
    if config.sync_every > 1 and config.save_every % config.sync_every:
        raise ConfigError("sync_every", config.sync_every, f"must divide save_every ({config.save_every}): a resumed "
                          "run re-syncs at its checkpoint, which equals an uninterrupted run only on a sync step")
    if config.rollout.location and config.rollout.kind != "vllm-remote":
        raise ConfigError("rollout", str(config.rollout), "the policy's engine serves the trained model (--model); "
                          "name the engine kind without a path")
    problem = config.rollout.config_problem(config)
    if problem:
        raise ConfigError("rollout", str(config.rollout), problem)


def _ships_own_code(model: str) -> bool:
    """True when ``model`` is a local checkpoint whose config.json names its own classes (``auto_map``)."""
    path = Path(model) / "config.json"
    if not path.is_file():
        return False
    try:
        return "auto_map" in json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ConfigError("model", model, f"{path} is not valid JSON ({err})") from err


# ---------------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------------

def _field_type(cls: type, f: dataclasses.Field) -> Any:
    hints = typing.get_type_hints(cls)
    return hints[f.name]


def _coerce(name: str, raw: Any, annotation: Any) -> Any:
    """Turn a CLI string (or a YAML value) into the field's type, naming the field on failure."""
    try:
        return coerce_value(raw, annotation)
    except ValueError as err:
        raise ConfigError(name, raw, str(err)) from None


ROLLOUT_ALIASES = {"rollout_workers": "urls", "worker_timeout_s": "sync_timeout_s", "vllm_sleep": "sleep",
                   "vllm_gpu_memory_utilization": "gpu_memory_utilization", "block_length": "block_length",
                   "diffusion_steps": "steps", "remasking": "remasking"}
"""Older flat spellings of the ``rollout`` engine's options: ``--block_length 8`` = ``--rollout.block_length 8``."""


@functools.cache
def spec_fields(cls: type) -> tuple[str, ...]:
    """The fields of the config class ``cls`` that hold an engine spec (``rollout``, a role's engine)."""
    hints = typing.get_type_hints(cls)
    return tuple(f.name for f in dataclasses.fields(cls)
                 if isinstance(hints[f.name], type) and issubclass(hints[f.name], EngineSpec))


def engine_spec_value(name: str, raw: Any, options: dict[str, Any] | None = None) -> EngineSpec:
    """The engine spec of the config field ``name`` from its value (a spec, its string form, or a YAML mapping
    of ``engine``: the string form, and options) and ``options`` (``--NAME.OPTION value``, ``NAME.OPTION:`` in
    YAML); a bad one raises ``ConfigError`` naming ``NAME`` or ``NAME.OPTION``."""
    options = dict(options or {})
    if isinstance(raw, dict):
        raw = dict(raw)
        text = raw.pop("engine", None)
        options = {**raw, **options}
    else:
        text = raw
    try:
        return parse_engine_spec(text, **options)
    except EngineSpecError as err:
        where = f"{name}.{err.option}" if err.kind else name
        raise ConfigError(where, err.value, err.allowed) from None


def _split_overrides(argv: Sequence[str]) -> list[tuple[str, str | None]]:
    pairs: list[tuple[str, str | None]] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if not token.startswith("--"):
            raise ConfigError(token, token, "expected --key value")
        key = token[2:]
        if "=" in key:
            key, value = key.split("=", 1)
            pairs.append((key, value))
            i += 1
        elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            pairs.append((key, argv[i + 1]))
            i += 2
        else:
            pairs.append((key, None))  # bare flag: true for bools
            i += 1
    return pairs


def load_config_file(path: str | None) -> dict[str, Any]:
    """The ``field: value`` mapping of a ``--config`` YAML file (``-`` in a key reads as ``_``)."""
    if path is None or not Path(path).is_file():
        raise ConfigError("config", path, "must be an existing YAML file")
    loaded = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(loaded, dict):
        raise ConfigError("config", path, "the YAML file must hold a mapping of field: value")
    return {str(k).replace("-", "_"): v for k, v in loaded.items()}


def requested_algo(argv: Sequence[str]) -> str:
    """The algorithm a command line asks for: its ``--algo NAME``, else the ``algo:`` key of its ``--config``
    file(s), else ``DEFAULT_ALGO``. The flag wins over the file, as every ``--key value`` flag does."""
    pairs = _split_overrides(argv)
    flags = [value for key, value in pairs if key == "algo"]
    if flags:
        if flags[-1] is None:
            raise ConfigError("algo", None, "needs a value, e.g. --algo grpo")
        return flags[-1]
    from_files = [load_config_file(value).get("algo") for key, value in pairs if key == "config"]
    from_files = [algo for algo in from_files if algo is not None]
    if not from_files:
        return DEFAULT_ALGO
    if not isinstance(from_files[-1], str):
        raise ConfigError("algo", from_files[-1], "the --config file's algo must be an algorithm name, e.g. grpo")
    return from_files[-1]


def build_config(cls: type[TrainConfig], argv: Sequence[str]) -> TrainConfig:
    """Build ``cls`` from ``--config FILE`` and ``--key value`` overrides (no validation yet)."""
    pairs = _split_overrides(argv)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    for key, value in pairs:
        if key == "config":
            for k, v in load_config_file(value).items():
                values[k] = ("yaml", v)
    for key, value in pairs:
        if key in ("config", "local_rank"):
            continue
        values[key.replace("-", "_")] = ("cli", value)
    kwargs: dict[str, Any] = {}
    specs = spec_fields(cls)
    spec_options: dict[str, dict[str, Any]] = {name: {} for name in specs}
    for key in list(values):
        name, dot, option = key.partition(".")
        if dot and name in specs:
            spec_options[name][option] = values.pop(key)[1]
        elif key in ROLLOUT_ALIASES and "rollout" in specs:
            spec_options["rollout"][ROLLOUT_ALIASES[key]] = values.pop(key)[1]
    for name in specs:
        options = {k: "true" if v is None else v for k, v in spec_options[name].items()}  # a bare flag: true
        if name in values or options:
            raw = values.pop(name)[1] if name in values else fields[name].default
            kwargs[name] = engine_spec_value(name, raw, options)
    for key, (_, value) in values.items():
        if key not in fields:
            close = [n for n in fields if n.startswith(key[:4])]
            hint = f"; did you mean {close}?" if close else "; see --help"
            algo = values["algo"][1] if "algo" in values else cls.__name__
            raise ConfigError(key, value, f"unknown option for --algo {algo}{hint}")
        annotation = _field_type(cls, fields[key])
        if value is None:
            if annotation is not bool:
                raise ConfigError(key, value, "needs a value")
            value = True
        kwargs[key] = _coerce(key, value, annotation)
    return cls(**kwargs)


@dataclass(frozen=True)
class HelpSection:
    """One group of ``--help``: its title, what its options are for, and the ``TrainConfig`` fields in it."""

    title: str
    doc: str
    fields: tuple[str, ...]


TRAIN_CONFIG_SECTIONS: tuple[HelpSection, ...] = (
    HelpSection("model", "what is trained, from which weights", ("algo", "model", "trust_remote_code", "lora_r",
                                                                  "lora_alpha", "disable_dropout")),
    HelpSection("data and task", "the prompts, their answers and the reward",
                ("task", "dataset", "prompt_column", "answer_column", "test_fraction", "shuffle", "raw_prompts",
                 "text_column", "reward", "system_prompt")),
    HelpSection("batch and steps", "how much a step trains on, and how many steps",
                ("steps", "prompts_per_step", "group_size", "micro_batch_size", "mu", "seed")),
    HelpSection("rollout and sampling", "the engine that generates the policy's completions, and how it samples",
                ("rollout", "async_rollouts", "max_staleness", "sync_every", "rollout_batch_size", "max_prompt_tokens",
                 "max_new_tokens", "temperature", "top_p", "top_k")),
    HelpSection("optimisation", "AdamW and its learning-rate schedule",
                ("lr", "weight_decay", "warmup_steps", "lr_scheduler", "max_grad_norm")),
    HelpSection("distributed and performance", "DeepSpeed, precision, memory and threads",
                ("zero_stage", "precision", "autocast", "gradient_checkpointing", "num_threads", "dist_timeout_s")),
    HelpSection("output, logging, evaluation and checkpoints", "what a run writes, and when",
                ("output_dir", "resume", "save_every", "keep_last", "eval_every", "eval_examples", "pass_k",
                 "log_every", "report_to", "progress")),
)
"""``--help``'s sections of ``TrainConfig``'s own fields, each field in exactly one; a field that an algorithm's
config class declares itself is listed under that class instead (``help_sections``)."""


def help_sections(cls: type[TrainConfig], algo: str | None = None) -> list[tuple[str, list[dataclasses.Field]]]:
    """``cls``'s fields grouped for ``--help``, as (heading, fields): ``TrainConfig``'s by
    ``TRAIN_CONFIG_SECTIONS``, then, from the base down the dataclass MRO, each config class's section of the
    fields it declares first (a field it only redeclares stays where its first declaration put it)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    placed = [name for section in TRAIN_CONFIG_SECTIONS for name in section.fields]
    unplaced = sorted({f.name for f in dataclasses.fields(TrainConfig)} - set(placed))
    if unplaced:
        raise TypeError(f"TrainConfig fields {unplaced} are in no section of TRAIN_CONFIG_SECTIONS")
    groups = [(f"{section.title}: {section.doc}", [fields[name] for name in section.fields])
              for section in TRAIN_CONFIG_SECTIONS]
    seen = set(placed)
    for base in reversed(cls.__mro__):
        if not (isinstance(base, type) and issubclass(base, TrainConfig)) or base is TrainConfig:
            continue
        own = [fields[f.name] for f in dataclasses.fields(base) if f.name not in seen]
        seen.update(f.name for f in own)
        if own:
            name = f"{algo} options ({base.__name__})" if base is cls and algo else f"{base.__name__} options"
            summary = (base.__doc__ or "").strip().splitlines()[0]
            groups.append((f"{name}: {summary}" if summary else name, own))
    return groups


def help_text(cls: type[TrainConfig], algo: str | None = None) -> str:
    """Every field with its type, default, choices and one-line doc, for ``--help`` of ``--algo algo``, in the
    sections of ``help_sections``."""
    title = f"--algo {algo} ({cls.__name__})" if algo else cls.__name__
    lines = [f"Options of {title} (--key value, or a YAML file with --config):"]
    for heading, fields in help_sections(cls, algo):
        lines += ["", f"{heading}"]
        for f in fields:
            lines.extend(_field_help(cls, f, algo))
    return "\n".join(lines)


def _field_help(cls: type[TrainConfig], f: dataclasses.Field, algo: str | None) -> list[str]:
    """The ``--help`` lines of one field: its flag, type, choices and default, its doc, an engine spec's options."""
    default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
    if f.name == "algo" and algo:
        default = algo  # every config class inherits TrainConfig's "grpo"; show the documented algorithm
    annotation = _field_type(cls, f)
    type_name = getattr(annotation, "__name__", str(annotation).replace("typing.", ""))
    choices = f.metadata.get("choices")
    extra = f" {{{', '.join(map(str, choices))}}}" if choices else ""
    lines = [f"  --{f.name} ({type_name}{extra}, default {json.dumps(default)})", f"      {f.metadata.get('help', '')}"]
    if f.name in spec_fields(cls):
        lines.extend(_spec_option_help(f.name, choices or tuple(SPEC_CLASSES)))
    return lines


def _spec_option_help(name: str, kinds: Sequence[str]) -> list[str]:
    """The ``--NAME.OPTION`` lines of an engine-spec field, per engine kind it allows."""
    aliases = {option: old for old, option in ROLLOUT_ALIASES.items()} if name == "rollout" else {}
    lines = []
    for kind in kinds:
        lines.append(f"    {kind}: {SPEC_CLASSES[kind].summary}")
        for f in dataclasses.fields(SPEC_CLASSES[kind]):
            if f.name == "path":
                continue
            old = aliases.get(f.name)
            also = f"; also --{old}" if old else ""
            lines.append(f"  --{name}.{f.name} ({kind}, default {f.default!r}{also})")
            lines.append(f"      {f.metadata['help']}")
    return lines


def resolve_model_path(config: TrainConfig, kind: str = "causal") -> str:
    """``config.model`` (aliases resolved), or the directory of the run's tiny ``kind`` model
    (``config.embedded_recipe``: the task's, unless the algorithm needs another, or its vLLM-servable twin
    under a vLLM rollout; built if needed)."""
    if config.model:
        return resolve_model_name(config.model)
    name = config.embedded_recipe(kind)
    path = str(build_tiny(name))
    base = config.tiny_recipe(kind)
    if name != base:
        logger.info("--rollout %s without --model: using the embedded recipe %s (%s) instead of %s, whose "
                    "attention head size vLLM's CPU attention does not serve; same task, data, label noise and "
                    "warm start (rollout workers serve it with --model %s)", config.rollout, name, path, base, path)
    return path
