"""Spawn one process per rank, run scenarios in one gloo group, collect their results.

Importing torch costs about 2 s per process, so one group runs every scenario in turn."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sdc_remediation.infra.local.ranks import run_ranks
from tests.torch.scenarios import WORLD, worker


def run_group(names: list[str], *, timeout: float = 600.0) -> dict[str, list[Any]]:
    """`{scenario: [rank 0's result, rank 1's, …]}`; raises with the worker's traceback on error
    and ends the workers (only the ones it started) on error or timeout."""
    return run_on_ranks(worker, (names,), names, timeout=timeout, what=f"scenarios {names}")


def run_on_ranks(
    target: Callable[..., None],
    args: tuple[Any, ...],
    keys: list[str],
    *,
    timeout: float,
    what: str,
) -> dict[str, list[Any]]:
    """Run `target(rank, port, *args, messages)` on every rank; each rank puts `(key, rank,
    result)` per key, then `("done", rank, None)`, or `("error", rank, traceback)`. Returns
    `{key: [rank 0's result, rank 1's, …]}`."""
    collected: dict[str, list[Any]] = {key: [None] * WORLD for key in keys}
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
        target,
        WORLD,
        args,
        collect,
        timeout=timeout,
        timed_out=lambda: TimeoutError(f"{what} did not finish in {timeout:g} s"),
    )
    return collected
