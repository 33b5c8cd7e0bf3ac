"""Opening an incident: a node-level one for an instance, or a job-level one for the involved
instances of an ambiguous report.

Both go one way (`_create`): an incident that exists already is a redelivery; HyperPod is asked
about the cluster (and the node), and what it does not know is skipped; the guards of
`lambdas.logic.safety.guard` may hold the incident instead (a storm hold, a muted alarm, the pause
switch, a full blast-radius guard), and before all of them, for an incident a report asks for, the
rate bound of `lambdas.logic.safety.rate` (before it is drafted); the incident is created atomically with its open lock and
its guard slot, or finds another incident holding the lock and attaches to it; it is audited and
its remediation execution started. What differs by scope is drafted first (`_Draft`). An
incident the training watch's evidence alone asks for goes by its decision table row's course
(`course_of`, after the node's telemetry is read): a notice only is held (kind `notice`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from lambdas.logic.core import ids
from lambdas.logic.core.steps import Step, error_details, mark_audited
from lambdas.logic.evidence import summaries, telemetry
from lambdas.logic.evidence.recommendation import course_of
from lambdas.logic.evidence.summaries import MAX_NAME
from lambdas.logic.opening import arrivals, claims, holding
from lambdas.logic.opening.arrivals import Trigger
from lambdas.logic.opening.execution import ensure_execution
from lambdas.logic.safety import guard, rate
from lambdas.metric_names import PipelineMetric as M
from lambdas.models.audit import AuditAction
from lambdas.models.errors import ClaimNotConfirmed, ClusterNotFound, NodeNotFound, SdcError
from lambdas.models.guard import HoldKind
from lambdas.models.hyperpod import NodeRecovery, NodeStatus
from lambdas.models.incident import Incident, IncidentState, Scope, TriggerSource
from lambdas.models.payloads import OpenAction, OpenIncidentResult
from lambdas.models.recommendation import Course
from lambdas.models.reporter_text import clean_or_none
from lambdas.models.writes import Created, GuardFull, IncidentExists, LockHeld
from lambdas.observability import count, logger


@dataclass(frozen=True, slots=True)
class _Draft:
    """An incident about to be created, and what only its scope knows about its opening."""

    incident: Incident
    node_count: int | None
    """The cluster's, as HyperPod counts them: the blast-radius guard's limit depends on it."""
    details: Callable[[Incident], dict[str, Any]]
    """The `incident_opened` audit details of the incident as created."""
    request_ids: list[str | None]
    flag: tuple[str, ...] = ()
    """The instances to flag for storm detection (HyperPod confirmed them)."""


def open_node(step: Step, trigger: Trigger, *, flagged: bool = False) -> OpenIncidentResult:
    """The trigger's instance gets its incident: the one whose open lock it holds or the held
    one that speaks for it (the trigger attaches), else a new one. `flagged`: the caller has
    flagged the instance for storm detection already."""
    deps = step.deps
    holder = deps.incidents.open_incident_id(trigger.cluster_name, trigger.instance_id)
    if holder:
        return arrivals.attach(step, holder, trigger)
    # Before the id check: a report and its alarm within the same second share an incident id.
    held_by = deps.incidents.held_incident_id(
        trigger.cluster_name, trigger.instance_id, holding.epoch(step)
    )
    if held_by and holding.still_held(step, held_by, trigger):
        return arrivals.attach_held(step, held_by, trigger)
    incident_id = ids.incident_id(trigger.cluster_name, trigger.instance_id, trigger.at)
    return _create(
        step,
        incident_id,
        trigger,
        partial(_node_draft, flag=not flagged),
        [trigger.instance_id],
    )


def open_job(step: Step, trigger: Trigger, free: list[str]) -> OpenIncidentResult:
    """One job-level incident for the involved instances of an ambiguous report (`trigger`)
    that no incident speaks for yet (`free`)."""
    assert trigger.report is not None
    incident_id = ids.job_incident_id(trigger.cluster_name, trigger.report.report_id, trigger.at)
    return _create(step, incident_id, trigger, partial(_job_draft, free=free), free)


def _create(
    step: Step,
    incident_id: str,
    trigger: Trigger,
    draft: Callable[[Step, str, Trigger], _Draft | OpenIncidentResult],
    named: list[str],
) -> OpenIncidentResult:
    """The one way an incident opens (see the module docstring). `named`: the instances the
    trigger names (a job-level incident's, unchecked)."""
    deps = step.deps
    if deps.incidents.get(incident_id) is not None:
        return arrivals.redelivered(step, incident_id, trigger)
    # A storm hold holds every opening already, with its one notice (and an audited reset).
    if trigger.source == TriggerSource.REPORT and not deps.guard.active_hold(trigger.cluster_name):
        assert trigger.report is not None
        over = rate.take(step, trigger.cluster_name, trigger.report.job_name)
        if over is not None:
            unchecked = _unchecked(step, incident_id, trigger, named)
            return holding.hold(step, unchecked, trigger, over)
    drafted = draft(step, incident_id, trigger)
    if not isinstance(drafted, _Draft):
        return drafted
    incident = drafted.incident
    blocker = _blocker(step, trigger, drafted.flag) or _notice_only(step, incident)
    if blocker is not None:
        return holding.hold(step, incident, trigger, blocker)
    limit = guard.open_limit(drafted.node_count, deps.settings)
    if len(incident.guard_slots) > limit:
        too_many = guard.too_many_nodes(incident, limit, drafted.node_count)
        return holding.hold(step, incident, trigger, too_many)
    match deps.incidents.create(incident, slot_limit=limit):
        case Created():
            return _opened(step, drafted, trigger, limit)
        case LockHeld(holder=holder):
            return arrivals.attach(step, holder, trigger)
        case IncidentExists():
            return arrivals.redelivered(step, incident_id, trigger)
        case GuardFull() as full:
            reason = (
                f"blast-radius guard: {len(full.slots)} node(s) taken by "
                f"{len(full.open_ids)} open incident(s) on {trigger.cluster_name} "
                f"({', '.join(full.open_ids)}), this one needs {len(incident.guard_slots)}, "
                f"at most {full.limit} for {drafted.node_count or 'an unknown number of'} nodes"
            )
            return holding.hold(step, incident, trigger, guard.Blocker(HoldKind.GUARD, reason))


def _unchecked(step: Step, incident_id: str, trigger: Trigger, named: list[str]) -> Incident:
    """The incident a report asked for, as the rate bound holds it: not drafted (no node or
    Kubernetes check of its own), so every instance it names is unconfirmed (and a job-level one
    has no nodes)."""
    assert trigger.report is not None
    now = step.now()
    why = "not checked: the rate bound held the incident before any check"
    incident = Incident(
        incident_id=incident_id,
        cluster_name=trigger.cluster_name,
        instance_id=trigger.instance_id,
        state=IncidentState.OPENED,
        created_at=now,
        updated_at=now,
        scope=Scope.NODE if trigger.instance_id else Scope.JOB,
        job_name=clean_or_none(trigger.report.job_name, MAX_NAME),
        unconfirmed=dict.fromkeys(named, why),
    )
    summaries.add_evidence(incident, trigger.item)
    return incident


def _blocker(step: Step, trigger: Trigger, flag: Sequence[str]) -> guard.Blocker | None:
    """What holds the incident: the cluster's storm hold (these flags may start it), the
    trigger's alarm mute rule, or the pause switch."""
    if flag:
        storm = guard.flag(step, trigger.cluster_name, flag)
    else:
        storm = step.deps.guard.active_hold(trigger.cluster_name)
    if storm is not None:
        return guard.Blocker(
            HoldKind.STORM, f"storm hold {storm.hold_id}: {storm.reason}", storm.hold_id
        )
    return trigger.mute or guard.pause_blocker(step.deps)


def _notice_only(step: Step, incident: Incident) -> guard.Blocker | None:
    """The notice that holds an incident whose course is notice only (`course_of`: the decision
    table's row for the training watch's evidence alone). Before it is judged, the node's
    telemetry is read and kept on the incident: it is the hardware corroboration a straggler or
    a hang localised by one signal needs, and the isolation step judges the course again from
    the same record. Nothing is read for evidence that acts anyway, nor for a job-level incident
    (it names no one node)."""
    course, why = course_of(incident)
    if course is Course.ACT:
        return None
    if not incident.is_job:
        incident.telemetry = telemetry.gather(step.deps, incident, step.deps.clock.now())
        course, why = course_of(incident)
    if course is not Course.NOTICE:
        return None
    read = f"; telemetry: {incident.telemetry.summary}" if incident.telemetry else ""
    return guard.Blocker(HoldKind.NOTICE, f"notice only: {why}{read}")


def _opened(step: Step, drafted: _Draft, trigger: Trigger, limit: int) -> OpenIncidentResult:
    """Created: a job-level incident takes its instances' open locks; audited, counted, and its
    execution started."""
    incident = drafted.incident
    logger.set_correlation_id(incident.incident_id)
    if incident.is_job:
        incident = arrivals.claim_locks(step, incident)
    step.audit(
        incident.incident_id,
        AuditAction.INCIDENT_OPENED,
        {**drafted.details(incident), "guard_limit": limit},
        drafted.request_ids,
    )
    step.created(incident)
    count(M.JOB_INCIDENTS_OPENED if incident.is_job else M.INCIDENTS_OPENED)
    logger.info(
        "incident opened",
        incident_id=incident.incident_id,
        scope=incident.scope,
        source=trigger.source,
    )
    ensure_execution(step, incident.incident_id, incident)
    return {"incident_id": incident.incident_id, "action": OpenAction.OPENED}


def _node_draft(
    step: Step, incident_id: str, trigger: Trigger, *, flag: bool
) -> _Draft | OpenIncidentResult:
    """The node as HyperPod describes it, with the report that named it (for an alarm: the
    instance's latest stored report); skipped when HyperPod does not know the node. `flag`: the
    node is to be flagged for storm detection (the caller has not yet)."""
    deps = step.deps
    controller = claims.controller_refusal(step, trigger.cluster_name, trigger.instance_id)
    if controller is not None:
        return _skip(step, incident_id, trigger, ClaimNotConfirmed(controller), controller)
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
    own = claims.ALARM_CLAIMS if trigger.source == TriggerSource.ALARM else trigger.claims
    if own is not None:
        # The trigger's own claim, before it counts toward a storm or cordons anything.
        try:
            refused = claims.mismatches(step, cluster, own, [trigger.instance_id])
        except Exception as err:
            _open_failed(step, trigger, err)
            raise
        if refused:
            why = refused[trigger.instance_id]
            reason = (
                f"{claims.confirmer(step, cluster)} does not confirm the "
                f"{trigger.source.value} for {trigger.instance_id}: {why}"
            )
            return _skip(step, incident_id, trigger, ClaimNotConfirmed(why), reason)

    report = trigger.report
    if report is None and trigger.source == TriggerSource.ALARM:
        report = deps.reports.latest_report(trigger.cluster_name, trigger.instance_id)
    try:
        mismatched = claims.mismatches(step, cluster, report, [trigger.instance_id])
    except Exception as err:
        _open_failed(step, trigger, err)
        raise
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
        job_name=clean_or_none(report.job_name, MAX_NAME) if report else None,
        unconfirmed=mismatched,
    )
    summaries.add_evidence(incident, trigger.item)
    if report is not None:
        summaries.add_evidence(incident, summaries.report_evidence(report, trigger.instance_id))

    def details(opened: Incident) -> dict[str, Any]:
        return {
            "cluster_name": opened.cluster_name,
            "instance_id": opened.instance_id,
            "instance_group": opened.instance_group,
            "node_status": opened.node_status,
            "node_recovery": opened.node_recovery,
            "automatic_recovery": cluster.node_recovery == NodeRecovery.AUTOMATIC,
            "source": trigger.source,
            "metric": trigger.metric,
            "event_id": trigger.event_id,
            "report_id": report.report_id if report else None,
            "node_count": cluster.node_count,
        }

    return _Draft(
        incident,
        cluster.node_count,
        details,
        [cluster.request_id, node.request_id],
        flag=(trigger.instance_id,) if flag else (),
    )


