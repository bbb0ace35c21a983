"""The data pipelines' language models: the project's engines by name, and how the pipelines turn text
into the token ids those engines take.

``load_backend(spec)`` returns one of the project's engines. Every one is a
``posttrain.engines.base.ScoringEngine`` (``score(sequences) -> list[TokenScores]``: per-token log-probs,
entropies, the DMAP mass above and tied mass of the observed token, full distributions where the
engine has them) and, except the copy-cache LM, a ``GenerationEngine``
(``generate(prompt_ids, SamplingParams) -> Rollouts``):

=================================  ==============================================  ========================
``spec``                           engine                                          scores
=================================  ==============================================  ========================
unset (``tiny``, ``corpus-lm``)    ``HFRolloutEngine`` on the embedded corpus LM   exact
a folder, hub id or alias          ``HFRolloutEngine`` (``smollm2-135m`` resolves  exact
(``smollm2-135m``)                 through ``models.pretrained``)
``vllm:PATH``                      ``VLLMRolloutEngine`` (``prompt_logprobs``)     top-k (``top_k``)
``http://HOST:PORT[/v1]#MODEL``    ``OpenAIHTTPEngine`` (any OpenAI-compatible     top-k (``top_k`` <= 20)
                                   server taking token ids: vLLM, ours)
``cachelm``                        ``cachelm.CacheLMScorer`` (scoring only)        exact
=================================  ==============================================  ========================

Conventions: engines take token ids. Text is tokenised without special tokens (``tokenize``); a text to be
scored whole gets the BOS token prepended when the tokenizer has one (``encode_text``), so its first
token is scored too. A scored sequence ``x_0..x_{T-1}`` gets values for positions ``1..T-1``
(``posttrain.engines.base``).
"""

from __future__ import annotations

from typing import Any

from posttrain.models.loading import load_tokenizer
from posttrain.models.pretrained import resolve_model_name
from posttrain.engines.base import ScoringEngine

EMBEDDED_SPECS = (None, "", "tiny", "corpus-lm")
"""Specs that name the embedded tiny corpus LM."""


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


def _http_tokenizer(spec: str, tokenizer: str | None) -> Any:
    """The tokenizer an HTTP backend sends ids of: ``--tokenizer``, else the model named after '#'."""
    name = tokenizer or spec.partition("#")[2]
    if not name:
        raise ValueError(f"{spec}: an HTTP backend needs the served model's tokenizer: pass --tokenizer "
                         "(a folder, hub id or alias) or name the model after '#' (http://HOST:PORT/v1#MODEL)")
    try:
        return load_tokenizer(resolve_model_name(name))
    except (OSError, ValueError) as err:
        raise ValueError(f"{spec}: cannot load the tokenizer {name!r} ({err}); pass --tokenizer") from err


def _http_engine(spec: str, top_k: int, tokenizer: str | None, api_key: str | None) -> ScoringEngine:
    from posttrain.engines.http import OpenAIHTTPEngine

    url, _, model = spec.partition("#")
    return OpenAIHTTPEngine(url, _http_tokenizer(spec, tokenizer), model=model or "default", api_key=api_key,
                            top_k=min(top_k, 20))


def load_backend_tokenizer(spec: str | None, *, tokenizer: str | None = None, cache_dir: str | None = None) -> Any:
    """The tokenizer of the engine ``load_backend(spec, tokenizer=..., cache_dir=...)`` returns, without loading
    any weights: what a driver needs to check its input before its Ray actors load the engine."""
    from posttrain.models.tiny import build_tiny, build_tokenizer

    if spec in EMBEDDED_SPECS:
        return load_tokenizer(str(build_tiny("corpus-lm", cache_dir=cache_dir)))
    if spec == "cachelm":
        return build_tokenizer()
    if spec.startswith("vllm:"):
        return load_tokenizer(spec[len("vllm:"):])
    if spec.startswith(("http://", "https://")):
        return _http_tokenizer(spec, tokenizer)
    return load_tokenizer(resolve_model_name(spec, cache_dir=cache_dir))


def load_backend(spec: str | None, *, device: str = "cpu", batch_size: int = 16, top_k: int = 20,
                 tokenizer: str | None = None, api_key: str | None = None,
                 cache_dir: str | None = None) -> ScoringEngine:
    """The engine named by ``spec`` (the module docstring's table). ``device`` and ``batch_size`` are the
    HF engine's, ``top_k`` the log-probs per position of the top-k scorers, ``tokenizer`` and ``api_key``
    the HTTP engine's; ``cache_dir`` holds the embedded models."""
    from posttrain.engines.hf import HFRolloutEngine

    if spec in EMBEDDED_SPECS:
        from posttrain.models.tiny import build_tiny

        path = build_tiny("corpus-lm", cache_dir=cache_dir)
        return HFRolloutEngine.from_pretrained(str(path), device=device, max_batch_size=batch_size)
    if spec == "cachelm":
        import random

        from data_pipelines.common.cachelm import CacheLMScorer
        from data_pipelines.common.corpus import training_text
        from posttrain.models.tiny import build_tokenizer

        rng = random.Random(1234)
        return CacheLMScorer(build_tokenizer(), [training_text(rng) for _ in range(2000)])
    if spec.startswith("vllm:"):
        from posttrain.engines.vllm import VLLMRolloutEngine

        # vLLM refuses more log-probs per position than its max_logprobs (20 unless raised here)
        engine = VLLMRolloutEngine.from_pretrained(spec[len("vllm:"):], max_logprobs=max(top_k, 20))
        engine.score_top_k = top_k
        return engine
    if spec.startswith(("http://", "https://")):
        return _http_engine(spec, top_k, tokenizer, api_key)
    return HFRolloutEngine.from_pretrained(resolve_model_name(spec, cache_dir=cache_dir), device=device,
                                           max_batch_size=batch_size)
