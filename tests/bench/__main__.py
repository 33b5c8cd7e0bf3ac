"""`make bench`: run every benchmark module, print one table, write bench-results.json.

Each `bench_*.py` exposes `run() -> list[dict]` with rows `{name, value, unit, ratio, goal}`:
`ratio` compares the figure with a yardstick or goal measured or fixed in the same run, so a
row reads the same on a fast or a slow machine. A module whose prerequisites are missing
(torch for the fingerprint benchmark) says so in a row instead of failing the run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make bench")
    parser.add_argument(
        "only", nargs="*", help="module names (emitter, pipeline, ...); default all"
    )
    parser.add_argument("--out", default="bench-results.json")
    args = parser.parse_args(argv)
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    names = args.only or sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))
    rows: list[dict[str, Any]] = []
    failed = False
    for name in names:
        started = time.perf_counter()
        try:
            module = importlib.import_module(f"tests.bench.bench_{name}")
            found = module.run()
        except Exception as exc:
            traceback.print_exc()
            found = [
                {
                    "name": f"{name}: failed",
                    "value": None,
                    "unit": "",
                    "ratio": None,
                    "goal": f"{type(exc).__name__}: {exc}",
                }
            ]
            failed = True
        for row in found:
            rows.append({"suite": name, **row})
        print(f"{name}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    _print(rows)
    Path(args.out).write_text(
        json.dumps(
            {
                "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "machine": {
                    "python": platform.python_version(),
                    "cpus": os.cpu_count(),
                    "platform": platform.platform(),
                },
                "rows": rows,
            },
            indent=2,
        )
    )
    print(f"\nwritten: {args.out}")
    return 1 if failed else 0


def _print(rows: list[dict[str, Any]]) -> None:
    header = ("suite", "figure", "value", "unit", "ratio", "goal")
    table = [header] + [
        (r["suite"], r["name"], _fmt(r["value"]), r["unit"], _fmt(r["ratio"]), r["goal"])
        for r in rows
    ]
    widths = [max(len(str(line[i])) for line in table) for i in range(len(header))]
    for index, line in enumerate(table):
        print("  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)))
        if index == 0:
            print("  ".join("-" * width for width in widths))


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


if __name__ == "__main__":
    sys.exit(main())
