"""The control plane of one rollout worker (``posttrain rollout-worker``): vLLM's dev-mode weight-sync
routes (``/init_weight_transfer_engine``, ``/start_weight_update``, ...), its weight version and world size,
and the clean-up of a failed sync, over HTTP with a timeout on every call; every error is a ``WorkerError``
naming the worker. ``RemoteVLLMEngine`` (``engines/remote.py``) holds one per worker.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from posttrain.engines.worker_auth import SECRET_ENV, SECRET_FILE_ENV

log = logging.getLogger("posttrain")

FAILED_SYNC_VERSION = "failed-sync-{version}"
"""The weight version a worker is set to after a failed sync to ``version``, which no trainer step matches."""


class WorkerError(RuntimeError):
    """A rollout worker failed, did not answer in time, or holds the wrong weights; names its URL."""

    def __init__(self, url: str, message: str) -> None:
        super().__init__(f"rollout worker {url}: {message}")
        self.url = url


class ControlClient:
    """vLLM's ``VLLMWeightSyncClient`` over one worker's dev-mode RLHF routes (``/start_weight_update``,
    ...), plus ``/weight_info``; every call bounded by ``timeout_s``, errors naming the worker."""

    def __init__(self, url: str, timeout_s: float, headers: dict[str, str] | None = None) -> None:
        self.url = url
        self.timeout_s = timeout_s
        # a connection per call: control calls are few, and one reused after the server closed it idle was
        # reset in the middle of a failed sync's clean-up
        self._http = httpx.Client(base_url=url, timeout=timeout_s, headers=headers,
                                  limits=httpx.Limits(max_keepalive_connections=0))

    def _post(self, path: str, body: dict[str, Any] | None = None, timeout_s: float | None = None) -> httpx.Response:
        try:
            response = self._http.post(path, json=body, timeout=timeout_s or self.timeout_s)
        except httpx.HTTPError as err:
            raise WorkerError(self.url, f"POST {path}: {type(err).__name__}: {err}") from err
        refuse_unauthorised(self.url, f"POST {path}", response)
        if response.status_code == 404:
            raise WorkerError(self.url, f"POST {path}: not found; start the worker with `posttrain rollout-worker` "
                                        "(it turns on vLLM's dev-mode weight-sync routes, VLLM_SERVER_DEV_MODE=1)")
        if response.status_code >= 400:
            raise WorkerError(self.url, f"POST {path}: HTTP {response.status_code}: {response.text[:300]}")
        return response

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        self._post("/init_weight_transfer_engine", {"init_info": init_info})

    def pause(self) -> None:
        """Stop the worker's generation, aborting what still runs (``/pause?mode=abort``): a request a client
        gave up on (a timeout, a retry) may still run there, and must not run on the layers a weight update
        puts on the meta device."""
        self._post("/pause?mode=abort")

    def resume(self) -> None:
        """Let the worker generate again after ``pause``."""
        self._post("/resume")

    def start_weight_update(self) -> None:
        self._post("/start_weight_update")

    def update_weights(self, update_info: dict[str, Any] | list[dict[str, Any]]) -> None:
        self._post("/update_weights", {"update_info": update_info})

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        self._post("/finish_weight_update", None if weight_version is None else {"weight_version": weight_version})

    def update_weight_version(self, version: str) -> None:
        self._post("/update_weight_version", {"new_version": version})

    def abandon_update(self, version: str) -> None:
        """Close an update that failed (best effort, each call bounded by the timeout): finish it (vLLM's
        layerwise reload then puts the old weights back on every layer it was not sent), or, when vLLM
        already closed it (a failed ``/update_weights`` does, leaving layers on the meta device), open and
        finish an empty one, which does the same; then mark the worker ``FAILED_SYNC_VERSION`` and resume its
        generation (``pause``), which the version check refuses until a sync succeeds. A worker that
        does not answer within twice the timeout is left as it is (a dead or silent one needs a restart anyway)."""
        try:
            try:
                # the worker answers once its side of the broadcast failed: at the latest after its own
                # collective timeout (the sync timeout), which started before this call
                self._post("/finish_weight_update", timeout_s=2 * self.timeout_s)
            except WorkerError as err:
                if isinstance(err.__cause__, httpx.TransportError):
                    raise
                self.start_weight_update()
                self.finish_weight_update()
            self.update_weight_version(FAILED_SYNC_VERSION.format(version=version))
            self.resume()
        except WorkerError as err:
            log.warning("could not clean up the failed weight sync: %s", err)

    def reset_prefix_cache(self) -> None:
        """Drop the worker's cached prefix blocks (their keys and values were computed by the old weights)."""
        try:
            success = self._post("/reset_prefix_cache").json()["success"]
        except (ValueError, KeyError) as err:
            raise WorkerError(self.url, f"POST /reset_prefix_cache: unexpected answer: {err}") from err
        if not success:
            raise WorkerError(self.url, "POST /reset_prefix_cache: refused (requests still running during a "
                                        "weight sync); its cache would keep keys and values of the old weights")

    def _get(self, path: str) -> httpx.Response:
        response = self._http.get(path)
        refuse_unauthorised(self.url, f"GET {path}", response)
        response.raise_for_status()
        return response

    def world_size(self) -> int:
        """How many ranks the worker's engine has (tensor x pipeline x data parallel)."""
        try:
            response = self._get("/get_world_size")
            return int(response.json()["world_size"])
        except (httpx.HTTPError, KeyError, ValueError) as err:
            raise WorkerError(self.url, f"GET /get_world_size: {type(err).__name__}: {err}") from err

    def served_dtype(self) -> str:
        """The dtype the worker's engine holds its weights in, every rank asked (``/collective_rpc`` of
        ``WorkerExtension.posttrain_served_dtype``), e.g. ``"bfloat16"``."""
        return self._ask_every_rank("posttrain_served_dtype", "dtypes")

    def logprobs_mode(self) -> str:
        """Which log-probs the worker's completions report (``WorkerExtension.posttrain_logprobs_mode``), e.g.
        ``"processed_logprobs"``."""
        return self._ask_every_rank("posttrain_logprobs_mode", "log-prob modes")

    def _ask_every_rank(self, method: str, what: str) -> str:
        """The one answer every rank of the worker's engine gives to ``method`` (through ``/collective_rpc``)."""
        try:
            answers = self._post("/collective_rpc", {"method": method}).json()["results"]
        except (ValueError, KeyError, TypeError) as err:
            raise WorkerError(self.url, f"POST /collective_rpc: unexpected answer: {err}") from err
        if not answers or len(set(answers)) != 1:
            raise WorkerError(self.url, f"its engine's ranks report the {what} {answers}; expected one")
        return str(answers[0])

    def weight_version(self) -> str:
        """The version the worker reports (``"default"`` before any sync)."""
        try:
            response = self._get("/weight_info")
            return str(response.json()["weight_version"])
        except (httpx.HTTPError, KeyError, ValueError) as err:
            raise WorkerError(self.url, f"GET /weight_info: {type(err).__name__}: {err}") from err

    def close(self) -> None:
        self._http.close()


def refuse_unauthorised(url: str, what: str, response: httpx.Response) -> None:
    if response.status_code == 401:
        raise WorkerError(url, f"{what}: refused (401): the worker wants the shared secret; set {SECRET_ENV} (or "
                               f"{SECRET_FILE_ENV}) in the trainer's environment to the worker's")
