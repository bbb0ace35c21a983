"""A generation and scoring engine that is a client of an OpenAI-compatible ``/v1/completions`` server:
our own ``posttrain serve``, any ``vllm serve``, or another server that takes token-id prompts.

Generation (``generate(prompt_ids, SamplingParams) -> Rollouts``) sends each prompt as token ids with
``return_token_ids=true`` and ``logprobs=1``, so completions come back as token ids with the log-prob of
every sampled token; requests run ``concurrency`` at a time on threads. Which log-probs those are is
the server's choice: ``posttrain serve`` reports the processed sampling distribution (like the HF
engine); ``vllm serve`` reports the raw model distribution unless started with
``--logprobs-mode processed_logprobs``.

Seeds: OpenAI-style servers seed each request on its own, so the same seed on G copies of one prompt
would give G identical samples. With ``SamplingParams.seed = s`` prompt ``i`` is sent with the seed
``base.sample_seeds(s, prompts)[i]`` (distinct per sample, repeatable per call: the seed the vLLM engines give
that sample); with no seed none is sent.

Structured output: ``SamplingParams.json_schema`` goes out as OpenAI's ``response_format`` (``{"type":
"json_schema", "json_schema": {"name": ..., "schema": ...}}``), which ``vllm serve`` (its structured
outputs) and ``posttrain serve`` (the engine behind it) both honour; a server that rejects the schema
answers 400, raised like any other refused request.

Scoring (``score``) sends ``echo=true, max_tokens=1, logprobs=k`` and reads the prompt's log-probs:
top-k only (k <= 20 on a default vLLM server), so entropies and mass-above are the approximations of
``posttrain.engines.topk`` and ``TokenScores.exact`` is False.

Failures: a connection error, a timeout (``timeout_s`` per request), 429 or 5xx is retried
``max_retries`` times with exponential backoff (``backoff_s * 2**attempt``, jittered; ``Retry-After`` honoured:
``posttrain.common.http.RetryingPoster``); other 4xx answers are not retried. Every error names the URL and,
where there is one, the server's message. A completion that ends with a finish reason other than ``"stop"`` or
``"length"`` (vLLM's ``"abort"``, answered 200 with a partial output, ``"error"``, or none given) is no rollout: the
request is sent once more, then ``RequestFailed`` names the URL, the request and the reason.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Self, TypeVar

import httpx

from posttrain.common.http import RequestFailed, RequestStats, RetryingPoster
from posttrain.engines.base import Rollouts, SamplingParams, check_prompts, check_score_inputs, sample_seeds
from posttrain.engines.scores import TokenScores
from posttrain.engines.topk import scores_from_topk

T = TypeVar("T")
R = TypeVar("R")
Completion = tuple[list[int], str, list[float], str]
"""One sample from a server: its token ids, text, per-token log-probs and finish reason."""

UNFINISHED_ATTEMPTS = 2
"""How often a generation request is sent while the server ends it with a finish reason other than
``Rollouts.FINISH_REASONS`` (vLLM answers an aborted request 200 with a partial output)."""

log = logging.getLogger("posttrain")


def completions_url(base_url: str) -> str:
    """``/v1/completions`` under ``base_url`` (which may or may not end in ``/v1``)."""
    base = base_url.rstrip("/")
    return f"{base}/completions" if base.endswith("/v1") else f"{base}/v1/completions"


def response_format(json_schema: str) -> dict[str, Any]:
    """OpenAI's ``response_format`` asking for a JSON document valid under ``json_schema`` (text)."""
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": json.loads(json_schema)}}


