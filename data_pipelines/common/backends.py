"""LLM backends for the data pipelines: one interface for generation and for scoring.

``LLMBackend.generate(prompts, SamplingParams) -> list[Generation]`` and
``LLMBackend.score(sequences, ...) -> list[TokenScores]`` (per-token log-probs, entropies, the DMAP
"mass above" and, where the backend has them, full next-token distributions).

==============  =================================================  =====================================
backend         generation                                         scoring
==============  =================================================  =====================================
``HFBackend``   ``posttrain.rollout.hf.HFRolloutEngine`` (the       exact: full softmax in float32,
                project's one HF generation core), CPU or GPU      padded batches sorted by length
``VLLMBackend`` ``vllm.LLM.generate`` (lazy import, GPU)           **approximate**: ``prompt_logprobs=k``
                                                                   gives only the top-k (+ the observed
                                                                   token); entropy from top-k plus a
                                                                   tail lump, mass-above exact only when
                                                                   the observed token is in the top-k
``OpenAIHTTPBackend`` ``POST /v1/completions`` (any OpenAI-        **approximate**, same as vLLM: uses
                compatible server: ours, ``vllm serve``, ...),     ``echo=true, logprobs=k`` (top-k only,
                concurrent requests, retries with backoff          k <= 5 on OpenAI, <= 20 on vLLM)
==============  =================================================  =====================================

Conventions: a scored sequence of ids ``x_0..x_{T-1}`` yields values for positions ``1..T-1``
(``logprobs[t-1] = log p(x_t | x_<t)``), exactly like ``posttrain.models.likelihood.causal_token_logprobs``.
Text inputs are tokenised with the backend's tokenizer and get the BOS token prepended when the tokenizer
has one, so every character/token of the text is scored.

Top-k approximation (vLLM / HTTP), with ``p_1..p_k`` the returned probabilities and ``r = 1 - sum p_j``:
``H ~= -sum_j p_j log p_j - r log r`` (the tail treated as one atom, a lower bound of the true tail
term), and ``mass_above ~= sum_{j: p_j > p_obs} p_j``, exact iff the observed token is in the top-k or
is the k+1-th; otherwise a lower bound. ``TokenScores.exact`` says which you got.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch

from posttrain.models.likelihood import entropy_from_logits, logprobs_from_logits
from posttrain.models.loading import load_tokenizer
from posttrain.rollout.base import SamplingParams
from posttrain.rollout.scores import TokenScores, mass_above_from_logits, topk_entropy, topk_mass_above

__all__ = [
    "Generation",
    "HFBackend",
    "LLMBackend",
    "OpenAIHTTPBackend",
    "TokenScores",
    "VLLMBackend",
    "load_backend",
    "mass_above_from_logits",
    "topk_entropy",
]


@dataclass
class Generation:
    text: str
    token_ids: list[int] | None
    logprobs: list[float] | None  # of the sampled tokens under the sampling distribution
    finish_reason: str


@runtime_checkable
class LLMBackend(Protocol):
    name: str
    exact_scores: bool

    def tokenize(self, text: str) -> list[int]: ...

    def generate(self, prompts: Sequence[str] | Sequence[list[int]], params: SamplingParams) -> list[Generation]: ...

    def score(self, sequences: Sequence[str] | Sequence[list[int]], *, entropy: bool = True,
              mass_above: bool = False, full: bool = False) -> list[TokenScores]: ...


# ----------------------------------------------------------------------------------------- pure helpers
class HFBackend:
    """Transformers backend: generation through ``HFRolloutEngine``, exact batched scoring.

    Scoring pads batches on the left (positions from the attention mask, as in ``likelihood.py``), sorts
    sequences by length so that a batch holds similar lengths, and bounds a batch by
    ``max_batch_tokens`` (padded) as well as ``batch_size``.
    """

    exact_scores = True

    def __init__(self, model, tokenizer, *, device: str | torch.device = "cpu", batch_size: int = 16,
                 max_batch_tokens: int = 16384, name: str = "hf") -> None:
        self.device = torch.device(device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.name = name
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.pad_id = int(pad or 0)
        self._engine = None

    @classmethod
    def from_pretrained(cls, path: str, *, device: str = "cpu", dtype: str | None = None, **kwargs) -> HFBackend:
        from transformers import AutoModelForCausalLM

        torch_dtype = getattr(torch, dtype) if dtype else torch.float32
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
        tokenizer = load_tokenizer(path)
        return cls(model, tokenizer, device=device, name=f"hf:{path}", **kwargs)

    def tokenize(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _encode(self, item: str | list[int]) -> list[int]:
        if isinstance(item, str):
            ids = self.tokenize(item)
            bos = self.tokenizer.bos_token_id
            return ([bos] if bos is not None else []) + ids
        return list(item)

    def generate(self, prompts: Sequence[str] | Sequence[list[int]], params: SamplingParams) -> list[Generation]:
        from posttrain.rollout.hf import HFRolloutEngine

        if self._engine is None:
            self._engine = HFRolloutEngine(self.model, self.tokenizer, max_batch_size=self.batch_size,
                                           device=self.device)
        out = self._engine.generate([self._encode(p) for p in prompts], params)
        return [Generation(text, ids, lps, reason) for text, ids, lps, reason
                in zip(out.texts, out.completion_ids, out.logprobs, out.finish_reasons)]

    def _batches(self, lengths: list[int]) -> list[list[int]]:
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        batches: list[list[int]] = []
        current: list[int] = []
        for i in order:
            width = max([lengths[j] for j in current] + [lengths[i]])
            if current and (len(current) >= self.batch_size or width * (len(current) + 1) > self.max_batch_tokens):
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
        return batches

    @torch.inference_mode()
    def forward_logits(self, seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Left-padded forward of ``seqs``: (logits [B, W, V] float32, attention mask [B, W])."""
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for row, s in enumerate(seqs):
            ids[row, width - len(s):] = torch.tensor(s, dtype=torch.long)
            mask[row, width - len(s):] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
        logits = self.model(input_ids=ids, attention_mask=mask, position_ids=position_ids).logits
        return logits.float(), mask

    @torch.inference_mode()
    def score(self, sequences: Sequence[str] | Sequence[list[int]], *, entropy: bool = True,
              mass_above: bool = False, full: bool = False) -> list[TokenScores]:
        seqs = [self._encode(s) for s in sequences]
        for i, s in enumerate(seqs):
            if len(s) < 2:
                raise ValueError(f"sequence {i} has {len(s)} token(s); scoring needs at least 2")
        results: list[TokenScores | None] = [None] * len(seqs)
        for batch in self._batches([len(s) for s in seqs]):
            logits, _ = self.forward_logits([seqs[i] for i in batch])
            width = logits.size(1)
            for row, i in enumerate(batch):
                n = len(seqs[i])
                lg = logits[row, width - n:-1]  # predicts tokens 1..n-1
                targets = torch.tensor(seqs[i][1:], device=lg.device)
                results[i] = TokenScores(
                    token_ids=seqs[i][1:],
                    logprobs=logprobs_from_logits(lg, targets).tolist(),
                    entropies=entropy_from_logits(lg).tolist() if entropy else None,
                    mass_above=mass_above_from_logits(lg, targets).tolist() if mass_above else None,
                    distributions=torch.log_softmax(lg, -1).cpu() if full else None,
                )
        return results  # type: ignore[return-value]


