"""Serving a local stand-in (Kubernetes API, Prometheus, IMDS) over HTTP on a thread."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import HTTPServer
from typing import Final

SHUTDOWN_POLL_SECONDS: Final = 0.05
"""How often the serving loop looks for a shutdown request. The standard library's 0.5 s made
every stop wait up to half a second, and the tests start and stop a server per case."""


@contextmanager
def serving(server: HTTPServer, name: str) -> Iterator[str]:
    """Serve `server` on a daemon thread until the block ends; yields its base URL."""
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": SHUTDOWN_POLL_SECONDS},
        daemon=True,
        name=name,
    )
    thread.start()
    host, port = server.socket.getsockname()[:2]
    try:
        yield f"http://{host}:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
