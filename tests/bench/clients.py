"""Harness pieces the benchmarks share."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def reused_clients(session: Any) -> Iterator[None]:
    """One client per service and configuration for every invocation, as a warm Lambda keeps.

    The local run builds each invocation's adapters afresh (every function has its own
    environment), so without this every step would pay for building its boto3 clients, which
    a warm Lambda does once."""
    build = session.client
    built: dict[Any, Any] = {}
    lock = threading.Lock()

    def client(service_name: str, *args: Any, **kwargs: Any) -> Any:
        key = (service_name, args, tuple((k, id(v)) for k, v in sorted(kwargs.items())))
        with lock:
            if key not in built:
                built[key] = build(service_name, *args, **kwargs)
            return built[key]

    session.client = client
    try:
        yield
    finally:
        del session.client
