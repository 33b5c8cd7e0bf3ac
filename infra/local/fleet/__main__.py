"""`python -m sdc_remediation.infra.local.fleet` (`make fleet`): the fleet what-if, printed as tables, its
pipeline runs' audit logs written for `sdc report --all --from`.

    python -m sdc_remediation.infra.local.fleet                                  # Llama 3 405B's history
    python -m sdc_remediation.infra.local.fleet --history ours.csv --settings ours.json --days 30

`--settings` is a JSON object of `sdc:*` context keys (as cdk.json holds them; they take effect
where they do in a deployment: the functions read them from the environment the stack derives,
the state machine's waits, polls and approval timeout come from them) and optionally `"job"` and
`"approvers"`: objects of `JobModel` and `Approvers` fields.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from sdc_remediation.infra.cli.report import write_log
from sdc_remediation.infra.local.fleet.causes import (
    DAYS,
    LLAMA3_405B,
    NODES,
    PAPER,
    HistoryError,
    read_history,
)
from sdc_remediation.infra.local.fleet.whatif import (
    JOB_NODES,
    Approvers,
    JobModel,
    Mode,
    ModeResult,
    deployment,
    held_genuine,
    human_decisions,
    nodes_replaced,
    simulate,
)
from sdc_remediation.infra.stack.settings import DeploymentSettings as StackSettings
from sdc_remediation.infra.stack.settings import SettingsError
from sdc_remediation.lambdas.logic.core.figures import Figure

MODEL_KEYS: Final = {"job": JobModel, "approvers": Approvers}
MAX_DAYS: Final = 3650
"""Ten years: the replay's clock is a calendar, and a history spans a run, not a century."""


class FleetSettingsError(ValueError):
    """A settings file that does not read; the message says what to change."""


def read_settings(path: Path | None) -> tuple[StackSettings, JobModel, Approvers]:
    """The deployment's settings, the job and the approvers a settings file gives."""
    if path is None:
        return deployment(), JobModel(), Approvers()
    try:
        given = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise FleetSettingsError(f"cannot read {path} as JSON: {err}") from None
    if not isinstance(given, Mapping):
        raise FleetSettingsError(f"{path}: a JSON object of sdc:* keys, job and approvers")
    context = {k: v for k, v in given.items() if k.startswith("sdc:")}
    unknown = sorted(k for k in given if k not in context and k not in MODEL_KEYS)
    if unknown:
        raise FleetSettingsError(f"{path}: unknown keys {unknown}: sdc:* keys, job, approvers")
    try:
        stack = deployment(context)
    except SettingsError as err:
        raise FleetSettingsError(f"{path}: {err}") from None
    models = []
    for key, model in MODEL_KEYS.items():
        fields = given.get(key) or {}
        names = {f.name for f in dataclasses.fields(model)}
        if not isinstance(fields, Mapping) or set(fields) - names:
            raise FleetSettingsError(f"{path}: {key} takes {sorted(names)}")
        whole = {f.name for f in dataclasses.fields(model) if f.type == "int"}
        for name, value in fields.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise FleetSettingsError(f"{path}: {key}.{name}: a number, 0 or more")
            if not math.isfinite(value):
                raise FleetSettingsError(f"{path}: {key}.{name}: a finite number, 0 or more")
            if name in whole and value != int(value):
                raise FleetSettingsError(f"{path}: {key}.{name}: a whole number, 0 or more")
        fields = {k: int(v) if k in whole else v for k, v in fields.items()}
        try:
            models.append(model(**fields))
        except ValueError as err:
            raise FleetSettingsError(f"{path}: {key}.{err}") from None
    job, approvers = models
    assert isinstance(job, JobModel) and isinstance(approvers, Approvers)
    return stack, job, approvers


def _hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.2f} h"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def summary_rows(results: Mapping[Mode, ModeResult]) -> list[tuple[str, ...]]:
    """The main table: one column per mode."""
    modes = list(results.values())

    def figure(result: ModeResult, key: Figure) -> Any:
        return result.report.values[key] if result.report else None

    def precision(result: ModeResult) -> str:
        ratio = figure(result, Figure.PRECISION)
        return "-" if ratio is None else _percent(ratio.value)

    def recovery(result: ModeResult) -> str:
        spread = figure(result, Figure.TIME_TO_RECOVERY)
        return "-" if spread is None else _hours(spread.median)

    def holds(result: ModeResult) -> str:
        held = held_genuine(result)
        return ", ".join(f"{k} {v}" for k, v in sorted(held.items())) or "none"

    def executions(result: ModeResult) -> str:
        ended = result.executions
        unfinished = f" ({ended['RUNNING']} still running)" if ended["RUNNING"] else ""
        return f"{ended['SUCCEEDED']} / {ended['FAILED']}{unfinished}"

    def closings(result: ModeResult) -> str:
        outcomes = figure(result, Figure.OUTCOMES)
        ranked = sorted(outcomes.items(), key=lambda item: (-item[1], item[0]))
        return ", ".join(f"{outcome} {n}" for outcome, n in ranked) or "none"

    def covered(result: ModeResult) -> str:
        seen = sum(f.detected for f in result.faults)
        return f"{seen} of {len(result.faults)}"

    return [
        ("", *(m.mode.value for m in modes)),
        ("ETTR", *(_percent(m.ettr) for m in modes)),
        ("training time lost", *(_hours(m.lost_seconds) for m in modes)),
        ("faults detected (an incident opened, or HyperPod's agent)", *(covered(m) for m in modes)),
        ("remediation precision", *(precision(m) for m in modes)),
        ("time to recovery (median)", *(recovery(m) for m in modes)),
        ("human decisions", *(str(human_decisions(m)) if m.report else "-" for m in modes)),
        (
            "nodes replaced by the pipeline",
            *(str(nodes_replaced(m)) if m.report else "-" for m in modes),
        ),
        (
            "remediation executions: succeeded / failed",
            *(executions(m) if m.report else "-" for m in modes),
        ),
        (
            "genuine incidents held (guard, rate, storm)",
            *(holds(m) if m.report else "-" for m in modes),
        ),
        ("incidents by outcome", *(closings(m) if m.report else "-" for m in modes)),
    ]