class OpenAIHTTPEngine:
    """Generates and scores through ``POST /v1/completions`` of the server at ``base_url``.

    ``tokenizer`` must be the served model's (prompts and completions are token ids); ``model`` is the
    name the server serves (``"default"`` is accepted by ``posttrain serve``). ``weight_version`` is
    reported on every ``Rollouts``; whoever updates the server's weights (a remote-worker trainer) keeps it
    current. ``headers`` go with every request (e.g. a rollout worker's shared secret).
    """

    def __init__(self, base_url: str, tokenizer: Any, *, model: str = "default", api_key: str | None = None,
                 top_k: int = 5, concurrency: int = 8, max_retries: int = 4, backoff_s: float = 0.5,
                 timeout_s: float = 60.0, weight_version: int = 0, headers: dict[str, str] | None = None) -> None:
        if tokenizer is None:
            raise ValueError(f"OpenAIHTTPEngine({base_url!r}) needs the served model's tokenizer")
        for name, value, low in (("top_k", top_k, 1), ("concurrency", concurrency, 1), ("max_retries", max_retries, 0)):
            if value < low:
                raise ValueError(f"OpenAIHTTPEngine: {name} must be >= {low}, got {value}")
        if timeout_s <= 0 or backoff_s < 0:
            raise ValueError(f"OpenAIHTTPEngine: timeout_s must be > 0 and backoff_s >= 0, got {timeout_s}, {backoff_s}")
        self.url = completions_url(base_url)
        self.tokenizer = tokenizer
        self.model = model
        self.top_k = top_k
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.weight_version = weight_version
        parsed = httpx.URL(self.url)
        self._path = parsed.raw_path.decode()
        self._http = RetryingPoster(f"{parsed.scheme}://{parsed.netloc.decode()}", api_key, timeout_s, max_retries,
                                    backoff_s, backoff_s * 2 ** max_retries, concurrency, None, RequestStats(),
                                    headers)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests ----------------------------------------------------------------------------------
    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        response = self._http.send(self._path, body)
        try:
            return response.json()
        except ValueError as err:
            raise RuntimeError(f"{self.url}: the answer is not JSON: {response.text[:200]!r}") from err

    def _map(self, fn: Callable[[T], R], items: list[T]) -> list[R]:
        if len(items) <= 1:
            return [fn(item) for item in items]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(items))) as pool:
            return list(pool.map(fn, items))

    def _choice(self, answer: dict[str, Any]) -> dict[str, Any]:
        try:
            return answer["choices"][0]
        except (KeyError, IndexError, TypeError):
            raise RuntimeError(f"{self.url}: the answer has no choices: {str(answer)[:300]}") from None

    # -- generation --------------------------------------------------------------------------------
    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts:
        """One completion per prompt, in input order (one request per prompt, ``concurrency`` at a time); prompt
        ``i`` is seeded ``base.sample_seeds(params.seed, prompts)[i]``, as in the vLLM engines."""
        check_prompts(prompt_ids)
        prompts = [list(p) for p in prompt_ids]
        seeds = None if params.seed is None else sample_seeds(params.seed, prompts)

        def one(index: int) -> Completion:
            seed = None if seeds is None else seeds[index]
            return self.complete(prompts[index], params, n=1, seed=seed, what=f"prompt {index}")[0]

        results = self._map(one, list(range(len(prompts))))
        return Rollouts(prompt_ids=prompts, completion_ids=[r[0] for r in results], texts=[r[1] for r in results],
                        logprobs=[r[2] for r in results], finish_reasons=[r[3] for r in results],
                        weight_version=self.weight_version)

    def complete(self, prompt: list[int], params: SamplingParams, n: int, seed: int | None,
                 what: str = "prompt") -> list[Completion]:
        """``n`` completions of one token-id prompt in one request (``params.seed`` unused: the request is
        seeded ``seed``; vLLM seeds its sample ``j`` with ``seed + j``), in the server's sample order:
        ``(token ids, text, log-probs, finish reason)`` each."""
        body: dict[str, Any] = {
            "model": self.model, "prompt": list(prompt), "max_tokens": params.max_new_tokens,
            "temperature": params.temperature, "top_p": params.top_p, "n": n, "logprobs": 1, "return_token_ids": True,
        }
        if params.top_k:
            body["top_k"] = params.top_k
        if seed is not None:
            body["seed"] = seed
        if params.stop_token_ids:
            body["stop_token_ids"] = list(params.stop_token_ids)
        if params.json_schema is not None:
            body["response_format"] = response_format(params.json_schema)
        for attempt in range(1, UNFINISHED_ATTEMPTS + 1):
            answer = self._post(body)
            choices = answer.get("choices") if isinstance(answer, dict) else None
            if not isinstance(choices, list) or len(choices) != n:
                raise RuntimeError(f"{self.url}: {what}: expected {n} choices, got {str(answer)[:300]}")
            completions = [self._completion(choice, what) for choice in sorted(choices, key=lambda c: c.get("index", 0))]
            unfinished = sorted({c[3] for c in completions} - set(Rollouts.FINISH_REASONS))
            if not unfinished:
                return completions
            log.warning("%s: %s: finish_reason %s on attempt %d of %d", self.url, what, ", ".join(unfinished), attempt,
                        UNFINISHED_ATTEMPTS)
        raise RequestFailed(f"{self.url}: {what}: the server ended the request with finish_reason "
                            f"{', '.join(map(repr, unfinished))} in all {UNFINISHED_ATTEMPTS} attempts: a partial "
                            "completion (aborted or failed there), not a rollout")

    def _completion(self, choice: dict[str, Any], what: str) -> Completion:
        ids = choice.get("token_ids")
        if ids is None:
            raise RuntimeError(f"{self.url}: the answer has no token_ids; the server must honour "
                               "return_token_ids (posttrain serve, vLLM >= 0.10)")
        logprobs = (choice.get("logprobs") or {}).get("token_logprobs")
        if logprobs is None or len(logprobs) != len(ids):
            raise RuntimeError(f"{self.url}: {what}: expected {len(ids)} token log-probs, got "
                               f"{None if logprobs is None else len(logprobs)}")
        reason = choice.get("finish_reason") or "(none)"
        return list(ids), choice.get("text", ""), [float(lp) for lp in logprobs], reason

    # -- scoring -----------------------------------------------------------------------------------
    def score(self, sequences: list[list[int]], *, entropy: bool = True, mass_above: bool = False,
              full: bool = False) -> list[TokenScores]:
        """Top-k scores of every sequence's positions 1..T-1 (see the module docstring)."""
        if full:
            raise ValueError(f"{self.url}: an OpenAI-compatible server returns top-k log-probs only; "
                             "full distributions need the HF engine")
        seqs = check_score_inputs(sequences)

        def one(ids: list[int]) -> TokenScores:
            body = {"model": self.model, "prompt": ids, "max_tokens": 1, "echo": True, "logprobs": self.top_k,
                    "temperature": 0.0, "return_tokens_as_token_ids": True}
            lp = self._choice(self._post(body)).get("logprobs") or {}
            tokens, observed, tops = lp.get("tokens"), lp.get("token_logprobs"), lp.get("top_logprobs")
            if tokens is None or observed is None or tops is None or len(tokens) < len(ids):
                raise RuntimeError(f"{self.url}: the echoed log-probs do not cover the {len(ids)} prompt tokens "
                                   "(the server must support echo=true with logprobs)")
            top_values = []
            for t in range(1, len(ids)):
                top = tops[t] or {}
                # servers add the observed token to its position's top-k when it ranks lower; keep only the top-k
                keep = [v for key, v in top.items() if not (len(top) > self.top_k and key == tokens[t])]
                top_values.append(sorted(keep, reverse=True)[: self.top_k])
            return scores_from_topk(ids[1:], observed[1:len(ids)], top_values, entropy=entropy,
                                    mass_above=mass_above)

        return self._map(one, seqs)
