"""Events in: contributor alarms open incidents, SDC reports become evidence."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, TypeVar

from lambdas.logic import evidence, ids
from lambdas.logic._steps import Step, error_details
from lambdas.logic.ports import Deps
from lambdas.models.errors import (
    ClusterNotFound,
    IncidentExists,
    LockHeld,
    MalformedEvent,
    NodeNotFound,
    SdcError,
)
from lambdas.models.events import ContributorEvent, ReportEvent
from lambdas.models.hyperpod import NodeRecovery, NodeStatus
from lambdas.models.incident import Incident, IncidentState
from lambdas.models.payloads import OpenIncidentResult, StoreReportResult
from lambdas.observability import count, logger

REPORT_TTL = timedelta(days=14)

T = TypeVar("T")


def parsed_or_refused(event: Any, parse: Callable[[Any], T], actor: str, deps: Deps) -> T:
    """`parse(event)`, or, for an event without the documented shape, an `event_refused` audit
    entry under the event's id naming the bad field, then the error again: the caller's raise
    sends the event to the dead-letter queue, so it is both kept and explained."""
    try:
        return parse(event)
    except MalformedEvent as err:
        raw = event if isinstance(event, Mapping) else {}
        Step(deps, actor).audit(
            ids.event_subject(str(raw.get("id") or "without-id")),
            "event_refused",
            error_details(err, source=raw.get("source"), detail_type=raw.get("detail-type")),
        )
        count("EventsRefused")
        raise


def open_incident(alarm: ContributorEvent, deps: Deps) -> OpenIncidentResult:
    """One contributor alarm → at most one open incident per (cluster, instance).

    OK-state events and clusters outside ALLOWED_CLUSTERS are ignored (audited under the event);
    an instance HyperPod does not know is recorded as a skipped incident; a second alarm for an
    instance with an open incident attaches to it. The remediation execution is named after the
    incident, so it is started once however often the event is delivered.
    """
    step = Step(deps, "open_incident")
    settings = deps.settings
    if not alarm.is_alarm:
        return _ignore(step, alarm, f"contributor state is {alarm.state}, not ALARM")
    if alarm.cluster_name not in settings.allowed_clusters:
        return _ignore(step, alarm, f"cluster {alarm.cluster_name} is not in ALLOWED_CLUSTERS")
    settings.require_state_machine_arn()

    holder = deps.incidents.open_incident_id(alarm.cluster_name, alarm.instance_id)
    if holder:
        return _attach(step, holder, alarm)
    incident_id = ids.incident_id(alarm.cluster_name, alarm.instance_id, alarm.state_at)
    if deps.incidents.get(incident_id) is not None:
        return _redelivered(step, incident_id, alarm)

    try:
        cluster = deps.hyperpod.describe_cluster(alarm.cluster_name)
        node = deps.hyperpod.describe_node(alarm.cluster_name, alarm.instance_id)
    except (ClusterNotFound, NodeNotFound) as err:
        return _skip(step, incident_id, alarm, err)
    except Exception as err:
        step.audit(
            ids.event_subject(alarm.event_id),
            "open_failed",
            error_details(err, alarm=evidence.alarm_evidence(alarm)),
            [getattr(err, "request_id", None)],
        )
        raise
    if node.status == NodeStatus.NOT_FOUND:
        return _skip(step, incident_id, alarm, NodeNotFound("node status is NotFound"))

    now = step.now()
    incident = Incident(
        incident_id=incident_id,
        cluster_name=alarm.cluster_name,
        instance_id=alarm.instance_id,
        state=IncidentState.OPENED,
        created_at=now,
        updated_at=now,
        instance_group=node.instance_group,
        node_logical_id=node.logical_id,
        node_status=node.status,
        node_recovery=cluster.node_recovery,
    )
    evidence.add_evidence(incident, evidence.alarm_evidence(alarm))
    report = deps.reports.latest_report(alarm.cluster_name, alarm.instance_id)
    if report is not None:
        evidence.add_evidence(incident, evidence.report_evidence(report, alarm.instance_id))
    try:
        deps.incidents.create(incident)
    except LockHeld as held:
        return _attach(step, held.holder, alarm)
    except IncidentExists:
        return _redelivered(step, incident_id, alarm)

    logger.set_correlation_id(incident_id)
    step.audit(
        incident_id,
        "incident_opened",
        {
            "cluster_name": incident.cluster_name,
            "instance_id": incident.instance_id,
            "instance_group": incident.instance_group,
            "node_status": incident.node_status,
            "node_recovery": incident.node_recovery,
            "automatic_recovery": cluster.node_recovery == NodeRecovery.AUTOMATIC,
            "metric": alarm.metric.value,
            "event_id": alarm.event_id,
            "report_id": report.report_id if report else None,
        },
        [cluster.request_id, node.request_id],
    )
    count("IncidentsOpened")
    logger.info("incident opened", incident_id=incident_id, instance_id=alarm.instance_id)
    _ensure_execution(step, incident_id)
    return {"incident_id": incident_id, "action": "opened"}


def _ignore(step: Step, alarm: ContributorEvent, reason: str) -> OpenIncidentResult:
    step.audit(
        ids.event_subject(alarm.event_id),
        "event_ignored",
        {
            "reason": reason,
            "cluster_name": alarm.cluster_name,
            "instance_id": alarm.instance_id,
            "alarm": evidence.alarm_evidence(alarm),
        },
    )
    count("EventsIgnored")
    logger.info("event ignored", event_id=alarm.event_id, reason=reason)
    return {"incident_id": None, "action": "ignored"}


def _skip(
    step: Step, incident_id: str, alarm: ContributorEvent, err: SdcError
) -> OpenIncidentResult:
    """HyperPod does not know the instance: record a closed, skipped incident (no lock)."""
    now = step.now()
    reason = f"instance {alarm.instance_id} is not a node of cluster {alarm.cluster_name}: {err}"
    incident = Incident(
        incident_id=incident_id,
        cluster_name=alarm.cluster_name,
        instance_id=alarm.instance_id,
        state=IncidentState.SKIPPED,
        created_at=now,
        updated_at=now,
        reason=reason,
        closed_at=now,
        outcome=IncidentState.SKIPPED.value,
    )
    evidence.add_evidence(incident, evidence.alarm_evidence(alarm))
    try:
        step.deps.incidents.create(incident)
    except IncidentExists:
        return _redelivered(step, incident_id, alarm)
    logger.set_correlation_id(incident_id)
    step.audit(
        incident_id,
        "incident_skipped",
        {"reason": reason, "error": error_details(err), "event_id": alarm.event_id},
        [getattr(err, "request_id", None)],
    )
    count("IncidentsSkipped")
    logger.info("incident skipped", incident_id=incident_id, reason=reason)
    return {"incident_id": incident_id, "action": "skipped"}


def _attach(step: Step, holder: str, alarm: ContributorEvent) -> OpenIncidentResult:
    logger.set_correlation_id(holder)
    added = False

    def attach(incident: Incident) -> bool:
        nonlocal added
        added = evidence.add_evidence(incident, evidence.alarm_evidence(alarm))
        return added

    step.update(holder, attach)
    if added:
        step.audit(
            holder,
            "evidence_attached",
            {"kind": "alarm", "event_id": alarm.event_id, "metric": alarm.metric.value},
        )
        count("EvidenceAttached")
    else:
        logger.info("duplicate delivery", incident_id=holder, event_id=alarm.event_id)
    _ensure_execution(step, holder)
    return {"incident_id": holder, "action": "attached"}


def _redelivered(step: Step, incident_id: str, alarm: ContributorEvent) -> OpenIncidentResult:
    """The event that created `incident_id` came again (possibly after the incident closed)."""
    incident = step.load(incident_id)
    logger.set_correlation_id(incident_id)
    logger.info("event already handled", incident_id=incident_id, event_id=alarm.event_id)
    if incident.state is IncidentState.SKIPPED:
        return {"incident_id": incident_id, "action": "skipped"}
    if not incident.state.terminal:
        _ensure_execution(step, incident_id)
    return {"incident_id": incident_id, "action": "attached"}


def _ensure_execution(step: Step, incident_id: str) -> None:
    """Start the remediation execution unless the incident records one.

    A failure leaves the incident open (lock held, error recorded and audited) and re-raises:
    EventBridge retries the event, and the retry lands here again through the attach path.
    """
    incident = step.load(incident_id)
    if incident.execution_arn or incident.state.terminal:
        return
    payload = {
        "incident_id": incident.incident_id,
        "cluster_name": incident.cluster_name,
        "instance_id": incident.instance_id,
    }
    try:
        started = step.deps.workflow.start_execution(incident.incident_id, payload)
    except Exception as err:
        details = error_details(err, step=step.actor)

        def record_error(current: Incident) -> bool:
            current.error = details
            return True

        step.update(incident_id, record_error, incident)
        step.audit(incident_id, "execution_start_failed", details, [details.get("request_id")])
        raise

    def record(current: Incident) -> bool:
        current.execution_arn = started.arn
        current.error = None
        return True

    step.update(incident_id, record, incident)
    step.audit(
        incident_id,
        "execution_started",
        {"execution_arn": started.arn, "already_existed": started.already_existed},
        [started.request_id],
    )
    count("ExecutionsStarted")


def store_report(event: ReportEvent, deps: Deps) -> StoreReportResult:
    """Store the report under each instance it names; attach it to their open incidents."""
    step = Step(deps, "store_report")
    report = event.report
    subject = ids.event_subject(event.event_id)
    if report.cluster_name not in deps.settings.allowed_clusters:
        step.audit(
            subject,
            "report_ignored",
            {
                "report_id": report.report_id,
                "cluster_name": report.cluster_name,
                "reason": f"cluster {report.cluster_name} is not in ALLOWED_CLUSTERS",
            },
        )
        count("ReportsIgnored")
        return {"report_id": report.report_id, "stored": False}
    if not report.instances:
        step.audit(
            subject,
            "report_ignored",
            {
                "report_id": report.report_id,
                "cluster_name": report.cluster_name,
                "reason": "the report names no instance",
            },
        )
        count("ReportsIgnored")
        return {"report_id": report.report_id, "stored": False}

    expires_at = int((deps.clock.now() + REPORT_TTL).timestamp())
    stored = [
        i.instance_id
        for i in report.instances
        if deps.reports.put_report(report, i.instance_id, expires_at)
    ]
    if stored:
        step.audit(
            subject,
            "report_stored",
            {
                "report_id": report.report_id,
                "cluster_name": report.cluster_name,
                "instances": stored,
                "check": report.check,
                "step": report.step,
            },
        )
        count("ReportsStored")
    for instance_id in stored:
        holder = deps.incidents.open_incident_id(report.cluster_name, instance_id)
        if holder:
            _attach_report(step, holder, event, instance_id)
    logger.info("report handled", report_id=report.report_id, stored=bool(stored))
    return {"report_id": report.report_id, "stored": bool(stored)}


def _attach_report(step: Step, holder: str, event: ReportEvent, instance_id: str) -> None:
    item = evidence.report_evidence(event.report, instance_id)
    added = False

    def attach(incident: Incident) -> bool:
        nonlocal added
        added = evidence.add_evidence(incident, item)
        return added

    step.update(holder, attach)
    if added:
        step.audit(
            holder,
            "evidence_attached",
            {"kind": "report", "report_id": event.report.report_id, "event_id": event.event_id},
        )
        count("EvidenceAttached")
