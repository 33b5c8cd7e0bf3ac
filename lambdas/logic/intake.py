"""Events in: contributor alarms and SDC reports open incidents, or attach to open ones.

Either channel alone is enough. The report (PutEvents, seconds after the check fired) usually
comes first: a report naming a culprit or confirmed suspect opens that instance's incident, and
the contributor alarm (a minute or more later) finds the open lock and attaches. An ambiguous
report (no strict majority, a reduced gradient, nothing attributable) opens one job-level
incident that holds the locks of the involved instances, so their alarms attach to it instead
of opening one incident per node. Without a report, the alarm opens the incident itself.

Before a node-level incident acts, the guards of `lambdas.logic.guard` apply: its instance is
flagged for storm detection, and a storm hold, a muted alarm (`muteDetail`: an alarm mute rule
mutes the alarm's actions), the pause switch or a full blast-radius guard record it as `held`
(nothing acts) instead. A report flags every instance it names before it
opens any, so a report naming a storm's worth of culprits holds them all under one storm hold.

A held incident is closed at birth, so it takes no open lock; it takes a held lock on its
instance instead, valid for STORM_WINDOW_SECONDS. Whatever else arrives for the instance in that
window (the alarm after the report, a redelivery, the next report) is attached to the held
incident: one held incident and at most one notice per instance and window, whichever channel
comes first. After the window, or once the storm hold is reset or the pause switch is back to
false, a new trigger is judged afresh.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from lambdas.logic import cards, evidence, guard, ids
from lambdas.logic._steps import Step, error_details, send_notice
from lambdas.logic.history import record_history
from lambdas.logic.ports import Deps
from lambdas.metric_names import PipelineMetric as M
from lambdas.models.errors import ClusterNotFound, NodeNotFound, SdcError
from lambdas.models.events import ContributorEvent, ReportEvent, SdcReport
from lambdas.models.guard import HoldKind
from lambdas.models.hyperpod import NodeRecovery, NodeStatus
from lambdas.models.incident import Incident, IncidentState, Scope
from lambdas.models.payloads import OpenIncidentResult, StoreReportResult
from lambdas.models.writes import Claimed, Created, GuardFull, HeldBy, IncidentExists, LockHeld
from lambdas.observability import count, logger
from trainer_emitter.contract import Role

REPORT_TTL = timedelta(days=14)
OPENING_ROLES = frozenset({Role.CULPRIT, Role.CONFIRMED_SUSPECT})
"""The roles for which a report opens a node-level incident by itself."""


@dataclass(frozen=True, slots=True)
class Trigger:
    """What asks for a node-level incident: a contributor alarm or a report naming the node."""

    cluster_name: str
    instance_id: str
    at: datetime
    """The alarm's state change, or the report's emission: the incident id's timestamp."""
    event_id: str
    source: str
    """"alarm" or "report"."""
    item: dict[str, Any]
    """The evidence it brings."""
    report: SdcReport | None = None
    """A report to attach as well (for an alarm: the instance's latest stored report)."""
    metric: str | None = None
    mute: guard.Blocker | None = None
    """An alarm mute rule mutes the alarm that is the trigger: its incident is held."""


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
        source="alarm",
        item=evidence.alarm_evidence(alarm),
        metric=alarm.metric.value,
        mute=guard.mute_blocker(alarm.alarm_name, alarm.mute) if alarm.mute else None,
    )
    return _open_node(step, trigger)


