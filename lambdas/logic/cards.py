"""What people read: the approval card and the closing notice (plain text for SNS e-mail).

The approval card carries the evidence (metric, step, ranks, verdicts, suspect window), the deep
health check status, the advice from the decision table, what to do, and the exact JSON to paste
into the approval state machine. It never carries the task token: that stays in the incident
record, readable only by the functions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lambdas.logic import evidence, telemetry
from lambdas.logic.lifecycle import MAX_REBOOTS, reboots_done
from lambdas.logic.recommendation import Recommendation
from lambdas.models.guard import ClusterHold, HoldKind, PastIncident
from lambdas.models.hyperpod import NodeRecovery
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


def approval_card(
    incident: Incident,
    settings: Settings,
    advice: Recommendation,
    history: Sequence[PastIncident] = (),
) -> Card:
    rebooted = reboots_done(incident) > 0
    verb = "replacing" if rebooted else "rebooting or replacing"
    subject = _subject(f"SDC: approve {verb} {incident.instance_id} on {incident.cluster_name}?")
    approve = approval_input_json(incident.incident_id, Decision.APPROVE)
    reboot = approval_input_json(incident.incident_id, Decision.REBOOT)
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
        *_recovery_lines(incident),
        "",
        "ISOLATION",
        *isolation_lines(incident),
        "",
        "EVIDENCE",
        *_metric_lines(incident),
        *_alarm_lines(incident),
        *_report_lines(incident),
        "",
        "DEEP HEALTH CHECK",
        *health_lines(incident),
        "",
        "HARDWARE TELEMETRY (the GPU's own counters, from dcgm-exporter)",
        *telemetry_lines(incident),
        "",
        "HISTORY (past incidents of this instance and of its GPUs)",
        *history_lines(history),
        "",
        f"RECOMMENDATION: {advice.advice.value.upper()}",
        *(f"  - {reason}" for reason in advice.reasons),
        *resume_lines(incident),
        "",
        "WHAT TO DO",
        "  Review the evidence, then start an execution of the approval state machine",
        f"  {arn or '(APPROVAL_STATE_MACHINE_ARN not configured)'}",
        *([f"  console: {link}"] if (link := console_link(arn)) else []),
        "  with one of these inputs (replace the comment with your reason):",
        "",
        *reboot_choice_lines(incident, reboot),
        "  To approve replacing the node (a new instance; this one's volumes are destroyed, tens",
        "  of minutes):",
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


def _recovery_lines(incident: Incident) -> list[str]:
    if incident.node_recovery != NodeRecovery.AUTOMATIC:
        return []
    return [
        "  NodeRecovery is Automatic: a failed deep health check makes HyperPod replace this",
        "  node by itself. Before any replacement the pipeline re-checks the instance; if it",
        "  is already gone the incident closes as replaced_by_hyperpod.",
    ]


def isolation_lines(incident: Incident) -> list[str]:
    """Whether the suspect node is kept free of new work while the approval is pending."""
    record = incident.isolation or {}
    nodes = record.get("nodes") or {}
    isolated = [
        f"  cordoned and tainted {record.get('taint')} on node {node.get('node_name')} "
        f"(instance {instance_id}, EKS cluster {record.get('eks_cluster')})"
        + (f"; {node['reason']}" if node.get("reason") else "")
        for instance_id, node in sorted(nodes.items())
        if node.get("state") == "isolated"
    ]
    if record.get("state") == "isolated":
        return isolated
    reason = record.get("reason") or "no isolation was recorded for this incident"
    return [
        f"  WARNING: the node is NOT isolated: {reason}.",
        "  A restarted job may be scheduled onto it while this approval is pending.",
        *isolated,
    ]


def release_lines(incident: Incident) -> list[str]:
    """The closing notice: what became of the node's cordon and taint."""
    record = incident.isolation or {}
    lines = []
    eks = record.get("eks_cluster")
    for instance_id, node in sorted((record.get("nodes") or {}).items()):
        name = node.get("node_name")
        state = node.get("state")
        if state == "released":
            lines.append(f"Isolation: {name} ({instance_id}) uncordoned, taint removed.")
        elif state in ("gone", "kept"):
            lines.append(f"Isolation: {name or instance_id}: {node.get('reason')}.")
        elif state in ("isolated", "pending", "release_failed"):
            lines.append(
                f"WARNING: {name} ({instance_id}) is still cordoned and tainted "
                f"{record.get('taint')}: {node.get('reason') or 'not released'}. Lift it by "
                f"hand (EKS cluster {eks}): kubectl taint node {name} "
                f"{str(record.get('taint', '')).split('=')[0]}:NoSchedule- && "
                + (f"kubectl uncordon {name}" if node.get("cordoned_by_us") else "leave the cordon")
            )
    return lines


def telemetry_lines(incident: Incident) -> list[str]:
    """What the GPU's hardware counters showed when the approval was requested: each signal,
    or one line saying the panel was clean (which does not clear the node) or why it could not
    be read; and the dashboard."""
    return [f"  {line}" for line in telemetry.card_lines(incident.telemetry)]


