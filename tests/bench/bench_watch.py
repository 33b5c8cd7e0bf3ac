"""Benchmark (not a test): what the training watch costs a training step, and how long a hang
takes from its onset to the approval card.

    .venv/bin/python -m tests.bench watch

Overhead: a small MLP trains on CPU (one thread) twice in one process, plain and with the two
calls of the training loop (`watch.section` around data loading and forward/backward,
`watch.step` after; a window of 100 steps published to the store), the monitor thread polling.
The variants take turns step by step, first one then the other first (the second of a pair pays
for the first's cache misses), so a busy machine slows both alike; a variant's figure is its
best round. The ratio is to the plain step in the same run (goal: at most 1 %). The two
calls are also timed alone (timeit, with nothing in the sections): the least noisy figure, and
their share shrinks as real steps grow (a GPU step of 100 ms or more).

Hang to card: the `hang-one-rank` drill scenario (a real 4-rank gloo job, watchdog timeout
1.5 s), split where the drill stands its stack up: onset → report (the job's own clocks) and
report published → approval card (the drill's timeline). Their sum is onset → card.
"""

from __future__ import annotations

import time
from typing import Any

STEPS = 200
ROUNDS = 7
WARMUP = 20


def _variants() -> tuple[Any, Any, Any]:
    import torch
    from torch import nn

    from trainer_emitter.rankmap import RankMap
    from trainer_emitter.watch import MemoryStore, Section, TrainingWatch

    torch.set_num_threads(1)

    def model() -> tuple[Any, Any]:
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256))
        return net, torch.optim.SGD(net.parameters(), lr=0.01)

    batch = (torch.randn(64, 256), torch.randn(64, 256))

    def train(net: Any, optimizer: Any) -> None:
        optimizer.zero_grad()
        nn.functional.mse_loss(net(batch[0]), batch[1]).backward()
        optimizer.step()

    plain_net, plain_opt = model()
    watched_net, watched_opt = model()

    class Quiet:
        rank_map = RankMap([{"rank": 0, "instance_id": "i-0aa00000000000001"}])

        def report(self, alarm: object) -> None:
            raise AssertionError(f"the benchmark's watch reported {alarm}")

    watch = TrainingWatch(
        Quiet(), store=MemoryStore(), rank=0, world=1, timeout=300, count_collectives=False
    )
    counter = {"step": 0}

    def plain() -> None:
        train(plain_net, plain_opt)

    def watched() -> None:
        with watch.section(Section.DATA_LOADING):
            pass
        with watch.section(Section.FORWARD_BACKWARD):
            train(watched_net, watched_opt)
        counter["step"] += 1
        watch.step(counter["step"])

    def calls_alone() -> None:
        with watch.section(Section.DATA_LOADING):
            pass
        with watch.section(Section.FORWARD_BACKWARD):
            pass
        counter["step"] += 1
        watch.step(counter["step"])

    return plain, watched, calls_alone, watch


def measure_overhead() -> dict[str, float]:
    import timeit

    plain, watched, calls_alone, watch = _variants()
    best = {"plain": float("inf"), "watched": float("inf")}
    try:
        for _ in range(WARMUP):
            plain()
            watched()
        for _ in range(ROUNDS):
            spent = {"plain": 0.0, "watched": 0.0}
            for index in range(STEPS):
                # ABBA: whichever runs second in a step pays for the first's cache misses
                order = (("plain", plain), ("watched", watched))
                for name, step in order if index % 2 else order[::-1]:
                    started = time.perf_counter()
                    step()
                    spent[name] += time.perf_counter() - started
            for name in best:
                best[name] = min(best[name], spent[name] / STEPS)
        best["calls"] = min(timeit.repeat(calls_alone, number=10_000, repeat=5)) / 10_000
    finally:
        watch.close()
    return best


def measure_hang_to_card() -> dict[str, float]:
    from infra.local.drill.runner import run_scenario
    from infra.local.drill.scenarios import SCENARIOS

    outcome = run_scenario(SCENARIOS["hang-one-rank"])
    if not outcome.passed:
        raise RuntimeError(f"hang-one-rank did not pass: {outcome.problems}")
    reported = next(line for line in outcome.timeline if "reported_after" in line.ids)
    published = next(line for line in outcome.timeline if line.who == "rank 0")
    card = next(line for line in outcome.timeline if line.what.startswith("notified: "))
    return {
        "onset_to_report": float(reported.ids["reported_after"]),
        "report_to_card": card.at - published.at,
    }


def run() -> list[dict[str, Any]]:
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        return [_row("watch: torch is not installed", None, "", None, str(exc))]
    best = measure_overhead()
    ratio = best["watched"] / best["plain"]
    rows = [
        _row("plain training step (MLP 256-512-256, CPU)", best["plain"] * 1e3, "ms", 1.0, ""),
        _row(
            "step with the watch's two calls",
            best["watched"] * 1e3,
            "ms",
            ratio,
            f"<= 1.01 ({(ratio - 1) * 100:+.2f} %)",
        ),
        _row(
            "the two calls alone, per step (timeit)",
            best["calls"] * 1e6,
            "us",
            1 + best["calls"] / best["plain"],
            "<= 1.01 of the plain step",
        ),
    ]
    timings = measure_hang_to_card()
    rows += [
        _row(
            "hang onset -> report (watchdog timeout 1.5 s)",
            timings["onset_to_report"],
            "s",
            None,
            "<= timeout + 30 s",
        ),
        _row(
            "report published -> approval card (local run)",
            timings["report_to_card"],
            "s",
            None,
            "",
        ),
        _row("hang onset -> approval card", sum(timings.values()), "s", None, ""),
    ]
    return rows


def _row(
    name: str, value: float | None, unit: str, ratio: float | None, goal: str
) -> dict[str, Any]:
    return {"name": name, "value": value, "unit": unit, "ratio": ratio, "goal": goal}
