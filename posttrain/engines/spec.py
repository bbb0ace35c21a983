"""Engine specs: one frozen dataclass per engine kind (its own options, each with a one-line doc, validated
at construction) and the one string form that names an engine at every entry point (``--rollout``, a model
role's engine, ``posttrain serve --backend``, ``posttrain data ... --model``, ``dupo-rerank --engine``,
``prefix-cluster --engine``), read by ``parse_engine_spec``:

==================================  =====================================================================
``hf[:PATH]``, bare ``PATH``         our decoding loop over a Hugging Face causal LM (``transformers`` and,
                                     with no path, ``tiny`` / ``corpus-lm`` are other names for it)
``diffusion[:PATH]``                 the masked-diffusion sampler
``vllm[:PATH]``                      vLLM in this process (colocated)
``vllm-remote:URL[,URL...]``         ``posttrain rollout-worker`` servers, synced over vLLM's protocol
``http[s]://HOST:PORT[/v1][#MODEL]`` any OpenAI-compatible server (MODEL: the served model's name, whose
                                     tokenizer is loaded unless the caller gives one)
``fake``                             the reward server's stand-in engine (no model)
``cachelm``                          the data pipelines' count-based copy-cache scorer (no model)
==================================  =====================================================================

A spec without a path serves the model its caller supplies: the trainer's policy or a role's checkpoint, a
command's ``--model``, or the command's embedded default. Options that are not part of the string (the
diffusion schedule, vLLM's sleep mode, ...) are set by the entry point (``--rollout.OPTION value`` in the
trainer) through ``EngineSpec.with_options``.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from posttrain.common.typed_values import coerce_value
from posttrain.engines.vllm_setup import vllm_config_problem

VLLM_KINDS = ("vllm", "vllm-remote")
"""The engine kinds served by vLLM (colocated and remote workers)."""


class EngineSpecError(ValueError):
    """A bad engine spec: the message names the option (or the string), the value and what is allowed."""

    def __init__(self, option: str, value: Any, allowed: str, kind: str | None = None) -> None:
        where = f"engine spec {kind}: option '{option}' = {value!r}" if kind else f"engine spec {value!r}"
        super().__init__(f"{where} is invalid: {allowed}")
        self.option = option
        self.kind = kind
        self.value = value
        self.allowed = allowed


def spec_option(default: Any, help: str) -> Any:
    """Declare a documented engine option (``help`` is what ``--help`` prints)."""
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class EngineSpec:
    """What every spec has: its ``kind`` (the name in the string form), a one-line ``summary`` of the engine,
    and where its model is (``location``)."""

    kind: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    runs_module: ClassVar[bool] = False
    """Whether the engine runs a torch module in this process (hf, diffusion); the vLLM engines load their
    own copy of the checkpoint."""

    @property
    def borrows_module(self) -> bool:
        """Whether the engine runs its caller's module (an in-process engine whose spec names no checkpoint):
        the caller must lend it a module of its own, e.g. the trainer a frozen copy of the policy."""
        return self.runs_module and not getattr(self, "path", None)

    @property
    def location(self) -> str | None:
        """What follows ``KIND:`` in the string form (a path, worker URLs), or None."""
        return getattr(self, "path", None)

    def __str__(self) -> str:
        return f"{self.kind}:{self.location}" if self.location else self.kind

    def options(self) -> dict[str, Any]:
        """The spec's options (every field but its location) by name."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in LOCATION_FIELDS}

    def with_options(self, options: Mapping[str, Any]) -> EngineSpec:
        """A copy with ``options`` set (strings are converted to each option's type); an option this kind
        does not have raises naming it and the options it has."""
        values = _typed_options(type(self), options)
        return dataclasses.replace(self, **values)

    def config_problem(self, config: Any) -> str | None:
        """Why this engine cannot serve a run's ``config`` (its model), checked before anything starts; None
        when it can. Engines with nothing to check return None."""
        return None

    def _check(self, name: str, ok: bool, allowed: str) -> None:
        if not ok:
            raise EngineSpecError(name, getattr(self, name), allowed, self.kind)


