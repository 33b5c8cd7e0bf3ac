"""What the commands print. Each page is a list of sections put into text by the one renderer
the approval card uses (`sdc_remediation.lambdas.wording.cards.render`): `show` prints some of the card's own
sections between its pages' sections. `--output json` (`-o json`, `--json`) prints the same facts
as data."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from sdc_remediation.infra.cli.approvals import ExecutionEnded
from sdc_remediation.lambdas.logic.core.audit import ChainVerdict
from sdc_remediation.lambdas.models.audit import AuditEntry
from sdc_remediation.lambdas.models.guard import ClusterHold, HoldKind
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.payloads import Decision
from sdc_remediation.lambdas.wording.card_lines import approvals_line, deadline_words
from sdc_remediation.lambdas.wording.cards import ApprovalCard, Section, render


class Output(StrEnum):
    """What a command prints (`--output`, `-o`): text for people, JSON for machines."""

    TEXT = "text"
    JSON = "json"


def wants_json(args: argparse.Namespace) -> bool:
    """Whether the command was asked for JSON (`--output json`, `-o json` or `--json`)."""
    return bool(args.output is Output.JSON)


# -- status -----------------------------------------------------------------------------------


def render_status(report: dict[str, Any], source: str, now: datetime, held: timedelta) -> str:
    """The status screen; `held`: the window of the incidents held on arrival it counts."""
    return render(
        [
            _status_header(report, source, now),
            _open_incidents(report["open"]),
            _approvals_waiting(report["approvals_waiting"]),
            _active_holds(report["storm_holds"], report["held_recently"], held),
            _last_failures(report["last_failures"], report["dead_letter_queues"]),
            _kept(report["kept_for_reconciliation"]),
        ]
    )


def _status_header(report: dict[str, Any], source: str, now: datetime) -> Section:
    pause = report["pause_switch"]
    if pause["parameter"] is None:
        switch = "none in this deployment's outputs"
    elif pause["error"]:
        switch = f"{pause['parameter']} unreadable ({pause['error']}): the functions hold"
    else:
        state = "PAUSED: new incidents are held" if pause["paused"] else "running"
        switch = f"{pause['parameter']} = {pause['value']} ({state})"
    dry_run = report["dry_run"]
    if dry_run is None:
        dry_run_text = "unknown (no DryRun output)"
    else:
        dry_run_text = "on: replacements are only recorded" if dry_run == "true" else "off"
    return Section(
        f"SDC remediation, {source}, at {when(now.isoformat())}",
        fields(("pause switch", switch), ("dry run", dry_run_text)),
    )


def _open_incidents(opened: dict[str, list[str]]) -> Section:
    total = sum(len(ids) for ids in opened.values())
    return Section(
        f"OPEN INCIDENTS ({total})",
        ["  " + ", ".join(f"{state} {len(ids)}" for state, ids in opened.items())],
    )


def _approvals_waiting(waiting: list[dict[str, Any]]) -> Section:
    return Section(
        f"APPROVALS WAITING ({len(waiting)})",
        [
            f"  {w['incident_id']}  waiting {age(w['waiting_seconds'])}  "
            + f"recommends: {w.get('tier') or 'not judged yet'}  "
            + ("card_undelivered: nobody was notified  " if w.get("card_undelivered") else "")
            + f"decide by: {w.get('deadline') or 'unknown'}{_left(w.get('seconds_left'))}  "
            + f"(sdc show {w['incident_id']})"
            for w in waiting
        ]
        or ["  none"],
    )


def _left(seconds: int | None) -> str:
    """How long an approval has left, or that it expired."""
    if seconds is None:
        return ""
    return f" (in {age(seconds)})" if seconds >= 0 else " (EXPIRED)"


def _active_holds(
    storms: list[dict[str, Any]], held: list[dict[str, Any]], window: timedelta
) -> Section:
    lines = [
        f"  storm hold {h['hold_id']} on {h['cluster_name']} since {when(h['created_at'])}, "
        f"{len(h['instances'])} instances (sdc show {h['hold_id']})"
        for h in storms
    ] or ["  no storm hold"]
    kinds: dict[str, int] = {}
    for item in held:
        kind = str(item["kind"])
        if item["kind"] == HoldKind.MUTED and item["mute_rule"]:
            kind = f"muted by {item['mute_rule']}"
        kinds[kind] = kinds.get(kind, 0) + 1
    hours = int(window.total_seconds() // 3600)
    lines.append(
        f"  held on arrival in the last {hours} h: {len(held)}"
        + (" (" + ", ".join(f"{k}: {n}" for k, n in sorted(kinds.items())) + ")" if held else "")
    )
    return Section("ACTIVE HOLDS", lines)


def _kept(kept: list[dict[str, Any]]) -> Section:
    return Section(
        f"NODES KEPT FOR RECONCILIATION ({len(kept)})",
        [
            f"  {k['incident_id']}  {k['instance_id']} cordoned since {when(k['since'])}: a "
            "reboot or replacement may still be running (sdc reconcile)"
            for k in kept
        ]
        or ["  none"],
    )


def _last_failures(failures: list[dict[str, Any]], queues: dict[str, int | None]) -> Section:
    lines = [
        f"  {f['incident_id']}  failed {when(f['closed_at'])}  {f['why']}" for f in failures
    ] or ["  no failed incident"]
    if queues:
        lines.append(
            "  dead-letter queues: "
            + ", ".join(
                f"{label} {'?' if depth is None else depth}" for label, depth in queues.items()
            )
        )
    return Section("LAST FAILURES", lines)


def age(seconds: int | None) -> str:
    """`45s`, `12m`, `3h05m`, `2d04h`."""
    if seconds is None:
        return "?"
    if seconds < 60:
        return f"{seconds}s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if hours < 1:
        return f"{minutes}m"
    if days < 1:
        return f"{hours}h{minutes % 60:02d}m"
    return f"{days}d{hours % 24:02d}h"


# -- show -------------------------------------------------------------------------------------


def render_incident(
    incident: Incident,
    card: ApprovalCard,
    entries: Sequence[AuditEntry],
    verdict: ChainVerdict,
) -> str:
    """The incident's own fields, then the approval card itself, section by section as the
    notice words it (`ApprovalCard.sections`: one code path), then the decision and what came
    of it, and the audit trail."""
    sections = [
        Section(
            f"Incident {incident.incident_id}",
            fields(
                ("state", incident.state.value),
                ("cluster", incident.cluster_name),
                ("instance", incident.instance_id),
                ("opened", when(incident.created_at)),
                ("updated", when(incident.updated_at)),
                ("closed", when(incident.closed_at) if incident.closed_at else None),
                (
                    "decide by",
                    deadline_words(incident.approval_deadline)
                    if incident.approval_deadline
                    else None,
                ),
                ("outcome", incident.outcome),
                ("reason", incident.reason),
                ("execution", incident.execution_arn),
            ),
        ),
        *card.sections,
        Section("DECISION", _decision_lines(incident)),
        *([Section("REBOOT", _reboot_lines(incident))] if incident.reboot else []),
        Section("REPLACEMENT", _replacement_lines(incident)),
    ]
    if incident.error:
        error = json.dumps(incident.error.to_record(), sort_keys=True)
        sections.append(Section("ERROR", [f"  {error}"]))
    if incident.state is IncidentState.AWAITING_APPROVAL and not incident.decision:
        sections.append(_to_decide(incident.incident_id, card))
    sections.append(_audit_trail(entries, verdict))
    return render(sections)


def _to_decide(incident_id: str, card: ApprovalCard) -> Section:
    """The commands of the decisions the card offers, one a line to copy, and the console's
    way."""
    arn = card.approval_state_machine_arn or "(APPROVAL_STATE_MACHINE_ARN not configured)"
    return Section(
        "TO DECIDE",
        [
            *(f'  sdc {decision} {incident_id} -m "<why>"' for decision in card.inputs),
            f"  or start an execution of {arn}",
            f"  with the input {json.dumps(card.inputs[Decision.APPROVE])}",
        ],
    )


def render_hold(hold: ClusterHold, entries: Sequence[AuditEntry], verdict: ChainVerdict) -> str:
    sections = [
        Section(
            f"Storm hold {hold.hold_id}",
            fields(
                ("state", "active" if hold.active else "reset"),
                ("cluster", hold.cluster_name),
                ("started", when(hold.created_at)),
                ("reason", hold.reason),
                ("instances", ", ".join(hold.instances)),
                ("reset", when(hold.lifted_at) if hold.lifted_at else None),
                ("reset by", hold.lifted_by),
                ("comment", hold.comment),
            ),
        )
    ]
    if hold.active:
        sections.append(
            Section(
                "TO LIFT IT (once the job or recipe is fixed)",
                [f'  sdc reset {hold.hold_id} -m "<why>"'],
            )
        )
    sections.append(_audit_trail(entries, verdict))
    return render(sections)


def _audit_trail(entries: Sequence[AuditEntry], verdict: ChainVerdict) -> Section:
    return Section(
        f"AUDIT TRAIL ({len(entries)} entries)",
        [
            *(f"  {e.seq:>3}  {when(e.at)}  {e.action:<24} {e.actor}" for e in entries),
            "",
            f"CHAIN: {'verified' if verdict.ok else 'BROKEN'}, {describe(verdict)}",
        ],
    )


def _decision_lines(incident: Incident) -> list[str]:
    decision = incident.decision
    approvals = approvals_line(incident)
    if not decision:
        return [f"  none yet; approvals {approvals}"] if approvals else ["  none yet"]
    return [
        f"  {decision.decision} at {when(decision.at)}",
        f"  by {decision.who}",
        f"  approval execution {decision.approval_execution_arn}",
        *([f"  approvals {approvals}"] if approvals else []),
        f"  delivery: {decision.delivery or 'delivered'}",
        f"  comment: {decision.comment or '(none)'}",
    ]


def _reboot_lines(incident: Incident) -> list[str]:
    reboot = incident.reboot
    if reboot is None:
        return []
    decision = reboot.decision
    dry_run = " (dry run: nothing was rebooted)" if reboot.dry_run else ""
    return [
        f"  status: {reboot.status}{dry_run}, through {reboot.path}",
        f"  decided by {decision.who if decision else None} "
        f"at {when(decision.at if decision else None)}",
        f"  comment: {(decision and decision.comment) or '(none)'}",
        f"  node status: {reboot.node_status or 'unknown'}",
    ]


def _replacement_lines(incident: Incident) -> list[str]:
    replacement = incident.replacement
    if not replacement:
        return ["  none"]
    dry_run = " (dry run: nothing was replaced)" if replacement.dry_run else ""
    return [
        f"  status: {replacement.status}{dry_run}",
        f"  new instance: {replacement.new_instance_id or 'not yet known'}",
    ]


def public_record(incident: Incident) -> dict[str, Any]:
    """The incident as stored, without the task token: whoever holds it could answer the
    waiting approval without going through the approval state machine."""
    record = incident.to_record()
    record.pop("task_token", None)
    return record


# -- decisions and chains ---------------------------------------------------------------------


def render_decision(
    incident_id: str, decision: Decision, ended: ExecutionEnded, timeout: float
) -> str:
    if ended.status == "SUCCEEDED":
        after = {
            Decision.APPROVE: "the remediation replaces the node next",
            Decision.REBOOT: "the node is rebooted, health-checked again and released if that "
            "passes (if not, you are asked again)",
            Decision.REJECT: "the incident closes as rejected; nothing is replaced",
            Decision.RESET: "the storm hold is lifted; new alarms act again",
            Decision.PROCEED: "a new job-level incident health-checks its nodes (sdc incidents "
            "lists it)",
        }[decision]
        headline = f"{decision} accepted for {incident_id}: {after}"
        output = ended.output if isinstance(ended.output, dict) else {}
        if output.get("waiting"):
            headline = (
                f"{decision} recorded for {incident_id}: {output.get('approvals')} approvals; "
                "nothing acts until another approver agrees"
            )
    elif ended.status == "FAILED":
        headline = f"{decision} refused for {incident_id}: {ended.reason}"
    elif ended.status == "RUNNING":
        headline = f"the approval execution is still running after {timeout:g} s"
    else:
        headline = f"the approval execution ended {ended.status}: {ended.reason}"
    return render(
        [
            Section(
                headline,
                fields(
                    ("approval execution", ended.arn),
                    ("approved by", _output(ended, "principal")),
                    ("approvals", _output(ended, "approvals")),
                    ("follow with", f"sdc show {incident_id}"),
                ),
            )
        ]
    )


def _output(ended: ExecutionEnded, key: str) -> Any:
    return ended.output.get(key) if isinstance(ended.output, dict) else None


def verdict_record(verdict: ChainVerdict) -> dict[str, Any]:
    return {
        "ok": verdict.ok,
        "checked": verdict.checked,
        "broken_seq": verdict.broken_seq,
        "reason": verdict.reason,
    }


def describe(verdict: ChainVerdict) -> str:
    if verdict.ok:
        return f"{verdict.checked} entries"
    return f"at seq {verdict.broken_seq}: {verdict.reason} ({verdict.checked} entries before it verify)"


# -- building blocks --------------------------------------------------------------------------


def fields(*pairs: tuple[str, Any]) -> list[str]:
    """`name  value` lines, the values aligned; a pair without a value is left out."""
    shown = [(name, value) for name, value in pairs if value not in (None, "")]
    width = max((len(name) for name, _ in shown), default=0)
    return [f"  {name:<{width}}  {value}" for name, value in shown]


def when(value: Any) -> str:
    """An ISO timestamp as `YYYY-MM-DD HH:MM:SSZ` (UTC); anything else unchanged."""
    if not value:
        return "-"
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def print_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    rows = [headers, *rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(headers))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True, default=str))
