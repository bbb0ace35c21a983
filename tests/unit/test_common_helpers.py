"""The bottom layer's helpers (``posttrain.common``) against values worked out by hand: left padding, atomic
writes and the HTTP retry loop (against a local stand-in server)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch

from posttrain.common.files import atomic_write_jsonl, atomic_write_text
from posttrain.common.http import RequestFailed, RequestStats, RetryingPoster
from posttrain.common.padding import left_pad, left_padded_positions


def test_left_pad_by_hand() -> None:
    ids, mask = left_pad([[5, 6, 7], [8], []], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8], [0, 0, 0]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1], [0, 0, 0]]
    assert left_padded_positions(mask).tolist() == [[0, 1, 2], [0, 0, 0], [0, 0, 0]]
    wide, _ = left_pad([[1, 2]], pad_id=9, width=4)
    assert wide.tolist() == [[9, 9, 1, 2]] and wide.dtype == torch.long
    with pytest.raises(ValueError, match="does not fit width 1"):
        left_pad([[1, 2]], pad_id=0, width=1)


def test_atomic_writes_replace_whole_files_and_leave_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "out.jsonl"
    atomic_write_jsonl(target, [{"a": 1}, {"b": "é"}])
    assert target.read_text(encoding="utf-8") == '{"a": 1}\n{"b": "é"}\n'
    atomic_write_text(target, "new\n")
    assert target.read_text() == "new\n"
    with pytest.raises(TypeError):  # a record that cannot be written leaves the old file whole
        atomic_write_jsonl(target, [{"bad": object()}])
    assert target.read_text() == "new\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["out.jsonl"]


class _Server(ThreadingHTTPServer):
    """Answers each POST with the next status of ``statuses`` (200 bodies echo the request)."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses, self.seen = list(statuses), 0

        class Handler(BaseHTTPRequestHandler):
            def do_POST(handler) -> None:
                body = handler.rfile.read(int(handler.headers["Content-Length"]))
                self.seen += 1
                status = self.statuses.pop(0)
                handler.send_response(status)
                if status == 429:
                    handler.send_header("Retry-After", "0")
                handler.end_headers()
                handler.wfile.write(body if status == 200 else b"refused: bad field")

            def log_message(handler, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)


@pytest.fixture
def server():
    servers: list[_Server] = []

    def start(statuses: list[int]) -> tuple[_Server, str]:
        srv = _Server(statuses)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return srv, f"http://127.0.0.1:{srv.server_address[1]}"

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def _poster(url: str, retries: int) -> RetryingPoster:
    return RetryingPoster(url, None, timeout=5.0, max_retries=retries, backoff=0.001, max_backoff=0.01,
                          max_concurrency=1, seed=0, stats=RequestStats())


def test_transient_failures_are_retried_and_counted(server) -> None:
    srv, url = server([503, 429, 200])
    poster = _poster(url, retries=2)
    assert json.loads(poster.send("/v1/x", {"k": 1}).content) == {"k": 1}
    assert (srv.seen, poster.stats.requests, poster.stats.retries) == (3, 3, 2)


def test_refusals_are_final_and_running_out_of_retries_names_the_url(server) -> None:
    srv, url = server([400])
    poster = _poster(url, retries=3)
    with pytest.raises(RequestFailed, match=r"127\.0\.0\.1:\d+/v1/x: HTTP 400: refused: bad field"):
        poster.send("/v1/x", {})
    assert srv.seen == 1
    srv, url = server([500, 502])
    poster = _poster(url, retries=1)
    assert poster.post("/v1/x", {}) is None  # post: logged, None
    assert (srv.seen, poster.stats.retries) == (2, 1)
