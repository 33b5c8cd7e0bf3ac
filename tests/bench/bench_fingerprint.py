"""Benchmark (not a test): fingerprint throughput against numpy's sum over the same bytes, and the
local time of a weight check against the parameter count.

    .venv/bin/python tests/bench/bench_fingerprint.py

`run()` returns rows `{name, value, unit, ratio, goal}`. Both sides run on one core (torch's
intra-op threads set to 1 while it runs; numpy's sum is single-threaded), best of several rounds
in which the sides take turns, so that a busy machine slows both alike. The yardsticks: numpy's
float32 sum, and numpy's exact int64 sum of the same raw words (the least an exact fingerprint
must do: read every word once and add it in 64 bits); `fingerprint.py` says what the ratio to
the second is and why.
numpy is needed for the yardstick only and is no dependency of the project: without it (or
without torch) a row says what is missing and the figures it can measure are still there.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

if TYPE_CHECKING:
    import torch

BYTES = 64 << 20
PARAMETER_COUNTS = (1_000_000, 10_000_000, 50_000_000)
GOAL = "ratio >= 1.0"
EXACT_GOAL = "ratio >= 0.9 (one read of the words)"


def best_seconds(action: Callable[[], Any], repeats: int = 5) -> float:
    action()  # warm up: first-touch page faults, allocator
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times)


def eager_fingerprint(tensor: torch.Tensor) -> torch.Tensor:
    """The obvious way, for contrast: widen the whole tensor at once, multiply by positions."""
    import torch

    words = tensor.reshape(-1).view(torch.int32).to(torch.int64)
    positions = torch.arange(1, words.numel() + 1, dtype=torch.int64)
    return torch.stack([words.sum(), (words * positions).sum()])


def model_of(count: int) -> list[torch.Tensor]:
    """Parameters of a transformer-ish shape: square matrices and a few vectors."""
    import torch

    width = 1024
    tensors: list[torch.Tensor] = []
    remaining = count
    while remaining > 0:
        rows = min(width, max(remaining // width, 1))
        tensors.append(torch.randn(rows, width)[:, : min(width, remaining)].contiguous())
        remaining -= tensors[-1].numel()
        if remaining > width:
            tensors.append(torch.randn(width))
            remaining -= width
    return tensors


def paired_best(actions: dict[str, Callable[[], Any]], rounds: int = 7) -> dict[str, float]:
    """Best seconds of each action, the actions taking turns in every round: on a shared machine
    both sides of a ratio see the same noise."""
    for action in actions.values():
        action()  # warm up: first-touch page faults, allocator
    best = dict.fromkeys(actions, float("inf"))
    for _ in range(rounds):
        for name, action in actions.items():
            started = time.perf_counter()
            action()
            best[name] = min(best[name], time.perf_counter() - started)
    return best


def run() -> list[dict[str, Any]]:
    try:
        import torch

        from trainer_emitter.checks.fingerprint import fingerprint, fingerprints
    except ImportError as exc:
        return [_row("fingerprint: torch is not installed", None, "", None, str(exc))]
    try:
        import numpy as np
    except ImportError:
        np = None

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        data = torch.randn(BYTES // 4)
        bf16 = torch.randn(BYTES // 2).to(torch.bfloat16)
        actions: dict[str, Callable[[], Any]] = {
            "float32": lambda: fingerprint(data),
            "bfloat16": lambda: fingerprint(bf16),
        }
        if np is not None:
            array = data.numpy()
            halves = bf16.view(torch.int16).numpy()
            actions["numpy sum"] = lambda: np.sum(array)
            actions["numpy exact"] = lambda: np.sum(array.view(np.int32), dtype=np.int64)
            actions["numpy exact 16"] = lambda: np.sum(halves, dtype=np.int64)
        speed = {name: BYTES / seconds for name, seconds in paired_best(actions).items()}
        eager = BYTES / best_seconds(lambda: eager_fingerprint(data), repeats=2)
        rows: list[dict[str, Any]] = []
        if np is None:
            rows.append(
                _row(
                    "numpy sum (yardstick): numpy is not installed",
                    None,
                    "",
                    None,
                    "pip install numpy",
                )
            )
        yardstick = speed.get("numpy sum")
        exact = speed.get("numpy exact")
        exact16 = speed.get("numpy exact 16")
        if np is not None:
            rows += [
                _row("numpy sum, float32 (yardstick)", yardstick, "B/s", None, "yardstick"),
                _row(
                    "numpy exact int64 sum of the int32 words (yardstick)",
                    exact,
                    "B/s",
                    _ratio(exact, yardstick),
                    "yardstick",
                ),
                _row(
                    "numpy exact int64 sum of the int16 words (yardstick)",
                    exact16,
                    "B/s",
                    _ratio(exact16, yardstick),
                    "yardstick",
                ),
            ]
        rows += [
            _row(
                "fingerprint, float32, against numpy's exact int64 sum of the same words",
                speed["float32"],
                "B/s",
                _ratio(speed["float32"], exact),
                EXACT_GOAL,
            ),
            _row(
                "fingerprint, bfloat16, against numpy's exact int64 sum of the same words",
                speed["bfloat16"],
                "B/s",
                _ratio(speed["bfloat16"], exact16),
                EXACT_GOAL,
            ),
            _row(
                "fingerprint, float32, against numpy's float32 sum",
                speed["float32"],
                "B/s",
                _ratio(speed["float32"], yardstick),
                GOAL,
            ),
            _row(
                "fingerprint, float32, eager (contrast)",
                eager,
                "B/s",
                _ratio(eager, yardstick),
                "none",
            ),
        ]
        for count in PARAMETER_COUNTS:
            parameters = model_of(count)
            seconds = best_seconds(lambda parameters=parameters: fingerprints(parameters), 3)
            rows.append(
                _row(
                    f"weight check (local fingerprints), {count / 1e6:g}M float32 parameters",
                    seconds,
                    "s",
                    None,
                    "linear in parameter count (seed: 31.1 ms for 953M on an H100)",
                )
            )
        return rows
    finally:
        torch.set_num_threads(threads)


def _ratio(value: float, yardstick: float | None) -> float | None:
    return None if yardstick is None else value / yardstick


def _row(
    name: str, value: float | None, unit: str, ratio: float | None, goal: str
) -> dict[str, Any]:
    return {"name": name, "value": value, "unit": unit, "ratio": ratio, "goal": goal}


def _show(value: float | None, unit: str) -> str:
    if value is None:
        return f"{'-':>13}"
    if unit == "B/s":
        return f"{value / 1e9:8.2f} GB/s"
    return f"{value * 1e3:8.1f} ms  "


def main() -> None:
    rows = run()
    width = max(len(row["name"]) for row in rows)
    print(f"{'benchmark':<{width}}  {'value':>13}  {'ratio':>6}  goal")
    for row in rows:
        ratio = "" if row["ratio"] is None else f"{row['ratio']:.2f}"
        print(
            f"{row['name']:<{width}}  {_show(row['value'], row['unit'])}  {ratio:>6}  {row['goal']}"
        )


if __name__ == "__main__":
    main()