def _job_draft(
    step: Step, incident_id: str, trigger: Trigger, *, free: list[str]
) -> _Draft | OpenIncidentResult:
    """The job of an ambiguous report, over the `free` instances HyperPod confirms are nodes of
    the cluster (the others are kept as `unconfirmed`, never acted on); skipped (audited under
    the event, nothing recorded) when HyperPod knows neither the cluster nor any of them."""
    report = trigger.report
    assert report is not None
    try:
        cluster = step.deps.hyperpod.describe_cluster(trigger.cluster_name)
        nodes, unconfirmed = claims.hyperpod_nodes(step, trigger.cluster_name, free)
        # More nodes than the guard allows hold the incident whatever Kubernetes says.
        within = len(nodes) <= guard.open_limit(cluster.node_count, step.deps.settings)
        mismatched = claims.mismatches(step, cluster, report, nodes) if within else {}
    except ClusterNotFound as err:
        return _skip_job(step, trigger, free, str(err), err.request_id)
    except Exception as err:
        _open_failed(step, trigger, err)
        raise
    unconfirmed.update(mismatched)
    nodes = [i for i in nodes if i not in mismatched]
    if not nodes:
        reason = (
            f"no instance the report names is a confirmed node of cluster {trigger.cluster_name}"
        )
        return _skip_job(step, trigger, free, reason, cluster.request_id, unconfirmed)
    now = step.now()
    incident = Incident(
        incident_id=incident_id,
        cluster_name=trigger.cluster_name,
        instance_id="",
        state=IncidentState.OPENED,
        created_at=now,
        updated_at=now,
        node_recovery=cluster.node_recovery,
        scope=Scope.JOB,
        instance_ids=nodes,
        job_name=clean_or_none(report.job_name, MAX_NAME),
        unconfirmed=unconfirmed,
    )
    summaries.add_evidence(incident, trigger.item)

    def details(opened: Incident) -> dict[str, Any]:
        return {
            "scope": Scope.JOB,
            "cluster_name": opened.cluster_name,
            "instance_ids": opened.instance_ids,
            "job_name": opened.job_name,
            "report_id": report.report_id,
            "check": report.check,
            "node_recovery": opened.node_recovery,
            "source": trigger.source,
            "event_id": trigger.event_id,
            "unconfirmed": opened.unconfirmed,
        }

    return _Draft(incident, cluster.node_count, details, [cluster.request_id], flag=tuple(nodes))