def _open_node(step: Step, trigger: Trigger, *, flagged: bool = False) -> OpenIncidentResult:
    """`flagged`: the caller has flagged the instance for storm detection already."""
    deps = step.deps
    holder = deps.incidents.open_incident_id(trigger.cluster_name, trigger.instance_id)
    if holder:
        return _attach(step, holder, trigger)
    # Before the id check: a report and its alarm within the same second share an incident id.
    held_by = deps.incidents.held_incident_id(
        trigger.cluster_name, trigger.instance_id, _epoch(step)
    )
    if held_by and _still_held(step, held_by):
        return _attach_held(step, held_by, trigger)
    incident_id = ids.incident_id(trigger.cluster_name, trigger.instance_id, trigger.at)
    if deps.incidents.get(incident_id) is not None:
        return _redelivered(step, incident_id, trigger)

    try:
        cluster = deps.hyperpod.describe_cluster(trigger.cluster_name)
        node = deps.hyperpod.describe_node(trigger.cluster_name, trigger.instance_id)
    except (ClusterNotFound, NodeNotFound) as err:
        return _skip(step, incident_id, trigger, err)
    except Exception as err:
        _open_failed(step, trigger, err)
        raise
    if node.status == NodeStatus.NOT_FOUND:
        return _skip(step, incident_id, trigger, NodeNotFound("node status is NotFound"))

    report = trigger.report
    if report is None and trigger.source == "alarm":
        report = deps.reports.latest_report(trigger.cluster_name, trigger.instance_id)
    now = step.now()
    incident = Incident(
        incident_id=incident_id,
        cluster_name=trigger.cluster_name,
        instance_id=trigger.instance_id,
        state=IncidentState.OPENED,
        created_at=now,
        updated_at=now,
        instance_group=node.instance_group,
        node_logical_id=node.logical_id,
        node_status=node.status,
        node_recovery=cluster.node_recovery,
        job_name=report.job_name if report else None,
    )
    evidence.add_evidence(incident, trigger.item)
    if report is not None:
        evidence.add_evidence(incident, evidence.report_evidence(report, trigger.instance_id))

    if flagged:
        hold = deps.guard.active_hold(trigger.cluster_name)
    else:
        hold = guard.flag(step, trigger.cluster_name, [trigger.instance_id], trigger.at)
    blocker = (
        guard.Blocker(HoldKind.STORM, f"storm hold {hold.hold_id}: {hold.reason}", hold.hold_id)
        if hold
        else trigger.mute or guard.pause_blocker(deps)
    )
    if blocker is not None:
        return _hold(step, incident, trigger, blocker)
    limit = guard.open_limit(cluster.node_count, deps.settings)
    match deps.incidents.create(incident, slot_limit=limit):
        case Created():
            pass
        case LockHeld(holder=holder):
            return _attach(step, holder, trigger)
        case IncidentExists():
            return _redelivered(step, incident_id, trigger)
        case GuardFull() as full:
            reason = (
                f"blast-radius guard: {len(full.open_ids)} incident(s) open on "
                f"{trigger.cluster_name} ({', '.join(full.open_ids)}), at most {full.limit} for "
                f"{cluster.node_count or 'an unknown number of'} nodes"
            )
            return _hold(step, incident, trigger, guard.Blocker(HoldKind.GUARD, reason))

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
            "source": trigger.source,
            "metric": trigger.metric,
            "event_id": trigger.event_id,
            "report_id": report.report_id if report else None,
            "guard_limit": limit,
            "node_count": cluster.node_count,
        },
        [cluster.request_id, node.request_id],
    )
    count(M.INCIDENTS_OPENED)
    logger.info(
        "incident opened",
        incident_id=incident_id,
        instance_id=trigger.instance_id,
        source=trigger.source,
    )
    _ensure_execution(step, incident_id, incident)
    return {"incident_id": incident_id, "action": "opened"}


def _open_failed(step: Step, trigger: Trigger, err: Exception) -> None:
    step.audit(
        ids.event_subject(trigger.event_id),
        "open_failed",
        error_details(
            err,
            source=trigger.source,
            cluster_name=trigger.cluster_name,
            instance_id=trigger.instance_id or None,
        ),
        [getattr(err, "request_id", None)],
    )


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
    count(M.EVENTS_IGNORED)
    logger.info("event ignored", event_id=alarm.event_id, reason=reason)
    return {"incident_id": None, "action": "ignored"}


def _skip(step: Step, incident_id: str, trigger: Trigger, err: SdcError) -> OpenIncidentResult:
    """HyperPod does not know the instance: record a closed, skipped incident (no lock)."""
    now = step.now()
    reason = (
        f"instance {trigger.instance_id} is not a node of cluster {trigger.cluster_name}: {err}"
    )
    incident = Incident(
        incident_id=incident_id,
        cluster_name=trigger.cluster_name,
        instance_id=trigger.instance_id,
        state=IncidentState.SKIPPED,
        created_at=now,
        updated_at=now,
        reason=reason,
        closed_at=now,
        outcome=IncidentState.SKIPPED.value,
    )
    evidence.add_evidence(incident, trigger.item)
    if isinstance(step.deps.incidents.create(incident), IncidentExists):
        return _redelivered(step, incident_id, trigger)
    logger.set_correlation_id(incident_id)
    step.audit(
        incident_id,
        "incident_skipped",
        {"reason": reason, "error": error_details(err), "event_id": trigger.event_id},
        [getattr(err, "request_id", None)],
    )
    count(M.INCIDENTS_SKIPPED)
    logger.info("incident skipped", incident_id=incident_id, reason=reason)
    return {"incident_id": incident_id, "action": "skipped"}


