"""What people read: the approval card and the closing notice (plain text for SNS e-mail).

The approval card carries the evidence (metric, step, ranks, verdicts, suspect window), the deep
health check status, the advice from the decision table, what to do, and the exact JSON to paste
into the approval state machine. It never carries the task token: that stays in the incident
record, readable only by the functions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from lambdas.logic import evidence
from lambdas.logic.recommendation import Recommendation
from lambdas.models.incident import Incident
from lambdas.models.payloads import Decision
from lambdas.models.settings import Settings
from trainer_emitter.contract import Metric

SUBJECT_LIMIT = 100  # SNS: at most 100 printable ASCII characters
COMMENT_PLACEHOLDER = "<why>"
"""The same placeholder the waiting state's `approval_input` hint shows."""


@dataclass(frozen=True, slots=True)
class Card:
    subject: str
    text: str


def approval_input(incident_id: str, decision: Decision) -> dict[str, str]:
    """The approval state machine's input, exactly as it is to be pasted."""
    return {"incident_id": incident_id, "decision": decision.value, "comment": COMMENT_PLACEHOLDER}


def approval_input_json(incident_id: str, decision: Decision) -> str:
    return json.dumps(approval_input(incident_id, decision))


def console_link(state_machine_arn: str | None) -> str | None:
    """The Step Functions console page of a state machine, from its ARN."""
    parts = (state_machine_arn or "").split(":")
    if len(parts) < 7 or parts[2] != "states":
        return None
    region = parts[3]
    return (
        f"https://{region}.console.aws.amazon.com/states/home?region={region}"
        f"#/statemachines/view/{state_machine_arn}"
    )


def approval_card(incident: Incident, settings: Settings, advice: Recommendation) -> Card:
    subject = _subject(f"SDC: approve replacing {incident.instance_id} on {incident.cluster_name}?")
    approve = approval_input_json(incident.incident_id, Decision.APPROVE)
    reject = approval_input_json(incident.incident_id, Decision.REJECT)
    arn = settings.approval_state_machine_arn
    lines = [
        f"Silent data corruption suspected on {incident.instance_id} "
        f"(cluster {incident.cluster_name}).",
        f"Incident: {incident.incident_id}",
        "",
        "NODE",
        f"  instance group: {incident.instance_group or 'unknown'}; "
        f"status when opened: {incident.node_status or 'unknown'}; "
        f"NodeRecovery: {incident.node_recovery or 'unknown'}",
        "",
        "EVIDENCE",
        *_metric_lines(incident),
        *_alarm_lines(incident),
        *_report_lines(incident),
        "",
        "DEEP HEALTH CHECK",
        f"  {health_summary(incident)}",
        "",
        f"RECOMMENDATION: {advice.advice.value.upper()}",
        *(f"  - {reason}" for reason in advice.reasons),
        "",
        "WHAT TO DO",
        "  Review the evidence, then start an execution of the approval state machine",
        f"  {arn or '(APPROVAL_STATE_MACHINE_ARN not configured)'}",
        *([f"  console: {link}"] if (link := console_link(arn)) else []),
        "  with one of these inputs (replace the comment with your reason):",
        "",
        "  To approve replacing the node:",
        f"    {approve}",
        "",
        "  To reject (nothing is replaced):",
        f"    {reject}",
        "",
        "  From a shell:",
        f"    aws stepfunctions start-execution --state-machine-arn {arn or '<approval arn>'} "
        f"--input '{approve}'",
        "",
        "  Without a decision before the approval timeout the incident closes as expired and",
        "  nothing is replaced.",
    ]
    if settings.dry_run:
        lines += ["", "DRY RUN: an approval is recorded as 'would replace'; no node is replaced."]
    return Card(subject, "\n".join(lines))