def _skip_job(
    step: Step,
    trigger: Trigger,
    instances: list[str],
    reason: str,
    request_id: str | None,
    unconfirmed: dict[str, str] | None = None,
) -> OpenIncidentResult:
    assert trigger.report is not None
    step.audit(
        ids.event_subject(trigger.event_id),
        AuditAction.JOB_INCIDENT_SKIPPED,
        {
            "report_id": trigger.report.report_id,
            "reason": reason,
            "instances": instances,
            "unconfirmed": unconfirmed or {},
        },
        [request_id],
    )
    return {"incident_id": None, "action": OpenAction.SKIPPED}


def _skip(
    step: Step, incident_id: str, trigger: Trigger, err: SdcError, reason: str | None = None
) -> OpenIncidentResult:
    """HyperPod does not know the instance (or Kubernetes does not confirm an alarm's claim):
    record a closed, skipped incident (no lock, no storm flag)."""
    now = step.now()
    reason = reason or (
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
    )
    summaries.add_evidence(incident, trigger.item)
    if isinstance(step.deps.incidents.create(incident), IncidentExists):
        return arrivals.redelivered(step, incident_id, trigger)
    logger.set_correlation_id(incident_id)
    step.audit(
        incident_id,
        AuditAction.INCIDENT_SKIPPED,
        {"reason": reason, "error": error_details(err), "event_id": trigger.event_id},
        [getattr(err, "request_id", None)],
    )
    step.created(incident)
    count(M.INCIDENTS_SKIPPED)
    logger.info("incident skipped", incident_id=incident_id, reason=reason)
    return {"incident_id": incident_id, "action": OpenAction.SKIPPED}


def _open_failed(step: Step, trigger: Trigger, err: Exception) -> None:
    subject = ids.event_subject(trigger.event_id)
    step.audit(
        subject,
        AuditAction.OPEN_FAILED,
        error_details(
            err,
            source=trigger.source,
            cluster_name=trigger.cluster_name,
            instance_id=trigger.instance_id or None,
        ),
        [getattr(err, "request_id", None)],
    )
    mark_audited(err, AuditAction.OPEN_FAILED, subject)