LOCATION_FIELDS = ("path", "urls", "url", "model")
"""The fields the string form carries (everything else is an option)."""


@dataclass(frozen=True)
class HFSpec(EngineSpec):
    kind: ClassVar[str] = "hf"
    runs_module: ClassVar[bool] = True
    summary: ClassVar[str] = "our KV-cached decoding loop over a Hugging Face causal LM (CPU or GPU; exact scores)"

    path: str | None = spec_option(None, "Checkpoint folder, hub id or alias; unset = the caller's model.")

    def __post_init__(self) -> None:
        _check_path(self)


@dataclass(frozen=True)
class DiffusionSpec(EngineSpec):
    kind: ClassVar[str] = "diffusion"
    runs_module: ClassVar[bool] = True
    summary: ClassVar[str] = "LLaDA's semi-autoregressive low-confidence sampler over a masked-diffusion LM"

    path: str | None = spec_option(None, "Masked-diffusion checkpoint; unset = the caller's model.")
    block_length: int = spec_option(32, "Block length of the semi-autoregressive schedule (>= max_new_tokens: "
                                        "one block).")
    steps: int = spec_option(0, "Denoising steps over the whole completion; 0 = max_new_tokens (one token "
                                "committed per step).")
    remasking: str = spec_option("low_confidence", "Which masked positions to commit at each step: "
                                                   "low_confidence or random.")

    def __post_init__(self) -> None:
        _check_path(self)
        self._check("block_length", self.block_length >= 1, "must be >= 1")
        self._check("steps", self.steps >= 0, "must be >= 0 (0 = max_new_tokens)")
        self._check("remasking", self.remasking in ("low_confidence", "random"), "choose low_confidence or random")


@dataclass(frozen=True)
class VLLMSpec(EngineSpec):
    kind: ClassVar[str] = "vllm"
    summary: ClassVar[str] = "vLLM in this process (colocated; CUDA, or vLLM's CPU build; top-k scores)"

    path: str | None = spec_option(None, "Checkpoint folder or alias; unset = the caller's model (the trainer's "
                                         "policy: the checkpoint it was loaded from).")
    sleep: bool = spec_option(True, "Sleep while the trainer trains (frees the GPU memory; CUDA only, a no-op "
                                    "on CPU, where vLLM has no sleep mode).")
    gpu_memory_utilization: float = spec_option(0.3, "Share of GPU memory the engine may take (the trainer "
                                                     "shares the GPU).")
    sync_timeout_s: float = spec_option(120.0, "Seconds a weight-sync collective may take before it fails "
                                               "naming the engine (also --worker_timeout_s).")
    max_model_len: int | None = spec_option(None, "Prompt + completion tokens per sequence; unset = the model's "
                                                  "own limit.")

    def __post_init__(self) -> None:
        _check_path(self)
        self._check("gpu_memory_utilization", 0 < self.gpu_memory_utilization <= 1, "must be in (0, 1]")
        self._check("sync_timeout_s", self.sync_timeout_s > 0, "must be > 0 seconds")
        self._check("max_model_len", self.max_model_len is None or self.max_model_len >= 1, "must be >= 1")

    def config_problem(self, config: Any) -> str | None:
        """vLLM missing, or a model it cannot serve (``engines.vllm_setup.vllm_config_problem``)."""
        return vllm_config_problem(config)


