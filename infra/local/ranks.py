"""Spawn one process per rank of a local gloo job and read what the ranks report.

Shared by the drill's DDP job and the checks' tests: each rank runs `target(rank, port, *args,
messages)` in a fresh (spawned) interpreter and puts its reports on `messages`; the caller's
`on_message` reads them until it has all it needs. The processes started here are ended here,
on success, error or timeout; nothing else is touched.
"""

from __future__ import annotations

import multiprocessing
import queue
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_ranks(
    target: Callable[..., None],
    world: int,
    args: Sequence[Any],
    on_message: Callable[[Any], bool],
    *,
    timeout: float,
    timed_out: Callable[[], Exception],
    linger: float = 30.0,
) -> None:
    """Start `world` ranks and feed every message they put to `on_message` until it returns
    True; raises `timed_out()` when that takes longer than `timeout` seconds, and whatever
    `on_message` raises (a rank's error). Then each rank gets `linger` seconds to exit before
    it is ended (a job that hung on purpose passes 0)."""
    context = multiprocessing.get_context("spawn")
    messages: Any = context.Queue()
    port = free_port()
    workers = [
        context.Process(target=target, args=(rank, port, *args, messages), daemon=True)
        for rank in range(world)
    ]
    for process in workers:
        process.start()
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                message = messages.get(timeout=max(deadline - time.monotonic(), 0.1))
            except queue.Empty:
                raise timed_out() from None
            if on_message(message):
                break
        for process in workers:
            process.join(timeout=linger)
    finally:
        # rank 0 last: it serves the rendezvous store the others' threads may still be using
        for process in reversed(workers):
            if process.is_alive():
                process.kill()
                process.join(timeout=5)
