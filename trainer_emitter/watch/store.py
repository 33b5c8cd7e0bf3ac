"""The side channel the watch talks over: a key-value store every rank reaches without a
collective (the job's rendezvous store, `torch.distributed.TCPStore`), so evidence still moves
while a collective is stuck.

`Store` is the four calls used, all of which TCPStore has; `MemoryStore` is the same over a
dict, for one process (tests, and a job without torch.distributed).
"""

from __future__ import annotations

import os
import threading
from datetime import timedelta
from typing import Any, Protocol


class Store(Protocol):
    def set(self, key: str, value: str | bytes) -> None: ...

    def get(self, key: str) -> bytes: ...

    def add(self, key: str, amount: int) -> int: ...

    def check(self, keys: list[str]) -> bool: ...


class MemoryStore:
    """A `Store` in this process's memory (thread-safe)."""

    def __init__(self) -> None:
        self._values: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def set(self, key: str, value: str | bytes) -> None:
        with self._lock:
            self._values[key] = value.encode() if isinstance(value, str) else bytes(value)

    def get(self, key: str) -> bytes:
        with self._lock:
            if key not in self._values:
                raise KeyError(key)
            return self._values[key]

    def add(self, key: str, amount: int) -> int:
        with self._lock:
            value = int(self._values.get(key, b"0")) + amount
            self._values[key] = str(value).encode()
            return value

    def check(self, keys: list[str]) -> bool:
        with self._lock:
            return all(key in self._values for key in keys)


def connect_store(
    host: str | None = None, port: int | None = None, *, timeout: float = 30.0
) -> Any:
    """A client of the job's rendezvous store (MASTER_ADDR and MASTER_PORT unless given): a
    connection of its own, so the watch's monitor thread never waits on the training thread's."""
    from torch.distributed import TCPStore

    host = host or os.environ.get("MASTER_ADDR")
    raw_port = port if port is not None else os.environ.get("MASTER_PORT")
    if not host or raw_port is None:
        raise ValueError(
            "no rendezvous store: pass store=, or host and port, or set MASTER_ADDR and MASTER_PORT"
        )
    return TCPStore(
        host,
        int(raw_port),
        is_master=False,
        timeout=timedelta(seconds=timeout),
        wait_for_workers=False,
    )