def _hold(
    step: Step, incident: Incident, trigger: Trigger, blocker: guard.Blocker
) -> OpenIncidentResult:
    """Record the incident as held: closed at once, no open lock, no guard slot, nothing acts;
    it takes the held lock of its instance(s) for the hold window.

    Notified on its own unless it is held by a storm (the storm hold's one notification covers
    every incident it holds)."""
    at = step.now()
    incident.state = IncidentState.HELD
    incident.hold = blocker.record()
    incident.reason = blocker.reason
    incident.outcome = IncidentState.HELD.value
    incident.closed_at = at
    now = _epoch(step)
    until = now + step.deps.settings.storm_window_seconds
    replacing: str | None = None
    while True:
        match step.deps.incidents.create_held(incident, until=until, now=now, replacing=replacing):
            case Created():
                break
            case IncidentExists():
                return _redelivered(step, incident.incident_id, trigger)
            case HeldBy(holder=holder):
                if replacing is not None or _still_held(step, holder):
                    return _attach_held(step, holder, trigger)
                replacing = holder  # its hold has ended: this hold takes the lock over
    if incident.is_job:
        for instance_id in incident.instance_ids:
            step.deps.incidents.claim_held(
                incident.cluster_name, instance_id, incident.incident_id, until=until, now=now
            )
    logger.set_correlation_id(incident.incident_id)
    step.audit(
        incident.incident_id,
        "incident_held",
        {
            **blocker.record(),
            "cluster_name": incident.cluster_name,
            "instance_id": incident.instance_id or None,
            "instance_ids": incident.instance_ids,
            "source": trigger.source,
            "event_id": trigger.event_id,
        },
    )
    count(M.INCIDENTS_HELD)
    logger.info("incident held", incident_id=incident.incident_id, kind=blocker.kind)
    record_history(step, incident)
    if blocker.kind != HoldKind.STORM:
        notify_held(step, incident)
    return {"incident_id": incident.incident_id, "action": "held"}


def notify_held(step: Step, incident: Incident) -> None:
    """The held notice; a failed publish is audited (the incident stays recorded, a redelivery
    of its event tries again), never raised."""
    notice = cards.held_notice(incident)
    send_notice(step, incident, notice.subject, notice.text, "held", "held_notified", incident)


def _attach(step: Step, holder: str, trigger: Trigger) -> OpenIncidentResult:
    logger.set_correlation_id(holder)
    items = [trigger.item]
    if trigger.source == "report" and trigger.report is not None:
        items = [evidence.report_evidence(trigger.report, trigger.instance_id)]
    incident = _attach_items(step, holder, items, trigger.event_id, trigger.source)
    _ensure_execution(step, holder, incident)
    return {"incident_id": holder, "action": "attached"}


def _attach_held(step: Step, holder: str, trigger: Trigger) -> OpenIncidentResult:
    """Another channel (or a later event, or a redelivery) for an instance a held incident
    speaks for: its evidence joins the held incident; nothing acts. Its held notice goes out
    only if it has not yet (a failed publish is retried by the next event)."""
    logger.set_correlation_id(holder)
    incident = _attach_items(step, holder, [trigger.item], trigger.event_id, trigger.source)
    if not incident.close_notified and (incident.hold or {}).get("kind") != HoldKind.STORM:
        notify_held(step, incident)
    return {"incident_id": holder, "action": "held"}


def _still_held(step: Step, incident_id: str) -> bool:
    """Whether what held the incident still holds: a reset storm hold, a pause switch flipped
    back or an ended mute window lets the next trigger be judged afresh (the recipe was fixed; a
    GPU that still fails is not to be swallowed by the old hold). A guard hold keeps its window:
    judging afresh would only hold again, with a second notice."""
    incident = step.deps.incidents.get(incident_id)
    hold = (incident.hold if incident else None) or {}
    if hold.get("kind") == HoldKind.STORM:
        active = step.deps.guard.active_hold(incident.cluster_name) if incident else None
        return active is not None and active.hold_id == hold.get("hold_id")
    if hold.get("kind") == HoldKind.PAUSED:
        return guard.pause_blocker(step.deps) is not None
    if hold.get("kind") == HoldKind.MUTED:
        until = guard.muted_until(hold)
        return until is not None and step.deps.clock.now() < until
    return incident is not None