@dataclass(frozen=True)
class VLLMRemoteSpec(EngineSpec):
    kind: ClassVar[str] = "vllm-remote"
    summary: ClassVar[str] = "`posttrain rollout-worker` servers, synced over vLLM's weight-transfer protocol"

    urls: tuple[str, ...] = spec_option((), "The workers (http://HOST:PORT, comma-separated in the string form); "
                                            "prompts are spread evenly over them, all synced.")
    sync_timeout_s: float = spec_option(120.0, "Seconds one worker's weight sync may take (the transfer group's "
                                               "rendezvous, each collective, each control call) before the run fails "
                                               "naming the worker (also --worker_timeout_s).")
    generation_timeout_s: float = spec_option(120.0, "Seconds a worker with requests in flight may go without "
                                                     "answering one before the step fails naming it (its queued "
                                                     "requests are cancelled); bounds each generation request too.")

    @property
    def location(self) -> str | None:
        return ",".join(self.urls) or None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "urls", tuple(parse_worker_urls(",".join(self.urls))))
        except ValueError as err:
            raise EngineSpecError("urls", ",".join(self.urls), str(err), self.kind) from None
        self._check("sync_timeout_s", self.sync_timeout_s > 0, "must be > 0 seconds")
        self._check("generation_timeout_s", self.generation_timeout_s > 0, "must be > 0 seconds")


@dataclass(frozen=True)
class HTTPSpec(EngineSpec):
    kind: ClassVar[str] = "http"
    summary: ClassVar[str] = "an OpenAI-compatible /v1/completions server (ours, `vllm serve`; top-k scores)"

    url: str = spec_option("", "The server's base URL (http[s]://HOST:PORT[/v1]).")
    model: str | None = spec_option(None, "The served model's name (after '#'); its tokenizer is loaded unless "
                                          "the caller gives one. Unset = 'default'.")

    @property
    def location(self) -> str | None:
        return self.url

    def __str__(self) -> str:
        return f"{self.url}#{self.model}" if self.model else self.url

    def __post_init__(self) -> None:
        self._check("url", bool(re.fullmatch(r"https?://[^/#\s]+(/[^#\s]*)?", self.url)),
                    "must look like http://HOST:PORT[/v1]")
        self._check("model", self.model is None or bool(self.model.strip()), "name the model after '#', or drop '#'")


@dataclass(frozen=True)
class FakeSpec(EngineSpec):
    kind: ClassVar[str] = "fake"
    summary: ClassVar[str] = "a deterministic stand-in with no model (the reward server's tests and load benchmark)"

    base_latency_s: float = spec_option(0.0, "Simulated fixed cost of one generate call, in seconds.")
    per_item_latency_s: float = spec_option(0.0, "Simulated extra cost per prompt of a generate call, in seconds.")

    def __post_init__(self) -> None:
        self._check("base_latency_s", self.base_latency_s >= 0, "must be >= 0")
        self._check("per_item_latency_s", self.per_item_latency_s >= 0, "must be >= 0")


@dataclass(frozen=True)
class CacheLMSpec(EngineSpec):
    kind: ClassVar[str] = "cachelm"
    summary: ClassVar[str] = "the data pipelines' count-based copy-cache character LM (scoring only, no model)"


SPEC_CLASSES: dict[str, type[EngineSpec]] = {cls.kind: cls for cls in (
    HFSpec, DiffusionSpec, VLLMSpec, VLLMRemoteSpec, HTTPSpec, FakeSpec, CacheLMSpec)}
"""Every engine kind by its name in the string form."""
ALIASES: dict[str, str] = {"transformers": "hf", "tiny": "hf", "corpus-lm": "hf"}
"""Other names of a kind (``posttrain serve --backend transformers``; the data pipelines' embedded LM)."""
_PATHLESS = ("tiny", "corpus-lm", "fake", "cachelm")


