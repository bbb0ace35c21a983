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


@dataclass
class RequestStats:
    """Requests sent and retries taken by one client."""

    requests: int = 0
    retries: int = 0


class RetryingPoster:
    """JSON POSTs to one server with the module's retry policy; ``post`` returns None (and logs why) when a
    request finally fails or is refused, counting ``requests`` and ``retries`` into ``stats``."""

    def __init__(self, url: str, api_key: str | None, timeout: float, max_retries: int, backoff: float,
                 max_backoff: float, max_concurrency: int, seed: int | None, stats: RequestStats) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=self.url, headers=headers, timeout=timeout,
                                    limits=httpx.Limits(max_connections=max_concurrency))
        self.max_retries, self.backoff, self.max_backoff = max_retries, backoff, max_backoff
        self._jitter = random.Random(seed)
        self._lock = threading.Lock()
        self.stats = stats

    def post(self, path: str, body: dict) -> httpx.Response | None:
        """POST with retries on transient failures; None when the request finally failed."""
        last = ""
        for attempt in range(self.max_retries + 1):
            wait: float | None = None
            try:
                with self._lock:
                    self.stats.requests += 1
                response = self._client.post(path, json=body)
                if response.status_code == 200:
                    return response
                last = f"HTTP {response.status_code}: {response.text[:200]}"
                if response.status_code not in RETRY_STATUS:
                    logger.warning("%s refused the request (%s); not retrying", self.url, last)
                    return None
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
        logger.warning("%s: request failed after %d attempts (%s)", self.url, self.max_retries + 1, last)
        return None

    def close(self) -> None:
        self._client.close()