def _epoch(step: Step) -> int:
    return int(step.deps.clock.now().timestamp())


def _attach_items(
    step: Step, holder: str, items: list[dict[str, Any]], event_id: str, kind: str
) -> Incident:
    added: list[str] = []

    def attach(incident: Incident) -> bool:
        added.clear()
        for item in items:
            if evidence.add_evidence(incident, item):
                added.append(item["key"])
        return bool(added)

    incident = step.update(holder, attach)
    if added:
        step.audit(
            holder,
            "evidence_attached",
            {"kind": kind, "keys": added, "event_id": event_id},
        )
        count(M.EVIDENCE_ATTACHED)
    else:
        logger.info("duplicate delivery", incident_id=holder, event_id=event_id)
    return incident


def _redelivered(step: Step, incident_id: str, trigger: Trigger) -> OpenIncidentResult:
    """The event that created `incident_id` came again (possibly after the incident closed)."""
    incident = step.load(incident_id)
    logger.set_correlation_id(incident_id)
    logger.info("event already handled", incident_id=incident_id, event_id=trigger.event_id)
    if incident.state is IncidentState.SKIPPED:
        return {"incident_id": incident_id, "action": "skipped"}
    if incident.state is IncidentState.HELD and incident.execution_arn is None:
        if not incident.close_notified and (incident.hold or {}).get("kind") != HoldKind.STORM:
            notify_held(step, incident)
        return {"incident_id": incident_id, "action": "held"}
    if not incident.state.terminal:
        if incident.is_job:
            incident = _claim_locks(step, incident)
        _ensure_execution(step, incident_id, incident)
    return {"incident_id": incident_id, "action": "attached"}


def _ensure_execution(step: Step, incident_id: str, current: Incident | None = None) -> None:
    """Start the remediation execution unless the incident records one; `current` is the
    incident as the caller just wrote or read it (else it is loaded).

    A failure leaves the incident open (lock held, error recorded and audited) and re-raises:
    EventBridge retries the event, and the retry lands here again through the attach path.
    """
    incident = current if current is not None else step.load(incident_id)
    if incident.execution_arn or incident.state.terminal:
        return
    payload: dict[str, Any] = {
        "incident_id": incident.incident_id,
        "cluster_name": incident.cluster_name,
        "instance_id": incident.instance_id or None,
    }
    if incident.is_job:
        payload |= {"scope": incident.scope, "instance_ids": incident.instance_ids}
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
    count(M.EXECUTIONS_STARTED)


# -- reports ----------------------------------------------------------------------------------


