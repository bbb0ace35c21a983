"""The one HTTP retry loop: JSON POSTs retried with exponential backoff and jitter on transient failures
(connection errors, timeouts, 429, 5xx), ``Retry-After`` honoured, counting requests and retries."""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass

import httpx

logger = logging.getLogger(__name__)

RETRY_STATUS = {429, 500, 502, 503, 504}
"""HTTP statuses worth another try (rate limited, server errors); any other non-200 answer is final."""


class RequestFailed(RuntimeError):
    """A request the server refused, or that still failed after the retries; the message names the URL."""


@dataclass
class RequestStats:
    """Requests sent and retries taken by one client."""

    requests: int = 0
    retries: int = 0


class RetryingPoster:
    """JSON POSTs to one server with the module's retry policy, counting ``requests`` and ``retries`` into
    ``stats``: ``send`` raises when a request fails for good, ``post`` logs it and returns None. ``headers`` go
    with every request (e.g. a rollout worker's shared secret)."""

    def __init__(self, url: str, api_key: str | None, timeout: float, max_retries: int, backoff: float,
                 max_backoff: float, max_concurrency: int, seed: int | None, stats: RequestStats,
                 headers: dict[str, str] | None = None) -> None:
        self.url = url.rstrip("/")
        headers = {**(headers or {}), **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
        self._client = httpx.Client(base_url=self.url, headers=headers, timeout=timeout,
                                    limits=httpx.Limits(max_connections=max_concurrency))
        self.max_retries, self.backoff, self.max_backoff = max_retries, backoff, max_backoff
        self._jitter = random.Random(seed)
        self._lock = threading.Lock()
        self.stats = stats

    def send(self, path: str, body: dict) -> httpx.Response:
        """POST with retries on transient failures; ``RequestFailed`` naming the URL and the last error when the
        server refuses the request (a status not in ``RETRY_STATUS``) or the retries run out."""
        last = ""
        for attempt in range(self.max_retries + 1):
            wait: float | None = None
            try:
                with self._lock:
                    self.stats.requests += 1
                response = self._client.post(path, json=body)
                if response.status_code == 200:
                    return response
                last = f"HTTP {response.status_code}: {response.text[:500]}"
                if response.status_code not in RETRY_STATUS:
                    raise RequestFailed(f"{self.url}{path}: {last}")
                retry_after = response.headers.get("retry-after")
                if retry_after:
                    try:
                        wait = min(self.max_backoff, float(retry_after))
                    except ValueError:
                        wait = None
            except httpx.HTTPError as err:  # connect errors, timeouts, protocol errors
                last = f"{type(err).__name__}: {err}"
            if attempt == self.max_retries:
                break
            if wait is None:
                with self._lock:
                    jitter = self._jitter.uniform(0.5, 1.5)
                wait = min(self.max_backoff, self.backoff * (2 ** attempt)) * jitter
            with self._lock:
                self.stats.retries += 1
            time.sleep(wait)
        raise RequestFailed(f"{self.url}{path}: request failed after {self.max_retries + 1} attempts: {last}")

    def post(self, path: str, body: dict) -> httpx.Response | None:
        """``send``, but a request that fails for good is logged and gives None (the caller scores it None)."""
        try:
            return self.send(path, body)
        except RequestFailed as err:
            logger.warning("%s", err)
            return None

    def close(self) -> None:
        self._client.close()
