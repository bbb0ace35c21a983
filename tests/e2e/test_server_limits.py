"""The reward server's connection limits on loopback, with raw-socket clients (fake engine): a body slower than
``body_timeout_s`` is cut off with 408, connections past ``max_connections`` get 503, and an idle keep-alive
connection is closed after ``keep_alive_s``."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest

from rewards.server.app import ServerSettings, create_app
from rewards.server.backends import load_served_model
from rewards.server.local import serve_in_thread

SETTINGS = ServerSettings(body_timeout_s=1.0, max_connections=3, keep_alive_s=1.0)
BODY = json.dumps({"prompt": "hello", "max_tokens": 2}).encode()


@pytest.fixture(scope="module")
def address() -> Iterator[tuple[str, int]]:
    with serve_in_thread(create_app(load_served_model("fake"), SETTINGS), settings=SETTINGS) as url:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        yield host, int(port)


def request_head(length: int) -> bytes:
    return (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


def read_until_closed(sock: socket.socket, limit_s: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and the seconds that took; fails past
    ``limit_s`` (a bounded loop: a server that never closes fails the test rather than hanging it)."""
    start, data = time.monotonic(), b""
    sock.settimeout(0.2)
    while time.monotonic() - start < limit_s:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            return data, time.monotonic() - start
        data += chunk
    pytest.fail(f"the server kept the connection open past {limit_s} s; it sent {data[:200]!r}")


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def test_a_slow_body_is_cut_off(address) -> None:
    with socket.create_connection(address) as sock:
        sock.sendall(request_head(len(BODY)) + BODY[:5])  # then nothing: the rest never comes
        response, seconds = read_until_closed(sock, limit_s=10)
    assert status_of(response) == 408 and b"--body_timeout" in response
    assert SETTINGS.body_timeout_s - 0.2 < seconds < SETTINGS.body_timeout_s + 3


def test_a_trickling_body_is_cut_off_at_the_deadline(address) -> None:
    """One byte at a time, each well within any per-read timeout: the deadline bounds the whole body."""
    with socket.create_connection(address) as sock:
        sock.sendall(request_head(len(BODY)))
        start = time.monotonic()
        try:
            for byte in BODY[:-1]:
                sock.sendall(bytes([byte]))
                time.sleep(0.1)
        except OSError:  # the server closed the connection mid-body
            pass
        response, _ = read_until_closed(sock, limit_s=10)
    assert status_of(response) == 408 and time.monotonic() - start < SETTINGS.body_timeout_s + 3


def test_connections_past_the_limit_get_503(address) -> None:
    held = [socket.create_connection(address) for _ in range(SETTINGS.max_connections)]
    try:
        time.sleep(0.2)  # the server has accepted them
        with socket.create_connection(address) as extra:
            extra.sendall(request_head(len(BODY)) + BODY)
            response, _ = read_until_closed(extra, limit_s=10)
        assert status_of(response) == 503
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.2)
    with socket.create_connection(address) as sock:  # the slots are free again
        sock.sendall(request_head(len(BODY)) + BODY)
        sock.settimeout(10)
        assert status_of(sock.recv(65536)) == 200


def test_an_idle_keep_alive_connection_is_closed(address) -> None:
    with socket.create_connection(address) as sock:
        sock.sendall(request_head(len(BODY)) + BODY)
        response, seconds = read_until_closed(sock, limit_s=10)
    assert status_of(response) == 200 and seconds < SETTINGS.keep_alive_s + 3
