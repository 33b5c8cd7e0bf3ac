"""Cold start proxy: the import time of each handler module in a fresh interpreter."""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RUNS = 3
PROBE = (
    "import time, importlib; t = time.perf_counter(); importlib.import_module({module!r}); "
    "print(time.perf_counter() - t)"
)


def _import_seconds(module: str) -> float:
    samples = []
    for _ in range(RUNS):
        out = subprocess.run(
            [sys.executable, "-c", PROBE.format(module=module)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        samples.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(samples)


def run() -> list[dict[str, Any]]:
    boto = _import_seconds("boto3")
    rows = [
        {
            "name": "import boto3 (yardstick)",
            "value": boto * 1000,
            "unit": "ms",
            "ratio": 1.0,
            "goal": "-",
        }
    ]
    for path in sorted((ROOT / "lambdas" / "handlers").glob("[a-z]*.py")):
        seconds = _import_seconds(f"lambdas.handlers.{path.stem}")
        rows.append(
            {
                "name": f"import lambdas.handlers.{path.stem}",
                "value": seconds * 1000,
                "unit": "ms",
                "ratio": seconds / boto,
                "goal": "ratio vs import boto3",
            }
        )
    emitter = _import_seconds("trainer_emitter")
    rows.append(
        {
            "name": "import trainer_emitter (training side)",
            "value": emitter * 1000,
            "unit": "ms",
            "ratio": emitter / boto,
            "goal": "< 1: boto3 loads on first report",
        }
    )
    return rows