def close_notice(incident: Incident) -> Card:
    dry_run = bool((incident.replacement or {}).get("dry_run"))
    label = f"{incident.state}{' (dry run)' if dry_run else ''}"
    subject = _subject(f"SDC: incident on {incident.instance_id} closed: {label}")
    replacement = incident.replacement or {}
    lines = [
        f"Incident {incident.incident_id} closed as {label}.",
        f"Cluster {incident.cluster_name}, instance {incident.instance_id}.",
        f"Metrics: {', '.join(incident.metrics) or 'none'}",
        f"Deep health check: {health_summary(incident)}",
    ]
    if incident.decision:
        lines.append(
            f"Decision: {incident.decision.get('decision')} "
            f"({incident.decision.get('comment') or 'no comment'}) "
            f"by {incident.decision.get('approval_execution_arn')}"
        )
    if replacement:
        lines.append(
            f"Replacement: {replacement.get('status')}; "
            f"new instance: {replacement.get('new_instance_id') or 'unknown'}"
        )
    if dry_run:
        lines.append(f"DRY RUN: would have replaced {incident.instance_id}; nothing was replaced.")
    if incident.reason:
        lines.append(f"Reason: {incident.reason}")
    if incident.error:
        lines.append(f"Error: {json.dumps(incident.error, sort_keys=True)[:2000]}")
    lines.append("The audit log holds every step of this incident.")
    return Card(subject, "\n".join(lines))


def health_summary(incident: Incident) -> str:
    check = incident.health_check
    if not check:
        return "not run"
    checks = ", ".join(check.get("checks") or []) or "none"
    if not check.get("started"):
        reason = check.get("reason") or "no reason recorded"
        return f"not started ({reason}); node status {check.get('status')}"
    result = check.get("result")
    state = {
        None: "still running",
        "passed": "PASSED",
        "failed": "FAILED",
        "node_gone": "ended with the node gone (HyperPod may have replaced it)",
    }.get(result, str(result))
    return f"{checks}: {state}; node status {check.get('status')}"


def _metric_lines(incident: Incident) -> list[str]:
    lines = []
    for name in incident.metrics:
        try:
            description = Metric(name).description
        except ValueError:
            description = ""
        lines.append(f"  metric {name}: {description}".rstrip())
    return lines or ["  metric: none recorded"]


def _alarm_lines(incident: Incident) -> list[str]:
    return [
        f"  alarm {a.get('alarm_name')} at {a.get('state_at')}: {a.get('reason')}"
        for a in evidence.alarms(incident)
    ]


def _report_lines(incident: Incident) -> list[str]:
    found = evidence.reports(incident)
    if not found:
        return ["  no SDC report stored for this instance (the metric alone names no rank)"]
    lines = []
    for report in found:
        lines += [
            f"  report {report.get('report_id')} (job {report.get('job_name') or 'unknown'}, "
            f"emitted {report.get('emitted_at')})",
            f"    step {_v(report.get('step'))}, check {_v(report.get('check'))}, "
            f"ambiguous: {'yes' if report.get('ambiguous') else 'no'}",
            f"    ranks on this instance: {_v(report.get('ranks'))} "
            f"(role {_v(report.get('role'))})",
            *_suspect_lines(report),
            f"    mismatched pairs: {_v(report.get('mismatched_pairs'))}; "
            f"culprits: {_v(report.get('culprits'))}; "
            f"non-finite: {_v(report.get('nonfinite'))}; "
            f"weight suspects: {_v(report.get('weight_suspects'))}",
            *_verdict_lines(report),
            f"    suspect window: steps {_window(report.get('suspect_window'))}; "
            f"last audit pass: {_v(report.get('last_audit_pass'))}; "
            f"last weight check pass: {_v(report.get('last_weight_check_pass'))}",
        ]
        if report.get("errors"):
            lines.append(f"    report errors: {'; '.join(report['errors'])}")
    return lines


def _suspect_lines(report: dict[str, Any]) -> list[str]:
    return [
        f"    rank {s.get('rank')}: {s.get('role')}, GPU {_v(s.get('gpu_uuid'))}, "
        f"node {_v(s.get('node_name'))}"
        + (f" ({'; '.join(s['reasons'])})" if s.get("reasons") else "")
        for s in report.get("suspects") or []
    ]


def _verdict_lines(report: dict[str, Any]) -> list[str]:
    verdicts = report.get("verdicts") or []
    if not verdicts:
        return ["    verdicts: none"]
    return [
        f"    verdict: pair {v.get('pair')}, third rank {_v(v.get('third'))} "
        f"-> suspect {_v(v.get('suspect'))}: {v.get('kind')}"
        for v in verdicts
    ]


def _window(window: Any) -> str:
    if not window:
        return "unknown"
    return f"{window[0]}-{window[1]}"


def _v(value: Any) -> str:
    if value is None or value == []:
        return "none"
    return str(value)


def _subject(text: str) -> str:
    ascii_only = text.encode("ascii", "replace").decode("ascii")
    return ascii_only[:SUBJECT_LIMIT]
