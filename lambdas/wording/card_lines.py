"""The lines cards and notices are made of (lambdas/wording/cards.py puts them in order).
They read the incident record only: nothing here queries, judges or writes.

Each function words one recorded part of an incident (the evidence, the deep health check, the
node's isolation, the checkpoint to resume from, the history), so that part reads the same in
every message that shows it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

from sdc_remediation.lambdas.models.approvals import ApprovalRecord, in_round
from sdc_remediation.lambdas.models.deadline import DEFAULT_TIME_ZONE, ApprovalDeadline
from sdc_remediation.lambdas.models.evidence import (
    HangSummary,
    HardwareEvidence,
    ReportEvidence,
    StragglerSummary,
)
from sdc_remediation.lambdas.models.hardware_alert import AlertStatus, HardwareRule
from sdc_remediation.lambdas.models.health_check import (
    CheckSummary,
    HealthCheckRecord,
    HealthCheckResult,
)
from sdc_remediation.lambdas.models.hyperpod import EventLevel, HyperPodView, NodeRecovery
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.isolation import IsolationState
from sdc_remediation.lambdas.models.quantity import count
from sdc_remediation.lambdas.models.recommendation import Recommendation
from sdc_remediation.lambdas.models.reporter_text import quoted
from sdc_remediation.lambdas.models.resume_point import ResumePoint
from sdc_remediation.lambdas.models.settings import Settings
from sdc_remediation.lambdas.models.telemetry import TelemetryRecord, TelemetryState, span
from trainer_emitter.contract import Check, Metric, Role

_RESULTS: dict[Any, str] = {
    None: "still running",
    HealthCheckResult.PASSED: "PASSED",
    HealthCheckResult.FAILED: "FAILED",
    HealthCheckResult.NODE_GONE: "ended with the node gone (HyperPod may have replaced it)",
    HealthCheckResult.NOT_RUN: "not run",
    HealthCheckResult.DONE: "done",
}


# -- the node ---------------------------------------------------------------------------------


def job_node_lines(incident: Incident) -> list[str]:
    """A job-level incident's nodes, and the instances its report named that no check
    confirmed (never acted on)."""
    if not incident.is_job:
        return []
    lines = [f"Nodes ({len(incident.instance_ids)}): {', '.join(incident.instance_ids)}"]
    lines += unconfirmed_lines(incident)
    return lines


def unconfirmed_lines(incident: Incident) -> list[str]:
    """Instances the report named that the checks did not confirm: never acted on."""
    if not incident.unconfirmed:
        return []
    return [
        f"Not confirmed, never acted on ({len(incident.unconfirmed)}):",
        *(f"  {i}: {why}" for i, why in sorted(incident.unconfirmed.items())),
    ]


def recovery_lines(incident: Incident) -> list[str]:
    """What HyperPod's own node recovery may do before anyone decides."""
    if incident.node_recovery != NodeRecovery.AUTOMATIC:
        return []
    return [
        "  NodeRecovery is Automatic: a failed deep health check makes HyperPod replace this",
        "  node by itself. Before any replacement the pipeline re-checks the instance; if it",
        "  is already gone the incident closes as replaced_by_hyperpod.",
    ]


SLURM_RECOVERY_LINES = [
    "  On Slurm, HyperPod itself reboots or replaces a node whose state is set to fail with",
    '  reason "Action:Reboot" or "Action:Replace" (and, with NodeRecovery Automatic, one its',
    "  health checks fail); the pipeline never sets those: it drains with its own reason and,",
    "  once approved, calls BatchRebootClusterNodes / BatchReplaceClusterNodes.",
]


def isolation_lines(incident: Incident) -> list[str]:
    """Whether the suspect node is kept free of new work while the approval is pending."""
    record = incident.isolation
    nodes = record.nodes if record else {}
    isolated = [
        (
            f"  drained on Slurm node {node.node_name} with reason {record.taint!r} (instance "
            f"{instance_id}, controller {record.slurm_controller})"
            if record.slurm_controller and node.cordoned_by_us
            else f"  drained by someone else on Slurm node {node.node_name} (instance "
            f"{instance_id}): reason {node.found_drain!r}, left as it is"
            if record.slurm_controller
            else f"  cordoned and tainted {record.taint} on node {node.node_name} "
            f"(instance {instance_id}, EKS cluster {record.eks_cluster})"
            + (f"; {node.reason}" if node.reason else "")
        )
        for instance_id, node in sorted(nodes.items())
        if record and node.state == IsolationState.ISOLATED
    ]
    if record and record.slurm_controller:
        isolated += SLURM_RECOVERY_LINES
    if record and record.state == IsolationState.ISOLATED:
        return isolated
    reason = (record and record.reason) or "no isolation was recorded for this incident"
    return [
        f"  WARNING: the node is NOT isolated: {reason}.",
        "  A restarted job may be scheduled onto it while this approval is pending.",
        *isolated,
    ]


