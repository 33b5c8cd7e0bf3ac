"""Spawn one process per rank, run scenarios in one gloo group, collect their results.

Importing torch costs about 2 s per process, so one group runs every scenario in turn."""

from __future__ import annotations

import multiprocessing
import queue
import socket
import time
from typing import Any

from tests.torch.scenarios import WORLD, worker


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_group(names: list[str], *, timeout: float = 600.0) -> dict[str, list[Any]]:
    """`{scenario: [rank 0's result, rank 1's, …]}`; raises with the worker's traceback on error
    and ends the workers (only the ones it started) on error or timeout."""
    context = multiprocessing.get_context("spawn")
    results: Any = context.Queue()
    port = free_port()
    workers = [
        context.Process(target=worker, args=(rank, port, names, results), daemon=True)
        for rank in range(WORLD)
    ]
    for process in workers:
        process.start()
    collected: dict[str, list[Any]] = {name: [None] * WORLD for name in names}
    done = 0
    deadline = time.monotonic() + timeout
    try:
        while done < WORLD:
            try:
                name, rank, result = results.get(timeout=max(deadline - time.monotonic(), 0.1))
            except queue.Empty:
                raise TimeoutError(f"scenarios {names} did not finish in {timeout:g} s") from None
            if name == "error":
                raise RuntimeError(f"rank {rank} failed:\n{result}")
            if name == "done":
                done += 1
            else:
                collected[name][rank] = result
        for process in workers:
            process.join(timeout=30)
    finally:
        for process in workers:
            if process.is_alive():
                process.kill()
                process.join(timeout=5)
    return collected