# ----------------------------------------------------------------------------------------- vLLM
class VLLMBackend:
    """In-process ``vllm.LLM`` (GPU). Scoring is top-k only (see the module docstring).

    Written to vLLM's documented API: ``LLM(model, max_logprobs=...)``, ``LLM.generate(prompts,
    SamplingParams(..., logprobs=1, prompt_logprobs=k))``, ``RequestOutput.prompt_logprobs`` (a list
    with ``None`` first, then ``{token_id: Logprob(logprob, rank, decoded_token)}`` per position).
    """

    exact_scores = False

    def __init__(self, model: str, *, top_k: int = 20, name: str | None = None, **llm_kwargs: Any) -> None:
        from vllm import LLM  # lazy: GPU-only dependency

        self.top_k = top_k
        self.llm = LLM(model=model, max_logprobs=max(top_k, 1), **llm_kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self.name = name or f"vllm:{model}"

    def tokenize(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _prompt(self, item: str | list[int], add_bos: bool) -> dict:
        if isinstance(item, str):
            bos = self.tokenizer.bos_token_id
            ids = ([bos] if add_bos and bos is not None else []) + self.tokenize(item)
            return {"prompt_token_ids": ids}
        return {"prompt_token_ids": list(item)}

    def generate(self, prompts, params: SamplingParams) -> list[Generation]:
        from vllm import SamplingParams as VSP

        sp = VSP(n=1, temperature=params.temperature, top_p=params.top_p, top_k=params.top_k or -1,
                 max_tokens=params.max_new_tokens, seed=params.seed, logprobs=1,
                 stop_token_ids=list(params.stop_token_ids) or None)
        outs = self.llm.generate([self._prompt(p, add_bos=False) for p in prompts], sp)
        gens = []
        for out in outs:
            c = out.outputs[0]
            lps = [step[tok].logprob for step, tok in zip(c.logprobs or [], c.token_ids)] if c.logprobs else None
            gens.append(Generation(c.text, list(c.token_ids), lps, c.finish_reason or "length"))
        return gens

    def score(self, sequences, *, entropy: bool = True, mass_above: bool = False,
              full: bool = False) -> list[TokenScores]:
        if full:
            raise NotImplementedError("vLLM returns top-k prompt log-probs only; use HFBackend for full=True")
        from vllm import SamplingParams as VSP

        prompts = [self._prompt(s, add_bos=True) for s in sequences]
        outs = self.llm.generate(prompts, VSP(max_tokens=1, prompt_logprobs=self.top_k, temperature=0.0))
        results = []
        for prompt, out in zip(prompts, outs):
            ids = prompt["prompt_token_ids"]
            lps, ents, masses, exact = [], [], [], True
            for tok, step in zip(ids[1:], (out.prompt_logprobs or [])[1:]):
                step = step or {}
                observed = step[tok].logprob if tok in step else float("-inf")
                top = sorted((lp.logprob for t, lp in step.items() if t != tok or lp.rank <= self.top_k),
                             reverse=True)[: self.top_k]
                lps.append(observed)
                ents.append(topk_entropy(top))
                m, ok = topk_mass_above(top, observed)
                masses.append(m)
                exact = exact and ok
            results.append(TokenScores(ids[1:], lps, ents if entropy else None, masses if mass_above else None,
                                       exact=False))
        return results


# ----------------------------------------------------------------------------------------- HTTP
@dataclass
class OpenAIHTTPBackend:
    """Client of any OpenAI-compatible server's ``/v1/completions`` (ours, ``vllm serve``, OpenAI).

    Requests run ``concurrency`` at a time on threads; a failed request (connection error, timeout, 429
    or 5xx) is retried ``max_retries`` times with exponential backoff. Scoring sends token ids when it
    has them (``tokenizer`` given, or id lists passed) with ``echo=true, max_tokens=1, logprobs=k`` and
    reads ``choices[0].logprobs``: top-k only, so entropies and mass-above are approximations
    (``TokenScores.exact`` is False), as in the module docstring.
    """

    base_url: str
    model: str
    api_key: str | None = None
    top_k: int = 5
    concurrency: int = 8
    max_retries: int = 4
    backoff_s: float = 0.5
    timeout_s: float = 60.0
    tokenizer: Any = None  # optional HF tokenizer matching the server's model
    name: str = "openai-http"
    exact_scores: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        self._client = httpx.Client(base_url=self.base_url.rstrip("/"), headers=headers, timeout=self.timeout_s,
                                    limits=httpx.Limits(max_connections=self.concurrency))

    def close(self) -> None:
        self._client.close()

    def tokenize(self, text: str) -> list[int]:
        if self.tokenizer is None:
            raise ValueError("OpenAIHTTPBackend.tokenize needs tokenizer= (an HF tokenizer of the served model)")
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _post(self, body: dict) -> dict:
        import httpx

        url = "/v1/completions" if not self.base_url.rstrip("/").endswith("/v1") else "/completions"
        last: Exception | None = None
        for attempt in range(self.max_retries + 1):
            try:
                response = self._client.post(url, json=body)
                if response.status_code == 429 or response.status_code >= 500:
                    raise httpx.HTTPStatusError(f"server said {response.status_code}: {response.text[:200]}",
                                                request=response.request, response=response)
                response.raise_for_status()
                return response.json()
            except (httpx.TransportError, httpx.HTTPStatusError) as err:
                status = getattr(getattr(err, "response", None), "status_code", None)
                if status is not None and status < 500 and status != 429:
                    raise  # a client error will not go away by retrying
                last = err
                if attempt < self.max_retries:
                    time.sleep(self.backoff_s * 2**attempt)
        raise RuntimeError(f"{self.base_url}: request failed after {self.max_retries + 1} attempts: {last}")

    def _map(self, fn, items: list) -> list:
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(fn, items))

    def generate(self, prompts, params: SamplingParams) -> list[Generation]:
        def one(prompt):
            body = {"model": self.model, "prompt": prompt, "max_tokens": params.max_new_tokens,
                    "temperature": params.temperature, "top_p": params.top_p, "logprobs": 1}
            if params.top_k:
                body["top_k"] = params.top_k  # vLLM extension
            if params.seed is not None:
                body["seed"] = params.seed
            choice = self._post(body)["choices"][0]
            lp = choice.get("logprobs") or {}
            return Generation(choice.get("text", ""), None, lp.get("token_logprobs"),
                              choice.get("finish_reason") or "length")

        return self._map(one, list(prompts))

    def score(self, sequences, *, entropy: bool = True, mass_above: bool = False,
              full: bool = False) -> list[TokenScores]:
        if full:
            raise NotImplementedError("an OpenAI-compatible server returns top-k log-probs only")

        def one(seq):
            ids = None
            if isinstance(seq, str) and self.tokenizer is not None:
                bos = self.tokenizer.bos_token_id
                ids = ([bos] if bos is not None else []) + self.tokenize(seq)
            elif not isinstance(seq, str):
                ids = list(seq)
            body = {"model": self.model, "prompt": ids if ids is not None else seq, "max_tokens": 1,
                    "echo": True, "logprobs": self.top_k, "temperature": 0.0}
            lp = self._post(body)["choices"][0]["logprobs"]
            n_prompt = len(ids) if ids is not None else len(lp["tokens"]) - 1
            token_lps = lp["token_logprobs"][1:n_prompt]
            tops = (lp.get("top_logprobs") or [None] * n_prompt)[1:n_prompt]
            lps, ents, masses = [], [], []
            for observed, top in zip(token_lps, tops):
                values = sorted((top or {}).values(), reverse=True)
                observed = float("-inf") if observed is None else observed
                lps.append(observed)
                ents.append(topk_entropy(values))
                masses.append(topk_mass_above(values, observed)[0])
            return TokenScores(ids[1:] if ids is not None else None, lps, ents if entropy else None,
                               masses if mass_above else None, exact=False,
                               tokens=lp["tokens"][1:n_prompt])

        return self._map(one, list(sequences))


# ----------------------------------------------------------------------------------------- factory
def load_backend(spec: str | None, *, device: str = "cpu", batch_size: int = 16, top_k: int = 20,
                 tokenizer: str | None = None, api_key: str | None = None, cache_dir: str | None = None):
    """``None`` -> the embedded corpus LM (built/cached by ``posttrain.models.tiny``);
    ``cachelm`` -> the count-based copy-cache LM of ``cachelm`` (scoring only);
    ``vllm:PATH`` -> ``VLLMBackend``; ``http://HOST:PORT[/v1]#MODEL`` -> ``OpenAIHTTPBackend``;
    anything else -> ``HFBackend.from_pretrained``."""
    if spec is None or spec in ("", "tiny", "corpus-lm"):
        from posttrain.models.tiny import build_tiny

        path = build_tiny("corpus-lm", cache_dir=cache_dir)
        backend = HFBackend.from_pretrained(str(path), device=device, batch_size=batch_size)
        backend.name = "tiny:corpus-lm"
        return backend
    if spec == "cachelm":
        import random

        from data_pipelines.common.cachelm import CacheLMBackend
        from data_pipelines.common.corpus import training_text
        from posttrain.models.tiny import build_tokenizer

        rng = random.Random(1234)
        return CacheLMBackend(build_tokenizer(), [training_text(rng) for _ in range(2000)])
    if spec.startswith("vllm:"):
        return VLLMBackend(spec[5:], top_k=top_k)
    if spec.startswith(("http://", "https://")):
        url, _, model = spec.partition("#")
        tok = None
        if tokenizer:
            tok = load_tokenizer(tokenizer)
        return OpenAIHTTPBackend(url, model or "default", api_key=api_key, top_k=min(top_k, 20), tokenizer=tok)
    return HFBackend.from_pretrained(spec, device=device, batch_size=batch_size)
