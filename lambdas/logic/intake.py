"""Events in: contributor alarms and SDC reports open incidents, or attach to open ones.

Either channel alone is enough. The report (PutEvents, seconds after the check fired) usually
comes first: a report naming a culprit or confirmed suspect opens that instance's incident, and
the contributor alarm (a minute or more later) finds the open lock and attaches. An ambiguous
report (no strict majority, a reduced gradient, nothing attributable) opens one job-level
incident that holds the locks of the involved instances, so their alarms attach to it instead
of opening one incident per node. Without a report, the alarm opens the incident itself.

A report is a claim: only the instances HyperPod confirms are nodes of the cluster count or
act (`lambdas.logic.opening.claims`), and it is placed by the time the pipeline received it; one dated
more than MAX_AHEAD ahead of that is refused. Before an incident acts, the guards of
`lambdas.logic.safety.guard` apply: its nodes are flagged for storm detection, and a storm hold, a muted
alarm (`muteDetail`: an alarm mute rule mutes the alarm's actions), the pause switch or a
blast-radius guard without room for its nodes record it as `held` (nothing acts) instead. A
report flags every confirmed instance it names before it opens any, so a report naming a
storm's worth of culprits holds them all under one storm hold.

A held incident is closed at birth, so it takes no open lock; a node-level one takes a held
lock on its instance instead, valid for STORM_WINDOW_SECONDS (a held job-level one takes none:
an alarm on one of its nodes is that node's own incident). Whatever else arrives for the instance in that
window (the alarm after the report, a redelivery, the next report) is attached to the held
incident: one held incident and at most one notice per instance and window, whichever channel
comes first. After the window, or once the storm hold is reset or the pause switch is back to
false, a new trigger is judged afresh.

This module is where the two events come in; `opening.incidents` opens an incident (node- or
job-level), `opening.holding` records a held one, `opening.arrivals` attaches what comes for an
instance an incident speaks for, `opening.execution` starts the remediation execution (all in
`lambdas.logic.opening`).

An event without the documented shape never gets that far: its handler fails to parse it and
calls `refuse`, then raises the error again, so the event lands in the function's dead-letter
queue with the error, and the audit log names the bad field under the event's id.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, NoReturn

from lambdas.logic.core import ids
from lambdas.logic.core.steps import Step, error_details, mark_audited, was_audited
from lambdas.logic.evidence import summaries
from lambdas.logic.opening import arrivals, claims, incidents
from lambdas.logic.opening.arrivals import Trigger
from lambdas.logic.ports import Deps
from lambdas.logic.safety import guard
from lambdas.metric_names import PipelineMetric as M
from lambdas.models.audit import AuditAction
from lambdas.models.errors import ClusterNotFound, KubernetesNotFound, MalformedEvent
from lambdas.models.events import ContributorEvent
from lambdas.models.hardware_alert import (
    AlertNotification,
    AlertStatus,
    HardwareAlert,
    sns_message_id,
)
from lambdas.models.incident import TriggerSource
from lambdas.models.payloads import OpenAction, OpenIncidentResult, StoreReportResult
from lambdas.models.report import ReportEvent, SdcReport
from lambdas.models.reporter_text import clean
from lambdas.observability import count, logger
from trainer_emitter.contract import REPORT_SOURCE, Role

REPORT_TTL = timedelta(days=14)
MAX_AHEAD = timedelta(minutes=5)
"""How far ahead of the pipeline's clock a report's `emitted_at` may be (clock skew between
nodes); a report dated further ahead is refused."""
ALERT_SOURCE = "aps.hardware-alert"
"""How the audit names where a hardware alert came from (the workspace's alert manager)."""
OPENING_ROLES = frozenset({Role.CULPRIT, Role.CONFIRMED_SUSPECT})
"""The roles for which a report opens a node-level incident by itself."""


def open_incident(alarm: ContributorEvent, deps: Deps) -> OpenIncidentResult:
    """One contributor alarm → at most one open incident per (cluster, instance).

    OK-state events and clusters outside ALLOWED_CLUSTERS are ignored (audited under the event);
    an instance HyperPod does not know is recorded as a skipped incident; an alarm for an
    instance with an open incident (node- or job-level) attaches to it. The remediation
    execution is named after the incident, so it is started once however often the event is
    delivered.
    """
    step = Step(deps, "open_incident")
    settings = deps.settings
    if not alarm.is_alarm:
        return _ignore(step, alarm, f"contributor state is {alarm.state}, not ALARM")
    if alarm.cluster_name not in settings.allowed_clusters:
        return _ignore(step, alarm, f"cluster {alarm.cluster_name} is not in ALLOWED_CLUSTERS")
    settings.require_state_machine_arn()
    trigger = Trigger(
        cluster_name=alarm.cluster_name,
        instance_id=alarm.instance_id,
        at=alarm.state_at,
        event_id=alarm.event_id,
        source=TriggerSource.ALARM,
        item=summaries.alarm_evidence(alarm),
        metric=alarm.metric.value,
        mute=guard.mute_blocker(alarm.alarm_name, alarm.mute) if alarm.mute else None,
    )
    return incidents.open_node(step, trigger)


def _ignore(step: Step, alarm: ContributorEvent, reason: str) -> OpenIncidentResult:
    step.audit(
        ids.event_subject(alarm.event_id),
        AuditAction.EVENT_IGNORED,
        {
            "reason": reason,
            "cluster_name": alarm.cluster_name,
            "instance_id": alarm.instance_id,
            "alarm": summaries.alarm_evidence(alarm),
        },
    )
    count(M.EVENTS_IGNORED)
    logger.info("event ignored", event_id=alarm.event_id, reason=reason)
    return {"incident_id": None, "action": OpenAction.IGNORED}


# -- reports -----------------------------------------------------------------------------------


def store_report(event: ReportEvent, deps: Deps) -> StoreReportResult:
    """Store the report under each instance it names, attach it to their open incidents, and
    open what it names: a node-level incident per culprit or confirmed suspect without one, or,
    for an ambiguous report, one job-level incident for the involved instances without one."""
    step = Step(deps, "store_report")
    subject = ids.event_subject(event.event_id)
    received = deps.clock.now()
    if event.report.emitted > received + MAX_AHEAD:
        _refuse_ahead(step, event, received)
    report = dataclasses.replace(
        event.report,
        received_at=received.isoformat(),
        stale=received - event.report.emitted
        > timedelta(seconds=deps.settings.storm_window_seconds),
    )
    event = dataclasses.replace(event, report=report)
    reason = None
    if report.cluster_name not in deps.settings.allowed_clusters:
        reason = f"cluster {report.cluster_name} is not in ALLOWED_CLUSTERS"
    elif not report.instances:
        reason = "the report names no instance"
    else:
        reason = _more_than_nodes(step, report)
    if reason:
        step.audit(
            subject,
            AuditAction.REPORT_IGNORED,
            {"report_id": report.report_id, "cluster_name": report.cluster_name, "reason": reason},
        )
        count(M.REPORTS_IGNORED)
        return {"report_id": report.report_id, "stored": False, "incidents": []}

    expires_at = int((deps.clock.now() + REPORT_TTL).timestamp())
    stored = [
        i.instance_id
        for i in report.instances
        if deps.reports.put_report(report, i.instance_id, expires_at)
    ]
    if stored:
        step.audit(
            subject,
            AuditAction.REPORT_STORED,
            {
                "report_id": report.report_id,
                "cluster_name": report.cluster_name,
                "instances": stored,
                "check": report.check,
                "step": report.step,
                "ambiguous": report.ambiguous,
            },
        )
        count(M.REPORTS_STORED)
    # Every instance, not only the newly stored ones: a retry after a crash must still open.
    results = _open_job(step, event) if report.ambiguous else _open_named(step, event)
    logger.info(
        "report handled",
        report_id=report.report_id,
        stored=bool(stored),
        incidents=len(results),
    )
    return {"report_id": report.report_id, "stored": bool(stored), "incidents": results}


def _more_than_nodes(step: Step, report: SdcReport) -> str | None:
    """Why a report naming more distinct instances than its cluster has nodes (HyperPod's count)
    is ignored whole: no node is asked about, nothing stored, flagged or opened, one audit entry
    (a forged report must not buy a HyperPod call, an incident and an audit entry per made-up
    instance). None when it names no more than that, or HyperPod gives no count."""
    named = len({i.instance_id for i in report.instances})
    try:
        nodes = step.deps.hyperpod.describe_cluster(report.cluster_name).node_count
    except ClusterNotFound:
        return f"HyperPod does not know cluster {report.cluster_name}"
    if nodes is not None and named > nodes:
        return (
            f"the report names {named} instances; cluster {report.cluster_name} has {nodes} "
            "nodes: nothing it names is checked, stored or opened"
        )
    return None


def _refuse_ahead(step: Step, event: ReportEvent, received: datetime) -> NoReturn:
    """A report dated ahead of the pipeline's clock by more than MAX_AHEAD: refused (audited
    under the event, counted) and raised, so that the event is retried and then kept in the
    dead-letter queue (a node whose clock ran ahead loses nothing); nothing stored, flagged or
    opened."""
    report = event.report
    err = MalformedEvent(
        "detail.emitted_at",
        f"{report.emitted_at} is more than {int(MAX_AHEAD.total_seconds())} s ahead of the "
        f"time the pipeline received the report ({received.isoformat()})",
    )
    step.audit(
        ids.event_subject(event.event_id),
        AuditAction.EVENT_REFUSED,
        error_details(err, source=REPORT_SOURCE, report_id=report.report_id),
    )
    count(M.EVENTS_REFUSED)
    logger.warning("report refused", report_id=report.report_id, field=err.field)
    raise err


def _open_named(step: Step, event: ReportEvent) -> list[OpenIncidentResult]:
    report = event.report
    results: list[OpenIncidentResult] = []
    at = report.emitted
    opening_ids = [i.instance_id for i in report.instances if i.role in OPENING_ROLES]
    if opening_ids:
        step.deps.settings.require_state_machine_arn()
        # All at once, before any opens: a report naming a storm's worth of nodes is a storm.
        # Only nodes HyperPod confirms: made-up instance ids flag nothing.
        guard.flag(step, report.cluster_name, _confirmed(step, event, opening_ids))
    for instance in report.instances:
        trigger = Trigger(
            cluster_name=report.cluster_name,
            instance_id=instance.instance_id,
            at=at,
            event_id=event.event_id,
            source=TriggerSource.REPORT,
            item=summaries.report_evidence(report, instance.instance_id),
            report=report,
            metric=instance.metrics[0].value if instance.metrics else None,
        )
        if instance.role in OPENING_ROLES:
            results.append(incidents.open_node(step, trigger, flagged=True))
            continue
        holder = step.deps.incidents.open_incident_id(report.cluster_name, instance.instance_id)
        if holder:
            arrivals.attach_items(
                step, holder, [trigger.item], event.event_id, TriggerSource.REPORT
            )
            results.append({"incident_id": holder, "action": OpenAction.ATTACHED})
    return results


def _confirmed(step: Step, event: ReportEvent, instance_ids: list[str]) -> list[str]:
    """The instances HyperPod confirms are nodes of the report's cluster; a cluster it does not
    know has none (each opening is then skipped, audited)."""
    try:
        return claims.hyperpod_nodes(step, event.report.cluster_name, instance_ids)[0]
    except ClusterNotFound:
        return []


def _open_job(step: Step, event: ReportEvent) -> list[OpenIncidentResult]:
    """An ambiguous report: one job-level incident for the involved instances that have no open
    incident (those that do get the report attached)."""
    deps = step.deps
    report = event.report
    results: list[OpenIncidentResult] = []
    free: list[str] = []
    for instance in report.instances:
        holder = deps.incidents.open_incident_id(report.cluster_name, instance.instance_id)
        item = summaries.report_evidence(report, instance.instance_id)
        if holder:
            arrivals.attach_items(step, holder, [item], event.event_id, TriggerSource.REPORT)
            if not any(r["incident_id"] == holder for r in results):
                results.append({"incident_id": holder, "action": OpenAction.ATTACHED})
        else:
            free.append(instance.instance_id)
    if not free:
        return results
    deps.settings.require_state_machine_arn()
    trigger = Trigger(
        cluster_name=report.cluster_name,
        instance_id="",
        at=report.emitted,
        event_id=event.event_id,
        source=TriggerSource.REPORT,
        item=summaries.report_evidence(report, None),
        report=report,
    )
    return [*results, incidents.open_job(step, trigger, free)]


# -- hardware alerts ----------------------------------------------------------------------------


def hardware_alerts(note: AlertNotification, deps: Deps) -> list[OpenIncidentResult]:
    """The alerts of one notification of the hardware alert topic, each a claim like a report's:
    its node is acted on only when HyperPod knows the instance its name holds as a node of the
    cluster and, where the cluster gives the pipeline its Kubernetes API, Kubernetes finds that
    instance by `spec.providerID` under that very name. A firing alert opens the node's incident
    or attaches to the open one (one per cluster and instance), through the same opening as an
    alarm: guard, storm flags, pause switch. A resolved alert is recorded (on the open incident,
    else in the audit log) and closes nothing.

    The cluster is the notification's SNS attribute, which the stack fixes per workspace; an
    alert whose own `cluster` label differs is refused (raised: the message lands in the failure
    queue), a cluster outside ALLOWED_CLUSTERS ignored. An alert that cannot be taken (Kubernetes
    or HyperPod unreachable while its node is resolved or checked, a table that fails) is
    audited as `open_failed` under the notification's event, then raised: SNS retries the
    message and then keeps it in the failure queue, and the audit log says why."""
    step = Step(deps, "store_report")
    subject = ids.event_subject(_hardware_event_id(note))
    forged = [a.cluster_name for a in note.alerts if a.cluster_name != note.cluster_name]
    if forged:
        err = MalformedEvent(
            "Sns.Message.alerts.labels.cluster",
            f"an alert names cluster {clean(forged[0], 64)!r}; the workspace's "
            f"notification is for {note.cluster_name}",
        )
        step.audit(subject, AuditAction.EVENT_REFUSED, error_details(err, source=ALERT_SOURCE))
        count(M.EVENTS_REFUSED)
        raise err
    if note.cluster_name not in deps.settings.allowed_clusters:
        _hardware_ignored(
            step, note, None, f"cluster {note.cluster_name} is not in ALLOWED_CLUSTERS"
        )
        return []
    received = deps.clock.now()
    results: list[OpenIncidentResult] = []
    for alert in note.alerts:
        try:
            result = _hardware_alert(step, note, alert, received)
        except Exception as err:
            _hardware_failed(step, note, alert, err)
            raise
        if result is not None:
            results.append(result)
    return results


def _hardware_failed(
    step: Step, note: AlertNotification, alert: HardwareAlert, err: Exception
) -> None:
    """The alert's failure in the audit log (`open_failed` under the notification's event),
    unless the opening audited it already; a failing audit log is logged and never hides
    `err`."""
    if was_audited(err):
        return
    subject = ids.event_subject(_hardware_event_id(note))
    try:
        step.audit(
            subject,
            AuditAction.OPEN_FAILED,
            error_details(
                err,
                source=TriggerSource.HARDWARE,
                cluster_name=note.cluster_name,
                alert=summaries.hardware_evidence(alert, step.now()),
            ),
            [getattr(err, "request_id", None)],
        )
    except Exception:
        logger.exception("could not audit the failed alert", message_id=note.message_id)
        return
    mark_audited(err, AuditAction.OPEN_FAILED, subject)
    logger.warning("hardware alert failed", message_id=note.message_id, error=type(err).__name__)


def _hardware_alert(
    step: Step, note: AlertNotification, alert: HardwareAlert, received: datetime
) -> OpenIncidentResult | None:
    instance_id = alert.claimed_instance or _instance_named(step, note.cluster_name, alert)
    if instance_id is None:
        _hardware_ignored(
            step,
            note,
            alert,
            f"node {clean(alert.node_name, 253)!r} names no instance: it is not "
            "hyperpod-<instance id>, and no Kubernetes node of that name gives one by "
            "providerID (or the cluster gives the pipeline no Kubernetes API)",
        )
        return None
    item = summaries.hardware_evidence(alert, received.isoformat())
    event_id = _hardware_event_id(note)
    if alert.status is AlertStatus.RESOLVED:
        holder = step.deps.incidents.open_incident_id(note.cluster_name, instance_id)
        if holder is None:
            _hardware_ignored(step, note, alert, "resolved: recorded; it closes no incident")
            return None
        arrivals.attach_items(step, holder, [item], event_id, TriggerSource.HARDWARE)
        return {"incident_id": holder, "action": OpenAction.ATTACHED}
    step.deps.settings.require_state_machine_arn()
    trigger = Trigger(
        cluster_name=note.cluster_name,
        instance_id=instance_id,
        at=received,
        event_id=event_id,
        source=TriggerSource.HARDWARE,
        item=item,
        metric=alert.rule.value,
        claims=claims.Claims(node_names={instance_id: frozenset({alert.node_name})}),
    )
    return incidents.open_node(step, trigger)


def _instance_named(step: Step, cluster_name: str, alert: HardwareAlert) -> str | None:
    """The instance Kubernetes gives, by its providerID, for the node the alert names (where
    the cluster gives the pipeline its Kubernetes API); None when it has no such node."""
    config = step.deps.settings.isolation_for(cluster_name)
    if not config.isolate or config.eks_cluster is None:
        return None
    try:
        return step.deps.kubernetes.find_node_named(config.eks_cluster, alert.node_name).instance_id
    except KubernetesNotFound:
        return None


def _hardware_event_id(note: AlertNotification) -> str:
    return f"sns-{clean(note.message_id, 100)}"


def _hardware_ignored(
    step: Step, note: AlertNotification, alert: HardwareAlert | None, reason: str
) -> None:
    step.audit(
        ids.event_subject(_hardware_event_id(note)),
        AuditAction.EVENT_IGNORED,
        {
            "reason": reason,
            "cluster_name": note.cluster_name,
            "alert": summaries.hardware_evidence(alert, step.now()) if alert else None,
        },
    )
    count(M.EVENTS_IGNORED)
    logger.info("hardware alert ignored", message_id=note.message_id, reason=reason)


def refuse(event: Any, err: MalformedEvent, actor: str, deps: Deps) -> None:
    """An `event_refused` audit entry under the event's id naming the bad field, and the
    EventsRefused count."""
    raw = event if isinstance(event, Mapping) else {}
    message_id = sns_message_id(event)
    event_id = f"sns-{clean(message_id, 100)}" if message_id else raw.get("id")
    Step(deps, actor).audit(
        ids.event_subject(str(event_id)[:200] if event_id else "without-id"),
        AuditAction.EVENT_REFUSED,
        error_details(
            err,
            source=_short(raw.get("source")),
            detail_type=_short(raw.get("detail-type")),
        ),
    )
    count(M.EVENTS_REFUSED)


def _short(value: Any) -> Any:
    return value[:200] if isinstance(value, str) else value