def coverage_rows(results: Mapping[Mode, ModeResult]) -> list[tuple[str, ...]]:
    """Per cause: faults detected, by HyperPod's agent alone and with the pipeline."""
    alone = results[Mode.HYPERPOD_ONLY].coverage()
    piped = results[Mode.PIPELINE].coverage()
    rows: list[tuple[str, ...]] = [
        ("cause", "faults", Mode.HYPERPOD_ONLY.value, Mode.PIPELINE.value)
    ]
    for cause, (seen, total) in alone.items():
        rows.append((cause, str(total), f"{seen}", f"{piped.get(cause, (0, 0))[0]}"))
    return rows


def markdown(rows: Sequence[Sequence[str]]) -> str:
    head, *body = rows
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sdc_remediation.infra.local.fleet",
        description="Replay a failure history through the pipeline's own logic against a fake "
        "HyperPod cluster, beside HyperPod's own recovery alone and the pipeline approving at "
        f"once. Default history: {PAPER}.",
    )
    parser.add_argument(
        "--history", type=Path, help="a CSV of causes (infra/local/fleet/causes.py)"
    )
    parser.add_argument("--settings", type=Path, help="a JSON object of sdc:* keys, job, approvers")
    parser.add_argument(
        "--days", type=float, default=DAYS, help=f"the history's span (default {DAYS})"
    )
    parser.add_argument("--nodes", type=int, default=NODES, help=f"instances (default {NODES})")
    parser.add_argument("--seed", type=int, default=7, help="the draws' seed (default 7)")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("fleet-out"),
        help="where the audit logs (one per pipeline run, for `sdc report --all --from`) and "
        "fleet.json go (default fleet-out/)",
    )
    args = parser.parse_args(argv)
    try:
        causes = read_history(args.history) if args.history else LLAMA3_405B
        stack, job, approvers = read_settings(args.settings)
    except (HistoryError, FleetSettingsError) as err:
        print(f"fleet: {err}", file=sys.stderr)
        return 2
    if not 0 < args.days <= MAX_DAYS:
        parser.error(f"--days: a number of days above 0, at most {MAX_DAYS}")
    if args.nodes < JOB_NODES:
        parser.error(
            f"--nodes: at least {JOB_NODES} (the job an SDC report describes spans {JOB_NODES})"
        )
    started = time.monotonic()
    results = simulate(
        causes,
        days=args.days,
        nodes=args.nodes,
        job=job,
        approvers=approvers,
        stack=stack,
        seed=args.seed,
    )
    seconds = time.monotonic() - started
    args.out.mkdir(parents=True, exist_ok=True)
    logs = {}
    for mode, result in results.items():
        if result.report is not None:
            name = "pipeline" if mode is Mode.PIPELINE else "auto-approve"
            logs[mode.value] = str(
                write_log(args.out / f"{name}.jsonl", result.chains, result.incidents)
            )
    faults = sum(c.count for c in causes)
    summary = markdown(summary_rows(results))
    coverage = markdown(coverage_rows(results))
    when = datetime.now(UTC).strftime("%Y-%m-%d")
    print(
        f"Fleet what-if, {when}: {faults} faults over {args.days:g} days on {args.nodes} instances "
        f"({args.nodes * 8} GPUs); {'the history of ' + str(args.history) if args.history else PAPER}; "
        f"replayed in {seconds:.0f} s\n\n{summary}\n\nDetection coverage per cause (faults "
        f"detected):\n\n{coverage}\n\nAudit logs (sdc report --all --from FILE): {', '.join(logs.values())}"
    )
    (args.out / "fleet.json").write_text(
        json.dumps(
            {
                "date": when,
                "seconds": round(seconds, 1),
                "faults": faults,
                "days": args.days,
                "nodes": args.nodes,
                "summary": summary_rows(results),
                "coverage": coverage_rows(results),
                "audit_logs": logs,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
