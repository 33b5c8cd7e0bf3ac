"""The fleet what-if's default run: Llama 3 405B's 419 unexpected interruptions over 54 days
(arXiv 2407.21783) replayed through the pipeline's functions and the stack's state machines on a
2,048-instance fake cluster, twice (approvers modelled, approving at once), beside HyperPod's
recovery alone. What must hold: the whole run in at most 10 minutes on the machine it runs on
(`make fleet` is a thing a team runs before deploying, not an overnight job). The rows also give
what the run found."""

from __future__ import annotations

import time
from typing import Any, Final

from sdc_remediation.infra.local.fleet.causes import DAYS, LLAMA3_405B, NODES
from sdc_remediation.infra.local.fleet.whatif import (
    Approvers,
    JobModel,
    Mode,
    nodes_replaced,
    simulate,
)

GOAL_SECONDS: Final = 600.0


def run() -> list[dict[str, Any]]:
    started = time.perf_counter()
    results = simulate(LLAMA3_405B, days=DAYS, nodes=NODES, job=JobModel(), approvers=Approvers())
    seconds = time.perf_counter() - started

    def row(name: str, value: Any, unit: str, goal: str, ratio: float | None = None) -> Any:
        return {"name": name, "value": value, "unit": unit, "ratio": ratio, "goal": goal}

    faults = sum(c.count for c in LLAMA3_405B)
    return [
        row(
            f"fleet what-if: {faults} faults, {NODES} instances, 3 ways, wall time",
            round(seconds, 1),
            "s",
            f"ratio ≤ 1 ({GOAL_SECONDS:.0f} s)",
            seconds / GOAL_SECONDS,
        ),
        *[
            row(f"  ETTR, {mode.value}", round(result.ettr * 100, 2), "%", "higher is better")
            for mode, result in results.items()
        ],
        row(
            "  nodes replaced, pipeline with approvers",
            nodes_replaced(results[Mode.PIPELINE]),
            "count",
            "what the approvers approved",
        ),
    ]
