"""Spawn one process per rank, run scenarios in one gloo group, collect their results.

Importing torch costs about 2 s per process, so one group runs every scenario in turn."""

from __future__ import annotations

from typing import Any

from infra.local.ranks import run_ranks
from tests.torch.scenarios import WORLD, worker


def run_group(names: list[str], *, timeout: float = 600.0) -> dict[str, list[Any]]:
    """`{scenario: [rank 0's result, rank 1's, …]}`; raises with the worker's traceback on error
    and ends the workers (only the ones it started) on error or timeout."""
    collected: dict[str, list[Any]] = {name: [None] * WORLD for name in names}
    done = 0

    def collect(message: tuple[str, int, Any]) -> bool:
        nonlocal done
        name, rank, result = message
        if name == "error":
            raise RuntimeError(f"rank {rank} failed:\n{result}")
        if name == "done":
            done += 1
        else:
            collected[name][rank] = result
        return done == WORLD

    run_ranks(
        worker,
        WORLD,
        (names,),
        collect,
        timeout=timeout,
        timed_out=lambda: TimeoutError(f"scenarios {names} did not finish in {timeout:g} s"),
    )
    return collected
