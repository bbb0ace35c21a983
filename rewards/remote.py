"""A TRL-signature reward function that asks a reward server (``posttrain serve``) over HTTP.

Two ways to use it:

1. In code: ``fn = remote_reward("http://127.0.0.1:8000", mode="binary")`` and pass ``fn`` wherever a
   reward function goes (our trainer, TRL's ``GRPOTrainer(reward_funcs=[fn])``).
2. From a training config, which names rewards as ``module:function``:
   ``--reward rewards.remote:reward`` (or ``reward: rewards.remote:reward`` in YAML). ``reward`` reads its
   settings from environment variables when first called (so every rank builds the same client):
   ``POSTTRAIN_REWARD_URL`` (required, e.g. ``http://127.0.0.1:8000``), ``POSTTRAIN_REWARD_MODE``
   (binary | pointwise | pairwise; default binary), ``POSTTRAIN_REWARD_API_KEY``,
   ``POSTTRAIN_REWARD_RUBRIC`` (a JSON object), ``POSTTRAIN_REWARD_TEMPLATE`` (an mR3 format, e.g.
   ``safety-response``), ``POSTTRAIN_REWARD_GOOD_VERDICT`` (binary: the verdict that earns 1, required
   with a rubric of your own), ``POSTTRAIN_REWARD_TIMEOUT`` (s, default 60),
   ``POSTTRAIN_REWARD_RETRIES`` (default 3), ``POSTTRAIN_REWARD_CONCURRENCY`` (default 4),
   ``POSTTRAIN_REWARD_BATCH`` (items per HTTP request, default 16), ``POSTTRAIN_REWARD_REFERENCE``
   (1 = show the ``answer`` column to the judge as a reference answer; default 0).

What each mode sends: binary / pointwise judge the completion alone (reward in [0, 1]); pairwise
judges the completion against the ``reference_column`` (default ``answer``) as Assistant B, with the
A/B swap, and returns ``p_first`` (the probability the completion is better) in [0, 1].

Failure policy: transient failures (connection errors, timeouts, 429, 5xx) are retried with
exponential backoff and jitter, honouring ``Retry-After``; a sample whose request still fails, or
that the server refuses (4xx), gets ``None``, which the trainer masks out of the loss rather than
crashing. An unreadable verdict (``parse_ok = false``) gets the server's neutral reward by default,
or ``None`` with ``on_parse_fail="none"``. Either way it never passes unseen: a call (one batch of the trainer's)
where more than ``PARSE_FAIL_WARN_RATE`` of the answered samples got no readable verdict logs a warning with the
rate and the counts, and the client reports ``reward/parse_fail_rate`` (``pop_metrics``; the
``posttrain.tasks.base.ReportsRewardMetrics`` protocol), which our trainer adds to the step's metrics. (A judge
whose every verdict is unreadable gives every completion the same neutral reward, so every advantage is 0.)
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from posttrain.common.http import RequestStats, RetryingPoster
from rewards.mr3.official import get_format

logger = logging.getLogger(__name__)

PARSE_FAIL_WARN_RATE = 0.5
"""A call warns when more than this share of its answered samples got no readable verdict."""
PARSE_FAIL_METRIC = "reward/parse_fail_rate"

@dataclass
class RemoteStats(RequestStats):
    """The reward client's counters: the HTTP ones plus what became of the samples."""

    failed_samples: int = 0
    unparsed_samples: int = 0
    scored_samples: int = 0