def store_report(event: ReportEvent, deps: Deps) -> StoreReportResult:
    """Store the report under each instance it names, attach it to their open incidents, and
    open what it names: a node-level incident per culprit or confirmed suspect without one, or,
    for an ambiguous report, one job-level incident for the involved instances without one."""
    step = Step(deps, "store_report")
    report = event.report
    subject = ids.event_subject(event.event_id)
    reason = None
    if report.cluster_name not in deps.settings.allowed_clusters:
        reason = f"cluster {report.cluster_name} is not in ALLOWED_CLUSTERS"
    elif not report.instances:
        reason = "the report names no instance"
    if reason:
        step.audit(
            subject,
            "report_ignored",
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
            "report_stored",
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


def _open_named(step: Step, event: ReportEvent) -> list[OpenIncidentResult]:
    report = event.report
    results: list[OpenIncidentResult] = []
    at = report.emitted
    opening = [i.instance_id for i in report.instances if i.role in OPENING_ROLES]
    if opening:
        step.deps.settings.require_state_machine_arn()
        # All at once, before any opens: a report naming a storm's worth of nodes is a storm.
        guard.flag(step, report.cluster_name, opening, at)
    for instance in report.instances:
        trigger = Trigger(
            cluster_name=report.cluster_name,
            instance_id=instance.instance_id,
            at=at,
            event_id=event.event_id,
            source="report",
            item=evidence.report_evidence(report, instance.instance_id),
            report=report,
            metric=instance.metrics[0].value if instance.metrics else None,
        )
        if instance.role in OPENING_ROLES:
            results.append(_open_node(step, trigger, flagged=True))
            continue
        holder = step.deps.incidents.open_incident_id(report.cluster_name, instance.instance_id)
        if holder:
            _attach_items(step, holder, [trigger.item], event.event_id, "report")
            results.append({"incident_id": holder, "action": "attached"})
    return results


def _open_job(step: Step, event: ReportEvent) -> list[OpenIncidentResult]:
    """An ambiguous report: one job-level incident for the involved instances that have no open
    incident (those that do get the report attached)."""
    deps = step.deps
    report = event.report
    results: list[OpenIncidentResult] = []
    free: list[str] = []
    for instance in report.instances:
        holder = deps.incidents.open_incident_id(report.cluster_name, instance.instance_id)
        item = evidence.report_evidence(report, instance.instance_id)
        if holder:
            _attach_items(step, holder, [item], event.event_id, "report")
            if not any(r["incident_id"] == holder for r in results):
                results.append({"incident_id": holder, "action": "attached"})
        else:
            free.append(instance.instance_id)
    if not free:
        return results
    deps.settings.require_state_machine_arn()
    at = report.emitted
    incident_id = ids.job_incident_id(report.cluster_name, report.report_id, at)
    job_trigger = Trigger(
        cluster_name=report.cluster_name,
        instance_id="",
        at=at,
        event_id=event.event_id,
        source="report",
        item=evidence.report_evidence(report, None),
        report=report,
    )
    if deps.incidents.get(incident_id) is not None:
        return [*results, _redelivered(step, incident_id, job_trigger)]
    try:
        cluster = deps.hyperpod.describe_cluster(report.cluster_name)
    except ClusterNotFound as err:
        step.audit(
            ids.event_subject(event.event_id),
            "job_incident_skipped",
            {"report_id": report.report_id, "reason": str(err), "instances": free},
            [err.request_id],
        )
        return [*results, {"incident_id": None, "action": "skipped"}]
    except Exception as err:
        _open_failed(step, job_trigger, err)
        raise
    now = step.now()
    incident = Incident(
        incident_id=incident_id,
        cluster_name=report.cluster_name,
        instance_id="",
        state=IncidentState.OPENED,
        created_at=now,
        updated_at=now,
        node_recovery=cluster.node_recovery,
        scope=Scope.JOB.value,
        instance_ids=free,
        job_name=report.job_name,
    )
    evidence.add_evidence(incident, job_trigger.item)
    blocker = guard.blocker(deps, report.cluster_name)
    if blocker is not None:
        return [*results, _hold(step, incident, job_trigger, blocker)]
    limit = guard.open_limit(cluster.node_count, deps.settings)
    match deps.incidents.create(incident, slot_limit=limit):
        case Created():
            pass
        case IncidentExists():
            return [*results, _redelivered(step, incident_id, job_trigger)]
        case GuardFull() as full:
            reason = (
                f"blast-radius guard: {len(full.open_ids)} incident(s) open on "
                f"{report.cluster_name}, at most {full.limit}"
            )
            held = _hold(step, incident, job_trigger, guard.Blocker(HoldKind.GUARD, reason))
            return [*results, held]
    logger.set_correlation_id(incident_id)
    incident = _claim_locks(step, incident)
    claimed = incident.instance_ids
    step.audit(
        incident_id,
        "incident_opened",
        {
            "scope": Scope.JOB.value,
            "cluster_name": incident.cluster_name,
            "instance_ids": claimed,
            "job_name": report.job_name,
            "report_id": report.report_id,
            "check": report.check,
            "node_recovery": incident.node_recovery,
            "source": "report",
            "event_id": event.event_id,
            "guard_limit": limit,
        },
        [cluster.request_id],
    )
    count(M.JOB_INCIDENTS_OPENED)
    logger.info("job incident opened", incident_id=incident_id, instances=len(claimed))
    _ensure_execution(step, incident_id, incident)
    return [*results, {"incident_id": incident_id, "action": "opened"}]


def _claim_locks(step: Step, incident: Incident) -> Incident:
    """Take the open locks of a job-level incident's instances; an instance another incident
    took meanwhile leaves the job (its alarm belongs to that incident). Idempotent. Returns the
    incident as written: its `instance_ids` are the instances it holds."""
    claimed = [
        i
        for i in incident.instance_ids
        if isinstance(
            step.deps.incidents.claim_lock(incident.cluster_name, i, incident.incident_id),
            Claimed,
        )
    ]
    if claimed != incident.instance_ids:

        def keep(current: Incident) -> bool:
            current.instance_ids = claimed
            return True

        return step.update(incident.incident_id, keep, incident)
    return incident
