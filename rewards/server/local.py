"""Run the server in-process on a free loopback port (tests, benchmarks, notebooks)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from posttrain.engines.weight_sync.rendezvous import free_port
from rewards.server.guard import ServerSettings


@contextmanager
def serve_in_thread(app: Any, host: str = "127.0.0.1", port: int | None = None,
                    startup_timeout_s: float = 30.0, settings: ServerSettings | None = None) -> Iterator[str]:
    """Start uvicorn on ``host:port`` in a daemon thread; yield ``http://host:port``; stop on exit. uvicorn's
    connection limit and keep-alive timeout are ``settings``' (default: ``ServerSettings()``'s, as
    ``posttrain serve``'s defaults)."""
    import uvicorn

    port = port or free_port(host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on",
                            **(settings or ServerSettings()).uvicorn_options())
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the server did not start on {host}:{port}")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