def history_lines(history: Sequence[PastIncident]) -> list[str]:
    if not history:
        return ["  none: no earlier incident for this instance or these GPUs"]
    lines = []
    for past in history:
        gpus = f", GPUs {', '.join(past.gpu_uuids)}" if past.gpu_uuids else ""
        held = f", held ({past.hold_kind})" if past.hold_kind else ""
        lines.append(
            f"  {past.incident_id}: {past.state}{held}, closed {past.closed_at}, "
            f"instance {past.instance_id}{gpus}"
        )
    return lines


def held_notice(incident: Incident) -> Card:
    """A new incident recorded as held (paused, muted, or the blast-radius guard is full)."""
    hold = incident.hold or {}
    subject = _subject(
        f"SDC: incident on {incident.target} held ({hold.get('kind')}), nothing acts"
    )
    lines = [
        f"Incident {incident.incident_id} on cluster {incident.cluster_name} was recorded as "
        "HELD: no health check, no approval request, no replacement.",
        f"Why: {hold.get('reason') or incident.reason}",
        f"Metrics: {', '.join(incident.metrics) or 'none'}",
        *_report_lines(incident),
        "",
    ]
    if hold.get("kind") == HoldKind.PAUSED:
        lines.append("Unpause (set the pause switch to false); the next alarm acts again.")
    elif hold.get("kind") == HoldKind.MUTED:
        rule = hold.get("mute_rule")
        lines += [
            f"The alarm's actions are muted by CloudWatch alarm mute rule {rule} "
            f"({hold.get('mute_rule_arn')}) until {hold.get('mute_window_end')}.",
            "This pipeline is one of those actions: a muted alarm is held, as if paused.",
            "This incident stays held; after the mute window the next alarm on this node acts.",
            "If the mute is wrong, end it: CloudWatch console, Alarms, Mute rules, or",
            f"  aws cloudwatch delete-alarm-mute-rule --alarm-mute-rule-name {rule}",
        ]
    else:
        lines.append(
            "The cluster already has as many open incidents as its blast-radius guard allows. "
            "When they close, the next alarm on this node opens an incident that acts."
        )
    lines.append("The audit log holds this incident's record.")
    return Card(subject, "\n".join(lines))


def storm_notice(hold: ClusterHold, settings: Settings, open_ids: Sequence[str]) -> Card:
    """The one notification of a storm hold: why, what is held, how to reset it."""
    reset = json.dumps(
        {"incident_id": hold.hold_id, "decision": "reset", "comment": COMMENT_PLACEHOLDER}
    )
    arn = settings.approval_state_machine_arn
    subject = _subject(f"SDC: storm on {hold.cluster_name}: every incident held")
    lines = [
        f"Storm hold {hold.hold_id} on cluster {hold.cluster_name}.",
        f"Why: {hold.reason}.",
        f"Instances flagged: {', '.join(hold.instances)}",
        "",
        "Everything in this cluster is held: new incidents are recorded as held (without a",
        "notification each), open incidents stop before their next health check, approval",
        "request or replacement.",
        f"Incidents open now: {', '.join(open_ids) or 'none'}",
        "",
        "Fix the job or recipe first. Then reset the hold, the same way as an approval: start an",
        f"execution of the approval state machine {arn or '(APPROVAL_STATE_MACHINE_ARN not set)'}",
        *([f"  console: {link}"] if (link := console_link(arn)) else []),
        "with this input (replace the comment with your reason):",
        f"    {reset}",
        f'or from a shell: sdc reset {hold.hold_id} -m "<why>"',
        "The reset is audited; flags from before it no longer count towards a storm.",
    ]
    return Card(subject, "\n".join(lines))


def hold_lifted_notice(hold: ClusterHold) -> Card:
    subject = _subject(f"SDC: storm hold on {hold.cluster_name} reset")
    lines = [
        f"Storm hold {hold.hold_id} on cluster {hold.cluster_name} was reset at {hold.lifted_at}",
        f"by {hold.lifted_by}: {hold.comment or 'no comment'}.",
        "New alarms on this cluster open incidents that act again.",
    ]
    return Card(subject, "\n".join(lines))


def close_notice(incident: Incident) -> Card:
    dry_run = bool((incident.replacement or incident.reboot or {}).get("dry_run"))
    label = f"{incident.state}{' (dry run)' if dry_run else ''}"
    subject = _subject(f"SDC: incident on {incident.target} closed: {label}")
    replacement = incident.replacement or {}
    where = (
        f"instances {', '.join(incident.instance_ids) or 'none'}"
        if incident.is_job
        else f"instance {incident.instance_id}"
    )
    lines = [
        f"Incident {incident.incident_id} closed as {label}.",
        f"Cluster {incident.cluster_name}, {where}.",
        f"Metrics: {', '.join(incident.metrics) or 'none'}",
        f"Deep health check: {health_summary(incident)}",
        *_reboot_lines(incident),
        *_node_lines(incident),
        *release_lines(incident),
    ]
    if incident.is_job:
        lines.append(
            "Ambiguous alarm (no rank named for certain): the involved nodes were health-checked; "
            "no replacement is proposed. A node that failed its check is named above."
        )
    lines += resume_lines(incident)
    if incident.hold:
        lines.append(f"Held: {incident.hold.get('reason')}")
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
        verb = "rebooted" if incident.reboot and not replacement else "replaced"
        lines.append(f"DRY RUN: would have {verb} {incident.instance_id}; nothing was {verb}.")
    if incident.reason:
        lines.append(f"Reason: {incident.reason}")
    if incident.error:
        lines.append(f"Error: {json.dumps(incident.error, sort_keys=True)[:2000]}")
    lines.append("The audit log holds every step of this incident.")
    return Card(subject, "\n".join(lines))