def parse_engine_spec(text: str | EngineSpec, **options: Any) -> EngineSpec:
    """The spec named by ``text`` in the string form (the module docstring), with ``options`` set; a spec
    passes through (with ``options`` set). A bad string raises ``EngineSpecError`` saying what is wrong."""
    if isinstance(text, EngineSpec):
        return text.with_options(options) if options else text
    if not isinstance(text, str) or not text.strip():
        raise EngineSpecError(str(text), text, "name an engine: hf, diffusion, vllm, vllm-remote:URL, "
                              "http://HOST:PORT, fake, cachelm, KIND:PATH or a model path")
    text = text.strip()
    if text.startswith(("http://", "https://")):
        url, hashed, model = text.partition("#")
        return _build(HTTPSpec, text, {"url": url.rstrip("/"), "model": model if hashed else None}, options)
    kind, colon, location = text.partition(":")
    if kind in ALIASES or kind in SPEC_CLASSES:
        name = ALIASES.get(kind, kind)
        if colon and not location:
            raise EngineSpecError(text, text, f"nothing after '{kind}:'; write {kind} alone or {kind}:PATH")
        if colon and kind in _PATHLESS:
            raise EngineSpecError(text, text, f"{kind} takes no path")
        cls = SPEC_CLASSES[name]
        if not colon:
            return _build(cls, text, {}, options)
        where = {"urls": tuple(location.split(","))} if cls is VLLMRemoteSpec else {"path": location}
        if cls is HTTPSpec:
            raise EngineSpecError(text, text, "write the URL itself: http://HOST:PORT[/v1][#MODEL]")
        return _build(cls, text, where, options)
    if colon and re.fullmatch(r"[a-z][a-z0-9_-]*", kind) and not location.startswith("//"):
        known = ", ".join([*SPEC_CLASSES, *ALIASES])
        raise EngineSpecError(text, text, f"unknown engine kind {kind!r} (known: {known}; a bare path means hf)")
    return _build(HFSpec, text, {"path": text}, options)


def parse_worker_urls(text: str) -> list[str]:
    """The worker URLs of a comma-separated list (``http://host:port``, no trailing slash); an empty list, a
    non-http URL or a repeated URL raises naming it."""
    urls = [u.strip().rstrip("/") for u in text.split(",") if u.strip()]
    if not urls:
        raise ValueError("no worker URL; give one or more, e.g. vllm-remote:http://127.0.0.1:8100")
    for url in urls:
        if not url.startswith(("http://", "https://")) or not url.split("://", 1)[1]:
            raise ValueError(f"rollout worker URL {url!r} must look like http://HOST:PORT")
    repeated = sorted({u for u in urls if urls.count(u) > 1})
    if repeated:
        raise ValueError(f"rollout worker URL(s) {repeated} are listed more than once")
    return urls


def _build(cls: type[EngineSpec], text: str, where: dict[str, Any], options: Mapping[str, Any]) -> EngineSpec:
    clash = sorted(set(where) & set(options))
    if clash:
        raise EngineSpecError(clash[0], options[clash[0]], f"'{text}' already gives it", cls.kind)
    values = _typed_options(cls, options)
    return cls(**where, **values)


def _typed_options(cls: type[EngineSpec], options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` converted to the types of ``cls``'s fields; an option ``cls`` lacks raises naming its options."""
    hints = typing.get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls)]
    for name in options:
        if name not in known:
            raise EngineSpecError(name, options[name], f"the {cls.kind} engine has no such option (its options: "
                                  f"{', '.join(known) or 'none'})", cls.kind)
    return {name: _coerce(cls.kind, name, raw, hints[name]) for name, raw in options.items()}


def _check_path(spec: EngineSpec) -> None:
    path = spec.path
    if path is not None and (not isinstance(path, str) or not path.strip()):
        raise EngineSpecError("path", path, "a checkpoint folder, hub id or alias (or unset)", spec.kind)


def _coerce(kind: str, name: str, raw: Any, annotation: Any) -> Any:
    """``raw`` (a CLI string or a YAML value) as the option's type, naming the option on failure."""
    try:
        return coerce_value(raw, annotation)
    except ValueError as err:
        raise EngineSpecError(name, raw, str(err), kind) from None