def isolation_summary(incident: Incident) -> str:
    """Where the node's isolation stands, in a few words: `cordoned: node <name>` (EKS),
    `drained: Slurm node <name>`, or why it is not (the page's one line; the card's paragraph
    is `isolation_lines`)."""
    record = incident.isolation
    if record is None:
        return "not isolated: no isolation recorded"
    held = [
        (instance_id, node)
        for instance_id, node in sorted(record.nodes.items())
        if node.state == IsolationState.ISOLATED
    ]
    if held:
        if record.slurm_controller:
            return "drained: " + ", ".join(
                f"Slurm node {node.node_name or instance_id}"
                + ("" if node.cordoned_by_us else " (by someone else)")
                for instance_id, node in held
            )
        return "cordoned and tainted: " + ", ".join(
            f"node {node.node_name or instance_id}" for instance_id, node in held
        )
    if record.state == IsolationState.RELEASED:
        return "released: " + ("drain lifted" if record.slurm_controller else "uncordoned")
    return f"not isolated: {record.reason or record.cause or record.state}"


def release_lines(incident: Incident) -> list[str]:
    """The closing notice: what became of the node's cordon and taint."""
    record = incident.isolation
    if record is None:
        return []
    lines = []
    for instance_id, node in sorted(record.nodes.items()):
        name = node.node_name
        if node.state == IsolationState.RELEASED and record.slurm_controller:
            lines.append(f"Isolation: Slurm node {name} ({instance_id}) resumed, our drain lifted.")
        elif node.state == IsolationState.RELEASED:
            lines.append(f"Isolation: {name} ({instance_id}) uncordoned, taint removed.")
        elif node.state in (IsolationState.GONE, IsolationState.KEPT):
            lines.append(f"Isolation: {name or instance_id}: {node.reason}.")
        elif record.slurm_controller and node.state in (
            IsolationState.ISOLATED,
            IsolationState.RELEASE_FAILED,
        ):
            lines.append(
                f"WARNING: Slurm node {name} ({instance_id}) is still drained with reason "
                f"{record.taint!r}: {node.reason or 'not released'}. Lift it by hand on the "
                f"controller ({record.slurm_controller}), once the reason is still ours: "
                f"scontrol update nodename={name} state=resume"
            )
        elif node.state in (
            IsolationState.ISOLATED,
            IsolationState.PENDING,
            IsolationState.RELEASE_FAILED,
        ):
            lines.append(
                f"WARNING: {name} ({instance_id}) is still cordoned and tainted "
                f"{record.taint}: {node.reason or 'not released'}. Lift it by "
                f"hand (EKS cluster {record.eks_cluster}): kubectl taint node {name} "
                f"{(record.taint or '').split('=')[0]}:NoSchedule- && "
                + (f"kubectl uncordon {name}" if node.cordoned_by_us else "leave the cordon")
            )
    return lines


def telemetry_lines(incident: Incident) -> list[str]:
    """What the GPU's hardware counters showed when the approval was requested: each signal,
    or one line saying the panel was clean (which does not clear the node) or why it could not
    be read; and the dashboard."""
    return [f"  {line}" for line in telemetry_panel(incident.telemetry)]