def _text(value: Any) -> str:
    """A prompt / completion as text: plain strings, or TRL's conversational lists of messages."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return str(value.get("content", ""))
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(m, dict) for m in value):
            users = [m for m in value if m.get("role") == "user"]
            chosen = users[-1] if users else value[-1]
            return str(chosen.get("content", ""))
        return "".join(_text(v) for v in value)
    return "" if value is None else str(value)


class RemoteReward:
    """Callable ``(prompts, completions, **columns) -> list[float | None]``; see the module doc."""

    def __init__(self, url: str, mode: str = "binary", rubric: dict[str, str] | None = None, *,
                 api_key: str | None = None, timeout: float = 60.0, max_retries: int = 3, backoff: float = 0.5,
                 max_backoff: float = 8.0, max_concurrency: int = 4, batch_size: int = 16,
                 reference_column: str = "answer", use_reference: bool = False, rubric_column: str = "rubric",
                 language_column: str = "language", task_description: str | None = None, n_samples: int = 1,
                 swap_positions: bool = True, max_tokens: int | None = None, temperature: float | None = None,
                 on_parse_fail: str = "neutral", seed: int | None = None, template: str | None = None,
                 good_verdict: str | None = None) -> None:
        if mode not in ("binary", "pointwise", "pairwise"):
            raise ValueError(f"mode must be binary, pointwise or pairwise, got {mode!r}")
        if on_parse_fail not in ("neutral", "none"):
            raise ValueError(f"on_parse_fail must be 'neutral' or 'none', got {on_parse_fail!r}")
        if max_concurrency < 1 or batch_size < 1 or max_retries < 0:
            raise ValueError("max_concurrency and batch_size must be >= 1 and max_retries >= 0")
        judged = get_format(template, mode).n_responses  # raises on an unknown template or a mode mismatch
        if judged != (2 if mode == "pairwise" else 1):
            raise ValueError(f"template {template!r} judges {judged} response(s); a reward judges the completion")
        self.url = url.rstrip("/")
        self.mode, self.rubric = mode, rubric
        self.timeout, self.max_retries, self.backoff, self.max_backoff = timeout, max_retries, backoff, max_backoff
        self.max_concurrency, self.batch_size = max_concurrency, batch_size
        self.reference_column, self.use_reference = reference_column, use_reference
        self.rubric_column, self.language_column = rubric_column, language_column
        self.task_description, self.n_samples, self.swap_positions = task_description, n_samples, swap_positions
        self.max_tokens, self.temperature, self.on_parse_fail, self.seed = max_tokens, temperature, on_parse_fail, seed
        self.template, self.good_verdict = template, good_verdict
        self._pool = concurrent.futures.ThreadPoolExecutor(max_concurrency, thread_name_prefix="remote-reward")
        self._lock = threading.Lock()
        self.stats = RemoteStats()
        self._http = RetryingPoster(self.url, api_key, timeout, max_retries, backoff, max_backoff, max_concurrency,
                                    seed, self.stats)
        self._since_pop = [0, 0]  # answered samples, unreadable verdicts among them, since the last pop_metrics
        self.__name__ = f"remote_{mode}"  # TRL logs rewards by function name

    # -- the reward function -----------------------------------------------------------------------
    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float | None]:
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions")
        items = [self._item(i, prompts[i], completions[i], columns) for i in range(len(prompts))]
        rewards: list[float | None] = [None] * len(items)
        todo = [i for i, it in enumerate(items) if it is not None]
        chunks = [todo[k:k + self.batch_size] for k in range(0, len(todo), self.batch_size)]
        futures = {self._pool.submit(self._score_chunk, [items[i] for i in chunk]): chunk for chunk in chunks}
        answered = unreadable = 0
        for future in concurrent.futures.as_completed(futures):
            chunk = futures[future]
            results, chunk_answered, chunk_unreadable = future.result()  # never raises: failures come back as None
            answered, unreadable = answered + chunk_answered, unreadable + chunk_unreadable
            for index, value in zip(chunk, results):
                rewards[index] = value
        with self._lock:
            self.stats.failed_samples += sum(1 for r in rewards if r is None)
            self._since_pop[0] += answered
            self._since_pop[1] += unreadable
        if answered and unreadable / answered > PARSE_FAIL_WARN_RATE:
            logger.warning("reward server %s: %d of %d verdicts unreadable (%.0f%%) in this batch; they get %s, so "
                           "the judge is not judging (check its model, template and max_tokens against the prompts)",
                           self.url, unreadable, answered, 100 * unreadable / answered,
                           "the neutral reward" if self.on_parse_fail == "neutral" else "None")
        return rewards

    def pop_metrics(self) -> dict[str, float]:
        """``reward/parse_fail_rate``: the share of answered samples since the last call without a readable
        verdict (``posttrain.tasks.base.ReportsRewardMetrics``); empty when no sample was answered."""
        with self._lock:
            (answered, unreadable), self._since_pop = self._since_pop, [0, 0]
        return {PARSE_FAIL_METRIC: unreadable / answered} if answered else {}

    def _item(self, i: int, prompt: Any, completion: Any, columns: dict[str, Any]) -> dict | None:
        def column(name: str) -> Any:
            values = columns.get(name)
            return values[i] if isinstance(values, (list, tuple)) and i < len(values) else None

        reference = column(self.reference_column)
        body: dict[str, Any] = {"mode": self.mode, "instruction": _text(prompt), "n_samples": self.n_samples,
                                "swap_positions": self.swap_positions}
        if self.mode == "pairwise":
            if reference is None:
                logger.warning("pairwise remote reward: sample %d has no %r column; reward None", i,
                               self.reference_column)
                return None
            body["responses"] = [_text(completion), _text(reference)]
        else:
            body["responses"] = [_text(completion)]
            if self.use_reference and reference is not None:
                body["reference"] = _text(reference)
        rubric = column(self.rubric_column)
        if isinstance(rubric, str):
            try:
                rubric = json.loads(rubric)
            except json.JSONDecodeError:
                rubric = None
        rubric = rubric if isinstance(rubric, dict) else self.rubric
        if rubric:
            body["rubric"] = {str(k): str(v) for k, v in rubric.items()}
        language = column(self.language_column)
        if isinstance(language, str) and language:
            body["language"] = language
        for key, value in (("task_description", self.task_description), ("max_tokens", self.max_tokens),
                           ("temperature", self.temperature), ("seed", self.seed), ("template", self.template),
                           ("good_verdict", self.good_verdict)):
            if value is not None:
                body[key] = value
        return body

    def _score_chunk(self, items: list[dict]) -> tuple[list[float | None], int, int]:
        """The rewards of ``items`` (None where the request failed), how many the server answered, and how
        many of those had no readable verdict."""
        response = self._http.post("/v1/rubric_score/batch", {"requests": items})
        if response is None:
            return [None] * len(items), 0, 0
        try:
            results = response.json()["results"]
            if len(results) != len(items):
                raise ValueError(f"{len(results)} results for {len(items)} items")
        except (ValueError, KeyError, TypeError) as err:
            logger.warning("reward server sent an unreadable answer (%s); %d rewards None", err, len(items))
            return [None] * len(items), 0, 0
        out: list[float | None] = []
        unreadable = 0
        for result in results:
            if not result.get("parse_ok", False):
                unreadable += 1
                with self._lock:
                    self.stats.unparsed_samples += 1
                if self.on_parse_fail == "none":
                    out.append(None)
                    continue
            with self._lock:
                self.stats.scored_samples += 1
            value = result.get("p_first") if self.mode == "pairwise" else result.get("reward")
            out.append(None if value is None else float(value))
        return out, len(results), unreadable

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self._http.close()


def remote_reward(url: str, mode: str = "binary", rubric: dict[str, str] | None = None,
                  **kwargs: Any) -> RemoteReward:
    """Factory: a TRL-signature reward function backed by the reward server at ``url``."""
    return RemoteReward(url, mode, rubric, **kwargs)


def from_env(environ: dict[str, str] | None = None) -> RemoteReward:
    """Build a ``RemoteReward`` from the ``POSTTRAIN_REWARD_*`` variables (see the module doc)."""
    env = os.environ if environ is None else environ
    url = env.get("POSTTRAIN_REWARD_URL")
    if not url:
        raise RuntimeError("rewards.remote:reward needs POSTTRAIN_REWARD_URL, e.g. http://127.0.0.1:8000 "
                           "(start a server with `posttrain serve`)")
    rubric = env.get("POSTTRAIN_REWARD_RUBRIC")
    try:
        parsed_rubric = json.loads(rubric) if rubric else None
    except json.JSONDecodeError as err:
        raise RuntimeError(f"POSTTRAIN_REWARD_RUBRIC is not a JSON object: {err}") from None
    return RemoteReward(
        url, env.get("POSTTRAIN_REWARD_MODE", "binary"), parsed_rubric,
        api_key=env.get("POSTTRAIN_REWARD_API_KEY") or None,
        timeout=float(env.get("POSTTRAIN_REWARD_TIMEOUT", "60")),
        max_retries=int(env.get("POSTTRAIN_REWARD_RETRIES", "3")),
        max_concurrency=int(env.get("POSTTRAIN_REWARD_CONCURRENCY", "4")),
        batch_size=int(env.get("POSTTRAIN_REWARD_BATCH", "16")),
        use_reference=env.get("POSTTRAIN_REWARD_REFERENCE", "0").lower() in ("1", "true", "yes"),
        template=env.get("POSTTRAIN_REWARD_TEMPLATE") or None,
        good_verdict=env.get("POSTTRAIN_REWARD_GOOD_VERDICT") or None)


class EnvRemoteReward:
    """The ``RemoteReward`` of the ``POSTTRAIN_REWARD_*`` variables, built at its first call (so every rank
    builds the same client), with its metrics (``pop_metrics``): the object behind ``rewards.remote:reward``."""

    def __init__(self) -> None:
        self._client: RemoteReward | None = None
        self._lock = threading.Lock()
        self.__name__ = "reward"  # TRL logs rewards by function name

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float | None]:
        with self._lock:
            if self._client is None:
                self._client = from_env()
        return self._client(prompts, completions, **columns)

    def pop_metrics(self) -> dict[str, float]:
        """The client's ``pop_metrics``; empty before the first call."""
        return {} if self._client is None else self._client.pop_metrics()


reward = EnvRemoteReward()
"""``module:function`` entry point for configs: ``--reward rewards.remote:reward`` (settings from env)."""


RewardFn = Callable[..., list[float | None]]