def _reboot_lines(incident: Incident) -> list[str]:
    reboot = incident.reboot
    if not reboot:
        return []
    decision = reboot.get("decision") or {}
    return [
        f"Reboot: {reboot.get('status')} (through {reboot.get('path')}), decided by "
        f"{decision.get('approval_execution_arn')} ({decision.get('comment') or 'no comment'}); "
        f"node status after it: {reboot.get('node_status') or 'unknown'}",
        *(
            [f"Deep health check before the reboot: {_check_summary(before)}"]
            if (before := (incident.health_check or {}).get("before_reboot"))
            else []
        ),
    ]


def _node_lines(incident: Incident) -> list[str]:
    nodes = (incident.health_check or {}).get("nodes") or {}
    return [
        f"  {instance_id}: {_RESULTS.get(node.get('result'), str(node.get('result')))}; "
        f"status {node.get('status')}" + (f" ({node['reason']})" if node.get("reason") else "")
        for instance_id, node in sorted(nodes.items())
    ]


_RESULTS: dict[Any, str] = {
    None: "still running",
    "passed": "PASSED",
    "failed": "FAILED",
    "node_gone": "ended with the node gone (HyperPod may have replaced it)",
    "not_run": "not run",
}


def health_lines(incident: Incident) -> list[str]:
    """The deep health check; after a reboot, the check after it and the one before."""
    lines = [f"  {health_summary(incident)}"]
    before = (incident.health_check or {}).get("before_reboot")
    if (incident.health_check or {}).get("after_reboot"):
        lines = [f"  after the reboot: {health_summary(incident)}"]
        if before:
            lines.append(f"  before the reboot: {_check_summary(before)}")
    return lines


def reboot_choice_lines(incident: Incident, reboot_input: str) -> list[str]:
    """The reboot choice, or why it is no longer offered."""
    if reboots_done(incident) >= MAX_REBOOTS:
        return [
            "  A reboot is no longer offered: the node was rebooted in this incident and its",
            "  deep health check ran again (above).",
            "",
        ]
    return [
        "  To reboot the node (same instance and volumes, minutes; it stays isolated, is",
        "  health-checked again and released if that passes; if not, you are asked again):",
        f"    {reboot_input}",
        "",
    ]


def health_summary(incident: Incident) -> str:
    check = incident.health_check
    if not check:
        return "not run"
    if incident.is_job:
        return str(check.get("status") or "unknown")
    return _check_summary(check)


def _check_summary(check: dict[str, Any]) -> str:
    checks = ", ".join(check.get("checks") or []) or "none"
    if not check.get("started"):
        reason = check.get("reason") or "no reason recorded"
        return f"not started ({reason}); node status {check.get('status')}"
    result = check.get("result")
    state = _RESULTS.get(result, str(result))
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


def resume_lines(incident: Incident) -> list[str]:
    """One line: the checkpoint to resume the job from (lambdas.logic.resume chose it when the
    report arrived). Of several reports, the one whose suspect window starts first decides: a
    checkpoint before it is before every other window too."""
    found = [r for r in evidence.reports(incident) if isinstance(r.get("resume"), dict)]
    if not found:
        return []
    if any(r["resume"].get("before_step") is None for r in found):
        return [
            "  Resume from: unknown: a report has no suspect window to place a checkpoint before"
        ]
    report = min(found, key=lambda r: r["resume"]["before_step"])
    resume, window = report["resume"], report.get("suspect_window") or ["?", "?"]
    checkpoint = resume.get("checkpoint")
    if checkpoint:
        where = checkpoint.get("location") or "location not reported"
        return [
            f"  Resume from: checkpoint at step {checkpoint.get('step')} ({where}), saved before "
            f"the suspect window [{window[0]}, {window[1]}]; tags: "
            f"last_audit_pass {_v(checkpoint.get('last_audit_pass'))}, "
            f"last_weight_check_pass {_v(checkpoint.get('last_weight_check_pass'))}"
        ]
    skipped = resume.get("unverified") or []
    verified = "verified " if skipped else ""
    why = (
        f" (skipped, their tags do not show them verified: steps {', '.join(map(str, skipped))})"
        if skipped
        else ""
    )
    return [
        f"  Resume from: no {verified}checkpoint saved before step {resume['before_step']} is "
        f"known{why}: resume from an earlier verified checkpoint outside this job's report, or "
        "from the start"
    ]


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