def telemetry_panel(record: TelemetryRecord | None) -> list[str]:
    """The card's HARDWARE TELEMETRY paragraph: every signal (or the one-line verdict), earlier
    faults, what was looked at, and the dashboard."""
    if record is None:
        return ["not queried yet (the approval request queries it)"]
    state = TelemetryState(record.state)
    lines = [f.text for f in record.signals] if state is TelemetryState.SIGNAL else [record.summary]
    lines += [f"earlier: {f.text}" for f in record.history]
    lines += list(record.context)
    if state.queried and record.window_start and record.window_end:
        lines.append(
            f"looked at: {record.node}; "
            f"{span(_parse(record.window_start), _parse(record.window_end))} "
            f"in {record.step_seconds} s steps; workspace {record.workspace}"
        )
    if record.not_exported and state is TelemetryState.SIGNAL:  # the others' summary names them
        lines.append(f"not exported for this node: {', '.join(record.not_exported)}")
    if record.dashboard:
        lines.append(f"dashboard: {record.dashboard}")
    return lines


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def hyperpod_panel(view: HyperPodView | None) -> list[str]:
    """The card's HYPERPOD paragraph: each event (time, level, what, the failure), or why
    there are none; and the node's labels."""
    if view is None:
        return ["not asked yet (the approval request asks)"]
    lines: list[str] = []
    if view.events_error:
        lines.append(f"events: {view.events_error}")
    elif not view.events:
        lines.append(f"no events for this instance between {_span(view)}")
    else:
        if view.more_events:
            lines.append("(older events left out; the console lists them all)")
        for event in view.events:
            level = "" if event.level in (None, EventLevel.INFO) else f" [{event.level}]"
            failure = f": {event.failure}" if event.failure else ""
            lines.append(
                f"{_clock(event.at)}{level} {event.description or '(no description)'}{failure}"
            )
    if view.labels:
        lines.append(
            f"node {view.node_name} labels: "
            + ", ".join(f"{key.rsplit('/', 1)[-1]}={value}" for key, value in view.labels)
        )
    elif view.node_name:
        lines.append(f"node {view.node_name} has no HyperPod health labels")
    if view.labels_error:
        lines.append(f"node labels: {view.labels_error}")
    return lines


def _span(view: HyperPodView) -> str:
    if not view.window_start or not view.window_end:
        return "(unknown)"
    return f"{_stamp(view.window_start)} and {_clock(view.window_end)}"


def _stamp(text: str) -> str:
    return datetime.fromisoformat(text).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _clock(text: str) -> str:
    return datetime.fromisoformat(text).astimezone(UTC).strftime("%H:%M:%S UTC")


def history_lines(advice: Recommendation | None) -> list[str]:
    """The node's past incidents, as the recommendation was judged on them."""
    if advice is None:
        return ["  not looked up yet (the approval request looks it up)"]
    if not advice.past:
        return ["  none: no earlier incident for this instance or these GPUs"]
    lines = []
    for past in advice.past:
        gpus = f", GPUs {', '.join(past.gpu_uuids)}" if past.gpu_uuids else ""
        held = f", held ({past.hold_kind})" if past.hold_kind else ""
        lines.append(
            f"  {past.incident_id}: {past.state}{held}, closed {past.closed_at}, "
            f"instance {past.instance_id}{gpus}"
        )
    if advice.past_left_out:
        lines.append(f"  ({advice.past_left_out} older incident(s) left out)")
    return lines


DEADLINE_LABEL: Final = "DECIDE BY: "
"""What starts the card's deadline line (its fourth)."""


def deadline_words(deadline: ApprovalDeadline | None) -> str:
    """When the approval expires, in the approvers' time zone and in UTC:
    "2026-12-06 09:15:04 CET (Europe/Berlin), 2026-12-06 08:15:04 UTC"."""
    if deadline is None:
        return "none recorded (the functions know no approval timeout)"
    utc = deadline.instant.strftime("%Y-%m-%d %H:%M:%S UTC")
    local = deadline.local()
    if local is not None:
        return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()} ({deadline.time_zone}), {utc}"
    if deadline.time_zone != DEFAULT_TIME_ZONE:  # a zone this runtime does not know
        return f"{utc} (time zone {deadline.time_zone} unknown here)"
    return utc


def deadline_line(incident: Incident) -> str:
    """The card's fourth line: when the approval expires and what expiry means."""
    return (
        f"{DEADLINE_LABEL}{deadline_words(incident.approval_deadline)}; "
        "then it closes as expired and nothing is replaced"
    )


RECOMMENDATION_HEADING: Final = "RECOMMENDATION: "
"""What heads the advice in the card and in `sdc show`."""


def recommendation_heading(advice: Recommendation | None) -> str:
    """The card's RECOMMENDATION heading: the tier, in capitals."""
    if advice is None:
        return f"{RECOMMENDATION_HEADING}NOT JUDGED YET"
    return f"{RECOMMENDATION_HEADING}{advice.advice.value.upper()}"


def reason_lines(advice: Recommendation | None) -> list[str]:
    """Why the recommendation advises what it does."""
    if advice is None:
        return ["  - the approval request judges the evidence"]
    return [f"  - {reason}" for reason in advice.reasons]


