"""`sdc report`: the fleet figures (`sdc_remediation.lambdas.logic.core.figures`) of a deployment's audit log and
incident records, or of an audit log written to a file (the fleet what-if's, `sdc fleet`).

The file is JSON Lines: `{"audit": <entry>}` for each audit entry, `{"incident": <record>}` for
each incident record, as the tables hold them (`write_log`, `read_log`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from sdc_remediation.infra.cli.exits import EXIT_OK, CliError
from sdc_remediation.infra.cli.render import print_json, wants_json
from sdc_remediation.infra.cli.wiring import Operator
from sdc_remediation.lambdas.logic.core.figures import (
    Figure,
    Ratio,
    Report,
    Spread,
    compute,
    since_of,
)
from sdc_remediation.lambdas.models.audit import AuditEntry
from sdc_remediation.lambdas.models.incident import Incident, IncidentState

DEFAULT_SINCE: Final = "30d"
SHOWN: Final = 10
"""Entries of a figure by key (weeks, offenders) the text shows; JSON gives every one."""
AUDIT_KEY: Final = "audit"
INCIDENT_KEY: Final = "incident"


def period(value: str) -> str:
    """An argparse type: `30d`, `12h`, ... (checked against now when the command runs)."""
    try:
        since_of(value, datetime.now(UTC))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return value


def write_log(
    path: Path, chains: Mapping[str, Sequence[AuditEntry]], incidents: Iterable[Incident]
) -> Path:
    """The audit entries and incident records as `sdc report --from` reads them."""
    with path.open("w", encoding="utf-8") as out:
        for entries in chains.values():
            for entry in entries:
                out.write(json.dumps({AUDIT_KEY: entry.to_record()}, sort_keys=True) + "\n")
        for incident in incidents:
            out.write(json.dumps({INCIDENT_KEY: incident.to_record()}, sort_keys=True) + "\n")
    return path


def read_log(path: Path) -> tuple[dict[str, list[AuditEntry]], dict[str, Incident]]:
    """What `write_log` wrote; CliError naming the line that does not read."""
    chains: dict[str, list[AuditEntry]] = {}
    incidents: dict[str, Incident] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise CliError(f"cannot read {path}: {err.strerror or err}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            if AUDIT_KEY in item:
                entry = AuditEntry.from_record(item[AUDIT_KEY])
                chains.setdefault(entry.incident_id, []).append(entry)
            elif INCIDENT_KEY in item:
                incident = Incident.from_record(item[INCIDENT_KEY])
                incidents[incident.incident_id] = incident
            else:
                raise ValueError(f"neither {AUDIT_KEY!r} nor {INCIDENT_KEY!r}")
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            raise CliError(
                f"{path}:{number}: not an audit entry or incident record: {err}"
            ) from None
    return chains, incidents


def cmd_report(op: Operator, args: argparse.Namespace) -> int:
    now = datetime.now(UTC)
    if args.log is not None:
        chains, incidents = read_log(args.log)
        source = str(args.log)
        if args.since is None and chains:
            now = max(datetime.fromisoformat(e.at) for c in chains.values() for e in c)
    else:
        chains = op.chains().all_chains()
        incidents = {i.incident_id: i for i in op.queries().in_states(IncidentState)}
        source = f"{op.deployment.audit_table} ({op.deployment.source})"
    since = None if args.all else since_of(args.since or DEFAULT_SINCE, now)
    report = compute(chains, incidents, until=now, since=since)
    if wants_json(args):
        print_json({"source": source, **report.to_json()})
    else:
        print(render_report(report, source))
    return EXIT_OK


def _value(value: Any) -> str:
    if isinstance(value, Spread):
        if not value.n:
            return "none"
        return f"median {_amount(value.median)}, p90 {_amount(value.p90)} (n={value.n})"
    if isinstance(value, Ratio):
        shown = "n/a" if value.value is None else f"{value.value:.1%}"
        return f"{shown} ({value.numerator} of {value.denominator})"
    if isinstance(value, dict):
        if not value:
            return "none"
        if len(value) > SHOWN:
            first = dict(list(value.items())[:SHOWN])
            return f"{_value(first)}, and {len(value) - SHOWN} more (--output json lists all)"
        return ", ".join(
            f"{k} {len(v) if isinstance(v, list) else v}"
            + (
                f" ({', '.join(v[:3])}{', ...' if len(v) > 3 else ''})"
                if isinstance(v, list)
                else ""
            )
            for k, v in value.items()
        )
    return str(value)


def _amount(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:g}"


def render_report(report: Report, source: str) -> str:
    since = report.since.isoformat(timespec="seconds") if report.since else "the beginning"
    lines = [
        f"FLEET FIGURES from {source}",
        f"incidents opened from {since} to {report.until.isoformat(timespec='seconds')}",
        "(durations in seconds; each figure's definition: docs/figures.md)",
        "",
    ]
    width = max(len(f.key) for f in Figure)
    lines += [f"  {f.key:<{width}}  {_value(report.values[f])}" for f in Figure]
    return "\n".join(lines)
