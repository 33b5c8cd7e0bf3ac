"""Cold start proxy: the import time of each handler module in a fresh interpreter, against
`import boto3` measured in the same rounds (goal: at most 1.5 times as long).

Each round imports boto3 and then every module once, each in its own interpreter, so a change in
the machine's load touches the yardstick and the figures alike; the median of the rounds counts.
The handlers import no adapter and no boto3 (the wiring imports them when the first invocation
builds its deps), and outside Lambda no X-Ray SDK. One more row imports a handler as in Lambda
(`LAMBDA_TASK_ROOT` set, X-Ray on), where Powertools' Tracer loads the X-Ray SDK at import.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 5
GOAL_RATIO = 1.5
PROBE = (
    "import time, importlib; t = time.perf_counter(); importlib.import_module({module!r}); "
    "print(time.perf_counter() - t)"
)
IN_LAMBDA = "sdc_remediation.lambdas.handlers.store_report"
"""The handler imported as in Lambda too: tracing costs every handler the same."""


def _import_seconds(module: str, environment: dict[str, str]) -> float:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module)],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


@dataclass(frozen=True)
class Probe:
    name: str
    module: str
    environment: dict[str, str]
    goal: str


def _medians(probes: list[Probe]) -> list[float]:
    samples: list[list[float]] = [[] for _ in probes]
    for _ in range(ROUNDS):
        for probe, found in zip(probes, samples, strict=True):
            found.append(_import_seconds(probe.module, probe.environment))
    return [statistics.median(found) for found in samples]


def run() -> list[dict[str, Any]]:
    outside = {k: v for k, v in os.environ.items() if k != "LAMBDA_TASK_ROOT"}
    in_lambda = {**outside, "LAMBDA_TASK_ROOT": str(ROOT)}
    in_lambda.pop("POWERTOOLS_TRACE_DISABLED", None)
    handlers = [
        f"sdc_remediation.lambdas.handlers.{path.stem}"
        for path in sorted((ROOT / "lambdas" / "handlers").glob("[a-z]*.py"))
    ]
    probes = [
        Probe("import boto3 (yardstick)", "boto3", outside, "-"),
        *(Probe(f"import {m}", m, outside, f"<= {GOAL_RATIO}") for m in handlers),
        Probe(
            f"import {IN_LAMBDA} in Lambda (X-Ray on)",
            IN_LAMBDA,
            in_lambda,
            "- (the X-Ray SDK loads at init)",
        ),
        Probe(
            "import trainer_emitter (training side)",
            "trainer_emitter",
            outside,
            "< 1: boto3 loads on first report",
        ),
    ]
    seconds = _medians(probes)
    boto = seconds[0]
    return [
        {
            "name": probe.name,
            "value": value * 1000,
            "unit": "ms",
            "ratio": value / boto,
            "goal": probe.goal,
        }
        for probe, value in zip(probes, seconds, strict=True)
    ]