def advice_summary(advice: Recommendation | None) -> str:
    """The recommendation in a few words (`sdc status`, the chat summary, the drill)."""
    return advice.advice.tier if advice else "not judged yet"


def health_lines(incident: Incident) -> list[str]:
    """The deep health check; after a reboot, the check after it and the one before."""
    lines = [f"  {health_summary(incident)}"]
    check = incident.health_check
    before = check.before_reboot if check else None
    if check and check.after_reboot:
        lines = [f"  after the reboot: {health_summary(incident)}"]
        if before:
            lines.append(f"  before the reboot: {_check_summary(before)}")
    return lines


def health_summary(incident: Incident) -> str:
    check = incident.health_check
    if not check:
        return "not run"
    if incident.is_job:
        return str(check.status or "unknown")
    return _check_summary(check)


def node_lines(incident: Incident) -> list[str]:
    """Each checked node's result (a job-level incident checks several)."""
    nodes = (incident.health_check.nodes if incident.health_check else None) or {}
    return [
        f"  {instance_id}: {_RESULTS.get(node.result, str(node.result))}; "
        f"status {node.status}" + (f" ({node.reason})" if node.reason else "")
        for instance_id, node in sorted(nodes.items())
    ]


def reboot_lines(incident: Incident) -> list[str]:
    """The reboot: how it went, who decided it, and the health check before it."""
    reboot = incident.reboot
    if not reboot:
        return []
    decision = reboot.decision
    before = incident.health_check.before_reboot if incident.health_check else None
    return [
        f"Reboot: {reboot.status} (through {reboot.path}), decided by "
        f"{decision.who if decision else None} "
        f"({(decision and decision.comment) or 'no comment'}); "
        f"node status after it: {reboot.node_status or 'unknown'}",
        *([f"Deep health check before the reboot: {_check_summary(before)}"] if before else []),
    ]


def _check_summary(check: HealthCheckRecord | CheckSummary) -> str:
    checks = ", ".join(check.checks or ()) or "none"
    if not check.started:
        reason = check.reason or "no reason recorded"
        return f"not started ({reason}); node status {check.status}"
    state = _RESULTS.get(check.result, str(check.result))
    return f"{checks}: {state}; node status {check.status}"


# -- the evidence -----------------------------------------------------------------------------


WRAP_WIDTH: Final = 100
"""The longest line of prose a card shows; longer ones continue on the next line, indented."""


def wrap(lines: Sequence[str], width: int = WRAP_WIDTH) -> list[str]:
    """Each line at most `width` characters where it has spaces to break at (a long word, an
    id or a URL, is never cut), a continuation indented four more than its line (two more than
    the lines under it)."""
    wrapped: list[str] = []
    for line in lines:
        if len(line) <= width:
            wrapped.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip(" ")))
        wrapped += textwrap.wrap(
            line.strip(),
            width,
            initial_indent=indent,
            subsequent_indent=indent + "    ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    return wrapped


def alerts_only(incident: Incident) -> bool:
    """Whether the incident's only evidence is hardware alerts: no metric alarm, no report."""
    return bool(incident.hardware) and not incident.metrics and not incident.reports


def metric_lines(incident: Incident) -> list[str]:
    if alerts_only(incident):
        return []  # the alerts' own section says what fired
    lines = []
    for name in incident.metrics:
        try:
            description = Metric(name).description
        except ValueError:
            description = ""
        lines.append(f"  metric {name}: {description}".rstrip())
    return lines or ["  metric: none recorded"]


HARDWARE_ALERTS_HEADING: Final = (
    "HARDWARE ALERTS (the cluster's Prometheus alert rules over the GPU's own counters)"
)


def hardware_alert_lines(incident: Incident) -> list[str]:
    """Each hardware alert attached to the incident, once: its rule, where (GPU, or the node
    for a network port's rule), severity, when it started, whether it is still firing or was
    resolved (and when that arrived), and what the rule means (the rule's own summary, as the
    alert carried it). A repeat of a still-firing alert is the same alert; empty without one."""
    alerts: dict[tuple[str | None, ...], HardwareEvidence] = {}
    resolved: dict[tuple[str | None, ...], str] = {}
    for item in incident.alerts:
        same = item.identity
        if item.status is AlertStatus.RESOLVED:
            resolved[same] = item.received_at
        alerts.setdefault(same, item)
    lines: list[str] = []
    for same, item in alerts.items():
        state = (
            f"resolved (received {_when(resolved[same])})" if same in resolved else "still firing"
        )
        lines.append(
            f"  {_v(item.rule)} on {_alert_where(item)}: {_v(item.severity)}, "
            f"started {_alert_start(item, incident.telemetry)}, {state}"
        )
        if item.summary:
            lines.append(f"    the alert's summary: {_q(item.summary)}")
    return lines


_RULE_FAMILY: Final[dict[str, str]] = {
    HardwareRule.THROTTLING: "clocks",
    HardwareRule.XID: "xid",
    HardwareRule.ROW_REMAP_FAILURE: "row_remap_failed",
    HardwareRule.UNCORRECTABLE_ECC: "ecc_dbe",
    HardwareRule.PCIE_REPLAYS: "pcie_replay",
}
"""The counter family (`sdc_remediation.lambdas.logic.evidence.dcgm`) each rule's expression reads; the NVLink
rule names its family in its `counter` label, a network port's rule reads no GPU counter."""


def _alert_start(item: HardwareEvidence, telemetry: TelemetryRecord | None) -> str:
    """When the fault an alert reports started, once: the alert's own start, or, where the
    GPU's counters (the card's telemetry) show the same fault on the same GPU earlier (the rule
    only fires once its expression has held), the first time they show it."""
    family = item.counter or _RULE_FAMILY.get(item.rule)
    seen = [
        finding.at
        for finding in (telemetry.signals if telemetry else ())
        if finding.at
        and family
        and finding.kind == family
        and item.gpu_uuid
        and finding.gpu_uuid == item.gpu_uuid
    ]
    alert = _instant(item.starts_at)
    earliest = min((t for t in map(_instant, seen) if t is not None), default=None)
    if earliest is not None and (alert is None or earliest < alert):
        return f"{earliest:%Y-%m-%d %H:%M:%S} UTC (the first sign of it in the GPU's counters)"
    return _when(item.starts_at)


def _instant(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return None


def _alert_where(item: HardwareEvidence) -> str:
    node = _q(item.node_name)
    if item.gpu is None and item.gpu_uuid is None:
        return f"node {node}"
    extra = [f"XID {_q(item.xid)}"] if item.xid else []
    extra += [f"counter {_q(item.counter)}"] if item.counter else []
    uuid = f" ({_q(item.gpu_uuid)})" if item.gpu_uuid else ""
    return f"GPU {_q(item.gpu)}{uuid} of node {node}" + "".join(f", {e}" for e in extra)


def _when(text: Any) -> str:
    """A recorded time as the card shows it (UTC); the text as stored if it is no time."""
    try:
        return _stamp(str(text).replace("Z", "+00:00"))
    except ValueError:
        return _q(text or None)


def alarm_lines(incident: Incident) -> list[str]:
    """Each alarm and when it fired (its own text is among the card's raw values)."""
    return [f"  alarm {a.alarm_name} at {a.state_at}" for a in incident.alarms]


def alarm_text_lines(incident: Incident) -> list[str]:
    """Each alarm's own state reason, as CloudWatch wrote it."""
    return [f"  alarm {a.alarm_name}: {a.reason}" for a in incident.alarms]


def gpu_uuid_lines(incident: Incident, shown: int | None = None) -> list[str]:
    """The GPU UUID each shown report names for each suspect rank on this instance."""
    found = shown_reports(incident)
    if shown is not None:
        found = found[max(len(found) - shown, 0) :]
    return [
        f"  rank {s.rank} (report {r.report_id}): GPU {_q(s.gpu_uuid, 'none')}"
        for r in found
        for s in r.suspects
    ]


def shown_reports(incident: Incident) -> list[ReportEvidence]:
    """The reports a card can show: the incident's report evidence, in the order received."""
    return incident.reports


def report_lines(incident: Incident, shown: int | None = None) -> list[str]:
    """Each report's summary; with `shown`, only the newest `shown` of them and how many more
    there are (`sdc show` lists every one)."""
    found = shown_reports(incident)
    if not found and alerts_only(incident):
        return []
    if not found:
        return ["  no SDC report stored for this instance (the metric alone names no rank)"]
    lines = []
    hidden = 0 if shown is None else max(len(found) - shown, 0)
    if hidden:
        found = found[hidden:]
        lines.append(f"  {hidden} more reports: `sdc show {incident.incident_id}`")
    if incident.evidence_dropped:
        lines.append(
            f"  {incident.evidence_dropped} more evidence items were not kept on the incident "
            "(its record is full); the reports are stored whole under their instance"
        )
    for report in found:
        lines += [
            f"  report {report.report_id} (job {_q(report.job_name)}, "
            f"emitted {report.emitted_at}{_received(report)})",
            *_findings_lines(report),
            *_suspect_lines(report),
        ]
        if report.errors:
            lines.append(f"    report errors: {'; '.join(_q(e) for e in report.errors)}")
        if report.left_out:
            counts = ", ".join(f"{n} {name}" for name, n in sorted(report.left_out.items()))
            lines.append(f"    left out of this summary (about other ranks): {counts}")
    return lines


def resume_lines(incident: Incident) -> list[str]:
    """The checkpoint to resume the job from, then the rollback and the exposure window
    (`sdc_remediation.lambdas.models.resume_point`)."""
    return [*_resume_from_lines(incident), *exposure_lines(incident)]


def exposure_lines(incident: Incident) -> list[str]:
    """One line: the steps the job trains again (and the tokens, when the report carries the
    job's tokens per step), and the steps trained between the suspect window's start and
    detection; none when no report places a window."""
    point = ResumePoint.of(incident.reports)
    if point is None or point.exposure is None:
        return []
    first, last = point.exposure
    exposure = (
        f"exposure window: steps {first}-{last} ({point.exposure_steps} steps trained between "
        "the suspect window's start and detection)"
    )
    if point.checkpoint_step is None:
        return [f"  Rollback: unknown (no checkpoint to resume from is known); {exposure}"]
    if point.rollback_steps is None:
        return [f"  Rollback: unknown (the alarm's step is not recorded); {exposure}"]
    return [
        f"  Rollback: {_rollback_size(point)} (from the alarm at step {point.detected_step} back "
        f"to the checkpoint at step {point.checkpoint_step}{_per_step(point)}); {exposure}"
    ]


def _rollback_size(point: ResumePoint) -> str:
    """`10 steps, 40,960 tokens`; the steps alone when the report carries no tokens per step."""
    if point.rollback_tokens is None:
        return f"{point.rollback_steps} steps"
    return f"{point.rollback_steps} steps, {point.rollback_tokens:,} tokens"


def _per_step(point: ResumePoint) -> str:
    if point.tokens_per_step is None:
        return ""
    return f"; {point.tokens_per_step:,} tokens per step"


def _resume_from_lines(incident: Incident) -> list[str]:
    """One line: the checkpoint to resume the job from (sdc_remediation.lambdas.logic.evidence.resume chose it when the
    report arrived). Of several reports, the one whose suspect window starts first decides: a
    checkpoint before it is before every other window too."""
    found = [(r, r.resume) for r in incident.reports if r.resume is not None]
    if not found:
        return []
    placed = [(resume.before_step, r, resume) for r, resume in found]
    if any(before is None for before, _, _ in placed):
        return [
            "  Resume from: unknown: a report has no suspect window to place a checkpoint before"
        ]
    _, report, resume = min(placed, key=lambda p: p[0] or 0)
    window: tuple[object, object] = report.suspect_window or ("?", "?")
    checkpoint = resume.checkpoint
    if checkpoint:
        where = _q(checkpoint.location, "location not reported")
        return [
            f"  Resume from: checkpoint at step {checkpoint.step} ({where}), saved before "
            f"the suspect window [{window[0]}, {window[1]}]; tags: "
            f"last_audit_pass {_v(checkpoint.last_audit_pass)}, "
            f"last_weight_check_pass {_v(checkpoint.last_weight_check_pass)}"
        ]
    skipped = resume.unverified
    verified = "verified " if skipped else ""
    why = (
        f" (skipped, their tags do not show them verified: steps {', '.join(map(str, skipped))})"
        if skipped
        else ""
    )
    return [
        f"  Resume from: no {verified}checkpoint saved before step {resume.before_step} is "
        f"known{why}: resume from an earlier verified checkpoint outside this job's report, or "
        "from the start"
    ]


def _findings_lines(report: ReportEvidence) -> list[str]:
    """What the report's check found, in that check's own terms: a hang its step, collective,
    missing ranks and stacks; a straggler its scores; an SDC check its comparisons, verdicts
    and suspect window. A check never shows another check's (empty) fields."""
    check = report.check
    if check is Check.HANG and report.hang is not None:
        return _hang_lines(report, report.hang)
    if check is Check.STRAGGLER and report.straggler is not None:
        return _straggler_lines(report, report.straggler)
    return [
        f"    step {_v(report.step)}, check {_v(check)}, "
        f"ambiguous: {'yes' if report.ambiguous else 'no'}",
        f"    ranks on this instance: {_v(report.ranks)} (role {_v(report.role)})",
        f"    mismatched pairs: {_v(report.mismatched_pairs)}; "
        f"culprits: {_v(report.culprits)}; "
        f"non-finite: {_v(report.nonfinite)}; "
        f"weight suspects: {_v(report.weight_suspects)}",
        *_verdict_lines(report),
        f"    suspect window: steps {_window(report.suspect_window)}; "
        f"last audit pass: {_v(report.last_audit_pass)}; "
        f"last weight check pass: {_v(report.last_weight_check_pass)}",
    ]


def hang_step(step: Any) -> str:
    """The step a hang stopped in: the report's step is the last one every rank completed
    (the watch counts a step when it ends), so the hang is in the next one."""
    if not isinstance(step, int) or isinstance(step, bool):
        return "step unknown: no step had completed when the watchdog fired"
    return f"step {step + 1} did not finish (the last step completed: {step})"


def _hang_lines(report: ReportEvidence, hang: HangSummary) -> list[str]:
    ranks = set(report.ranks)
    waiting = hang.waiting_collective
    collective = (
        f"collective #{waiting.seq} {_q(waiting.name, '(name not recorded)')}"
        if waiting is not None
        else "no collective (no rank was waiting in one)"
    )
    timeout = hang.timeout_s
    where = (
        f"localised to this instance by {' and '.join(hang.signals) or 'no signal'}"
        if report.role is Role.CULPRIT
        else f"spans {count(len(hang.named_instances), 'instance')}: "
        + (", ".join(hang.named_instances) or "none named")
    )
    lines = [
        f"    hang: {hang_step(report.step)}; no progress for "
        f"{count(timeout, 'second') if isinstance(timeout, int | float) else 'unknown'} "
        "(the watchdog's timeout)",
        f"    {collective}: the one the other ranks wait in",
        f"    missing from it: {_ranks_of(hang.missing_ranks)}; "
        f"silent: {_ranks_of(hang.silent_ranks)}; "
        f"stack unlike its peers': {_ranks_of(hang.odd_stack_ranks)}",
        f"    ranks on this instance: {_ranks_of(sorted(ranks))}; {where}",
    ]
    stacks = hang.stacks
    mine = [s for s in stacks if s.rank in ranks]
    peers = [s for s in stacks if s.rank not in ranks][:1]
    for entry in [*mine, *peers]:
        whose = "" if entry in mine else ", a peer"
        frames = " > ".join(_q(frame) for frame in entry.stack)
        lines.append(f"    stack of rank {entry.rank}{whose} (innermost last): {frames}")
    if not stacks:
        lines.append("    stacks: none in the report")
    return lines


def _straggler_lines(report: ReportEvidence, straggler: StragglerSummary) -> list[str]:
    threshold = straggler.threshold
    required = straggler.windows_required
    steps = straggler.window_steps
    scores = straggler.relative
    lines = [
        f"    straggler at step {_v(report.step)}: scored per window of "
        f"{count(steps, 'step') if isinstance(steps, int) else 'unknown steps'}; flagged below "
        f"a relative score of {_v(threshold)} for "
        f"{count(required, 'window') if isinstance(required, int) else 'unknown windows'} "
        "in a row (1.0 is the job's median rank)",
        f"    ranks on this instance: {_ranks_of(report.ranks)}; flagged in the job: "
        f"{_ranks_of(straggler.flagged)}",
    ]
    lines += [
        f"    rank {entry.rank}: relative score {_score(entry.score)} in the "
        f"last window"
        + (
            f" ({count(entry.windows, 'window')} in a row below {_v(threshold)})"
            if entry.windows is not None
            else ""
        )
        for entry in scores
    ] or ["    scores: none in the report"]
    return lines


def _score(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) else _v(value)


def _ranks_of(ranks: Any) -> str:
    """`rank 13`, `ranks 5, 13`, or `none`."""
    if not ranks:
        return "none"
    found = [str(r) for r in ranks]
    return f"{'rank' if len(found) == 1 else 'ranks'} {', '.join(found)}"


def _suspect_lines(report: ReportEvidence) -> list[str]:
    return [
        f"    rank {s.rank}: {s.role}, node {_q(s.node_name, 'none')}"
        + (f" ({'; '.join(_q(r) for r in s.reasons)})" if s.reasons else "")
        for s in report.suspects
    ]


def _verdict_lines(report: ReportEvidence) -> list[str]:
    if not report.verdicts:
        return ["    verdicts: none"]
    return [
        f"    verdict: pair {list(v.pair)}, third rank {_v(v.third)} "
        f"-> suspect {_v(v.suspect)}: {v.kind}"
        for v in report.verdicts
    ]


def _received(report: ReportEvidence) -> str:
    """When the pipeline received the report, and whether it came stale."""
    received = report.received_at
    if not received:
        return ""
    stale = (
        "; STALE: emitted longer before it arrived than the storm window, it moved no window"
        if report.stale
        else ""
    )
    return f", received {received}{stale}"


def _window(window: Any) -> str:
    if not window:
        return "unknown"
    return f"{window[0]}-{window[1]}"


def _q(value: Any, missing: str = "unknown") -> str:
    """A reporter's text as the card shows it: cleaned, clipped and quoted."""
    return missing if value is None or value == "" else quoted(value)


def _v(value: Any) -> str:
    """A recorded value as the card shows it: a sequence as a list (`[5, 13]`), none for
    nothing."""
    if isinstance(value, tuple):
        value = [list(v) if isinstance(v, tuple) else v for v in value]
    if value is None or value == []:
        return "none"
    return str(value)


def approvals_line(incident: Incident, required: int | None = None) -> str | None:
    """ "1 of 2: approve by arn:…/alice at 12:03:00" when more than one approval is (or was)
    required; None otherwise. `required` defaults to what the recorded approvals say."""
    decided = incident.decision
    if decided is not None and decided.approvals:
        approvals = [ApprovalRecord.from_record(a) for a in decided.approvals]
    else:  # only this round's: an approval given before a reboot no longer counts
        approvals = in_round(incident.approvals, incident.approval_round)
    if required is None:
        required = max((a.required for a in approvals), default=1)
    if required <= 1:
        return None
    return tally_line(approvals, required)


def tally_line(approvals: Sequence[ApprovalRecord], required: int) -> str:
    """ "1 of 2: approve by arn:…/alice at 12:03:00" (any decision's approvals so far)."""
    if not approvals:
        return f"0 of {required}"
    who = "; ".join(
        f"{a.decision} by {a.principal.label()} at {a.at[11:19] or a.at}" for a in approvals
    )
    return f"{len(approvals)} of {required}: {who}"


def approval_rule_lines(settings: Settings, incident: Incident) -> tuple[str, ...]:
    """What the card says about who may decide and how many must agree (nothing when one
    unsigned approval by anyone allowed to start the approval state machine is enough)."""
    if not settings.needs_identity_proof:
        return ()
    required = settings.approvals_required
    lines = [""]
    if required > 1:
        lines.append(
            f"  Approvals needed: {required} distinct approvers must give the same approve (or "
            "reboot); the same person twice counts once; a reject by any approver ends it."
        )
        so_far = approvals_line(incident, required)
        if so_far:
            lines.append(f"  So far: {so_far}")
    if settings.approvers:
        lines.append(f"  Allowed approvers: {', '.join(settings.approvers)}")
    lines.append(
        "  Decide with `sdc approve|reboot|reject <incident id> -m '<why>'`: it signs a proof of "
        "who you are. A console or plain start-execution approval carries none and is refused."
    )
    return tuple(lines)


def notice_why_lines(incident: Incident) -> list[str]:
    """Why an incident is a notice only, said once and from the record: a straggler's why is
    what its evidence lacks (a hardware signal of its node, or one node to point at), then what
    the node's telemetry showed; any other notice gives its hold's reason."""
    stragglers = [r.straggler for r in incident.reports if r.straggler is not None]
    if not stragglers:
        return [f"Why: {(incident.hold and incident.hold.reason) or incident.reason}"]
    instances = sorted({i for s in stragglers for i in s.named_instances})
    record = incident.telemetry
    if len(instances) > 1:
        why = (
            f"the straggler spans {count(len(instances), 'instance')} "
            f"({', '.join(instances)}): no one node to act on"
        )
    else:
        why = "no hardware signal of its node corroborates the straggler"
    lines = [f"Why: {why}."]
    if record is not None:
        lines.append(f"Telemetry: {record.summary}")
    return lines
