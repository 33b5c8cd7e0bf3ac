"""Opening an incident for a claim that HyperPod and the orchestrator confirmed (the intake's
BOUND and CONFIRM stages are done): a node-level one for each node (`take_node`), or a
job-level one for the confirmed nodes of an ambiguous report (`take_job`). Both go the same
stages, in `sdc_remediation.lambdas.logic.intake`'s order:

- BUDGET: a node whose incident is open joins it, one a hold still speaks for joins the held
  incident (`holding.still_held`: a hold absorbs only what it would hold), and an event
  delivered again finds what it made: none of them spends anything. Otherwise the cluster's
  storm hold, the trigger's alarm mute rule or the pause switch holds it, and else the rate
  bound (`sdc_remediation.lambdas.logic.safety.rate`, for the trigger kinds that spend it) takes one opening;
- JUDGE: the incident is drafted from the confirmed node and its evidence and judged by the one
  policy (`course_of`, after the node's telemetry is read): a notice only is held (kind
  `notice`);
- ACT: held (`holding.hold`), or created atomically with its open lock and its guard slots (the
  blast-radius guard of `sdc_remediation.lambdas.logic.safety.guard`: a full guard holds it), or it finds
  another incident holding the lock and joins it; its remediation execution is started;
- AUDIT: each of those writes its audit entry (`incident_opened`, `incident_held`,
  `evidence_attached`, `incident_skipped`); the trail names them.

A node HyperPod or the orchestrator does not confirm is refused (`_refuse`): a closed, skipped
incident, nothing spent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sdc_remediation.lambdas.logic.core import ids
from sdc_remediation.lambdas.logic.core.steps import Step, error_details
from sdc_remediation.lambdas.logic.evidence import summaries, telemetry
from sdc_remediation.lambdas.logic.evidence.recommendation import course_of
from sdc_remediation.lambdas.logic.evidence.summaries import MAX_NAME
from sdc_remediation.lambdas.logic.opening import arrivals, holding
from sdc_remediation.lambdas.logic.opening.arrivals import Trigger
from sdc_remediation.lambdas.logic.opening.claims import Checked, Confirmed
from sdc_remediation.lambdas.logic.opening.execution import ensure_execution
from sdc_remediation.lambdas.logic.opening.trail import audited_since, mark, passed
from sdc_remediation.lambdas.logic.ports import Deps
from sdc_remediation.lambdas.logic.safety import guard, rate
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.claim import Claim, NodeClaim, Spends, Stage
from sdc_remediation.lambdas.models.errors import ClaimNotConfirmed, SdcError
from sdc_remediation.lambdas.models.evidence import TriggerSource
from sdc_remediation.lambdas.models.guard import HoldKind
from sdc_remediation.lambdas.models.hyperpod import ClusterInfo, NodeRecovery
from sdc_remediation.lambdas.models.incident import Incident, IncidentState, Scope
from sdc_remediation.lambdas.models.payloads import OpenAction, OpenIncidentResult
from sdc_remediation.lambdas.models.recommendation import Course
from sdc_remediation.lambdas.models.reporter_text import clean_or_none
from sdc_remediation.lambdas.models.writes import Created, GuardFull, IncidentExists, LockHeld
from sdc_remediation.lambdas.observability import count, logger


@dataclass(frozen=True, slots=True)
class _Draft:
    """An incident about to be created, and what only its scope knows about its opening."""

    incident: Incident
    node_count: int | None
    """The cluster's, as HyperPod counts them: the blast-radius guard's limit depends on it."""
    details: Callable[[Incident], dict[str, Any]]
    """The `incident_opened` audit details of the incident as created."""
    request_ids: list[str | None]


# -- one node or one job of a confirmed claim (the intake's stages 3. to 6.) ------------


def take_node(
    step: Step, claim: Claim, checked: Checked, found: Confirmed, spends: Spends
) -> OpenIncidentResult | None:
    """One node of a node-level claim: refused when not confirmed, joined when it only joins,
    else its incident opened, joined or held (`_open_node`)."""
    if found.instance_id is None:
        at = mark(step)
        _ignored(step, claim, found.why_not or "names no instance")
        passed(step, Stage.ACT, None, action=OpenAction.IGNORED, why=found.why_not)
        passed(step, Stage.AUDIT, None, audited=audited_since(step, at))
        return None
    trigger = _trigger(claim, found.claim, found.instance_id)
    if not found.claim.opens:
        return _join_only(step, claim, trigger)
    if not found.confirmed or checked.cluster is None:
        return _refuse(step, trigger, found)
    return _open_node(step, trigger, found, checked.cluster, spends)


def _join_only(step: Step, claim: Claim, trigger: Trigger) -> OpenIncidentResult | None:
    """Evidence that opens nothing by itself (an involved instance of a report, a resolved
    alert): it joins the node's open incident, or (an alert) is audited."""
    at = mark(step)
    holder = step.deps.incidents.open_incident_id(claim.cluster_name, trigger.instance_id)
    if holder:
        arrivals.attach_items(step, holder, [trigger.item], claim.event_id, claim.source)
        result: OpenIncidentResult = {"incident_id": holder, "action": OpenAction.ATTACHED}
        return _joined(step, trigger.instance_id, result, at, "nothing: joins")
    if claim.source is TriggerSource.HARDWARE:
        _ignored(step, claim, "resolved: recorded; it closes no incident")
    passed(step, Stage.ACT, trigger.instance_id, action=OpenAction.IGNORED)
    passed(step, Stage.AUDIT, trigger.instance_id, audited=audited_since(step, at))
    return None


def take_job(
    step: Step, claim: Claim, checked: Checked, spends: Spends
) -> list[OpenIncidentResult]:
    """An ambiguous report: the instances it names that an incident speaks for get the report
    attached; one job-level incident opens over the confirmed others (the rest are kept
    unconfirmed, never acted on). A node of a job too large to act on that nobody asked about
    (`Confirmed.pending`) is not looked up either: the job is held over it, and a person's
    `proceed` takes each node's lock, leaving out those another incident holds."""
    report = claim.report
    assert report is not None and claim.job_item is not None
    results: list[OpenIncidentResult] = []
    free: list[str] = []
    unconfirmed: dict[str, str] = {}
    for found in checked.nodes:
        instance_id = found.instance_id or ""
        if found.pending:
            free.append(instance_id)
            continue
        holder = step.deps.incidents.open_incident_id(claim.cluster_name, instance_id)
        if holder:
            item = summaries.report_evidence(report, instance_id)
            arrivals.attach_items(step, holder, [item], claim.event_id, TriggerSource.REPORT)
            if not any(r["incident_id"] == holder for r in results):
                results.append({"incident_id": holder, "action": OpenAction.ATTACHED})
        elif found.confirmed or found.pending:
            free.append(instance_id)
        else:
            unconfirmed[instance_id] = found.why_not or "not confirmed"
    if not free and not unconfirmed:
        return results
    trigger = Trigger(
        cluster_name=claim.cluster_name,
        instance_id="",
        at=claim.at,
        event_id=claim.event_id,
        source=claim.source,
        item=claim.job_item,
        report=report,
    )
    # Its own nodes: one that joined an open incident vouches for none of the job's others, and
    # the report is kept (`intake.keep`) under the confirmed nodes, where a `proceed` reads its
    # claims.
    if not any(c.confirmed and c.instance_id in free for c in checked.nodes):
        unconfirmed |= dict.fromkeys(free, "not asked: none of the job's own nodes was confirmed")
        free = []
    opened = _open_job(
        step, trigger, free, unconfirmed, checked.cluster, spends, oversized=checked.oversized
    )
    return [*results, opened]


def _trigger(claim: Claim, node: NodeClaim, instance_id: str) -> Trigger:
    mute = (
        guard.mute_blocker(claim.alarm_name or "", claim.mute) if claim.mute is not None else None
    )
    return Trigger(
        cluster_name=claim.cluster_name,
        instance_id=instance_id,
        at=claim.at,
        event_id=claim.event_id,
        source=claim.source,
        item=node.item,
        report=claim.report,
        metric=node.metric,
        mute=mute,
    )


def _ignored(step: Step, claim: Claim, reason: str) -> None:
    step.audit(
        ids.event_subject(claim.event_id),
        AuditAction.EVENT_IGNORED,
        {"reason": reason, "cluster_name": claim.cluster_name},
    )
    count(M.EVENTS_IGNORED)
    logger.info("claim ignored", event_id=claim.event_id, reason=reason)


# -- opening ------------------------------------------------------------------------------------


def _open_node(
    step: Step, trigger: Trigger, found: Confirmed, cluster: ClusterInfo, spends: Spends
) -> OpenIncidentResult:
    """BUDGET, JUDGE, ACT and AUDIT for one confirmed node of a claim."""
    at = mark(step)
    found_one = _join(step, trigger)
    if found_one is not None:
        return _joined(step, trigger.instance_id, found_one, at, spent="nothing: joins")
    incident_id = _incident_id(step, trigger)
    if step.deps.incidents.get(incident_id) is not None:
        redelivered = arrivals.redelivered(step, incident_id, trigger)
        return _joined(step, trigger.instance_id, redelivered, at, spent="nothing: redelivered")
    blocker = _spend(step, trigger, spends)
    passed(step, Stage.BUDGET, trigger.instance_id, held=blocker.kind if blocker else None)
    drafted = _node_draft(step, incident_id, trigger, found, cluster)
    blocker = blocker or _notice_only(step, drafted.incident)
    passed(step, Stage.JUDGE, trigger.instance_id, held=blocker.kind if blocker else None)
    return _act(step, drafted, trigger, blocker, at)


def _incident_id(step: Step, trigger: Trigger) -> str:
    return node_incident_id(
        step.deps, trigger.cluster_name, trigger.instance_id, trigger.at, trigger.item.key
    )


def node_incident_id(
    deps: Deps, cluster_name: str, instance_id: str, at: datetime, key: str
) -> str:
    """The node-level incident a trigger dated `at` bringing the evidence `key` asks for:
    `sdc-<cluster>-<instance>-<stamp>`, unless an incident holding no such evidence took that
    id first; then the same id with a digest of `key` beside the instance, which no other
    trigger gives. A report dates itself: a forged one dated the second a genuine alarm fires,
    or the minute a rate-held claim is taken again, refused (or held) there, would otherwise
    make the genuine trigger a redelivery of it, taken no further."""
    first = ids.incident_id(cluster_name, instance_id, at)
    there = deps.incidents.get(first)
    if there is None or any(e.get("key") == key for e in there.evidence):
        return first
    return ids.keyed_incident_id(cluster_name, instance_id, at, key)


def _open_job(
    step: Step,
    trigger: Trigger,
    nodes: list[str],
    unconfirmed: dict[str, str],
    cluster: ClusterInfo | None,
    spends: Spends,
    *,
    oversized: bool = False,
) -> OpenIncidentResult:
    """BUDGET, JUDGE, ACT and AUDIT for the job-level incident of an ambiguous report over its
    confirmed `nodes` that no incident speaks for yet (`unconfirmed`: the others it names that
    no incident speaks for, each with why: kept, never acted on)."""
    assert trigger.report is not None
    at = mark(step)
    if not nodes or cluster is None:
        reason = (
            f"no instance the report names is a confirmed node of cluster {trigger.cluster_name}"
        )
        skipped = _skip_job(step, trigger, sorted(unconfirmed), reason, None, unconfirmed)
        passed(step, Stage.ACT, None, action=skipped["action"])
        passed(step, Stage.AUDIT, None, audited=audited_since(step, at))
        return skipped
    incident_id = ids.job_incident_id(trigger.cluster_name, trigger.report.report_id, trigger.at)
    if step.deps.incidents.get(incident_id) is not None:
        redelivered = arrivals.redelivered(step, incident_id, trigger)
        return _joined(step, None, redelivered, at, spent="nothing: redelivered")
    blocker = _spend(step, trigger, spends)
    passed(step, Stage.BUDGET, None, held=blocker.kind if blocker else None)
    drafted = _job_draft(step, incident_id, trigger, nodes, unconfirmed, cluster)
    if oversized and blocker is None:
        # More nodes than may act at once, or than were asked about: held whatever the checks
        # would say; a person's `proceed` checks each.
        limit = guard.open_limit(cluster.node_count, step.deps.settings)
        blocker = guard.too_many_nodes(drafted.incident, limit, cluster.node_count)
    blocker = blocker or _notice_only(step, drafted.incident)
    passed(step, Stage.JUDGE, None, held=blocker.kind if blocker else None)
    return _act(step, drafted, trigger, blocker, at)


def _joined(
    step: Step, instance_id: str | None, result: OpenIncidentResult, at: int, spent: str
) -> OpenIncidentResult:
    """The trail of a node that joined what speaks for it: nothing spent, judged again with the
    incident it joined (`arrivals.attach_items`)."""
    passed(step, Stage.BUDGET, instance_id, spent=spent)
    passed(step, Stage.JUDGE, instance_id, judged="with the incident it joins")
    passed(step, Stage.ACT, instance_id, action=result["action"])
    passed(step, Stage.AUDIT, instance_id, audited=audited_since(step, at))
    return result


def _join(step: Step, trigger: Trigger) -> OpenIncidentResult | None:
    """The incident whose open lock the node holds, or the held one that still speaks for this
    trigger, with the trigger attached; None when neither does."""
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
    return None


def _spend(step: Step, trigger: Trigger, spends: Spends) -> guard.Blocker | None:
    """What holds the opening before it spends anything: the cluster's storm hold (the claim's
    confirmed nodes were flagged first), the trigger's alarm mute rule, the pause switch; else
    the rate bound, for the trigger kinds that spend it (a Blocker when it is over)."""
    held = (
        guard.storm_blocker(step.deps, trigger.cluster_name, trusted=trigger.source.trusted)
        or trigger.mute
        or guard.pause_blocker(step.deps)
    )
    if held is not None or not spends.rate:
        return held
    job = trigger.report.job_name if trigger.report is not None else None
    return rate.take(step, trigger.cluster_name, job)


def _act(
    step: Step,
    drafted: _Draft,
    trigger: Trigger,
    blocker: guard.Blocker | None,
    at: int,
) -> OpenIncidentResult:
    """Held, or created with its guard slots (a full guard holds it), or joined to the incident
    that took its lock meanwhile; then the trail's ACT and AUDIT."""
    result = _create(step, drafted, trigger, blocker)
    instance_id = trigger.instance_id or None
    passed(step, Stage.ACT, instance_id, action=result["action"])
    passed(step, Stage.AUDIT, instance_id, audited=audited_since(step, at))
    return result


def _create(
    step: Step, drafted: _Draft, trigger: Trigger, blocker: guard.Blocker | None
) -> OpenIncidentResult:
    deps = step.deps
    incident = drafted.incident
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
            return arrivals.redelivered(step, incident.incident_id, trigger)
        case GuardFull() as full:
            reason = (
                f"blast-radius guard: {len(full.slots)} node(s) taken by "
                f"{len(full.open_ids)} open incident(s) on {trigger.cluster_name} "
                f"({', '.join(full.open_ids)}), this one needs {len(incident.guard_slots)}, "
                f"at most {full.limit} for {drafted.node_count or 'an unknown number of'} nodes"
            )
            return holding.hold(step, incident, trigger, guard.Blocker(HoldKind.GUARD, reason))
    raise AssertionError("unreachable")  # pragma: no cover


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
    step: Step, incident_id: str, trigger: Trigger, found: Confirmed, cluster: ClusterInfo
) -> _Draft:
    """The confirmed node as HyperPod described it, with the trigger's evidence and the reports
    that come with it (its own report; for an alarm, the node's stored reports the orchestrator
    confirms)."""
    node = found.node
    assert node is not None
    now = step.now()
    report = found.reports[0] if found.reports else None
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
        unconfirmed=dict(found.unconfirmed),
    )
    summaries.add_evidence(incident, trigger.item)
    for each in found.reports:
        summaries.add_evidence(incident, summaries.report_evidence(each, trigger.instance_id))

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

    return _Draft(incident, cluster.node_count, details, [cluster.request_id, node.request_id])


def _job_draft(
    step: Step,
    incident_id: str,
    trigger: Trigger,
    nodes: list[str],
    unconfirmed: dict[str, str],
    cluster: ClusterInfo,
) -> _Draft:
    """The job of an ambiguous report over its confirmed `nodes` (the others it names are kept
    as `unconfirmed`, never acted on)."""
    report = trigger.report
    assert report is not None
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

    return _Draft(incident, cluster.node_count, details, [cluster.request_id])


def _refuse(step: Step, trigger: Trigger, found: Confirmed) -> OpenIncidentResult:
    """A node of a claim that HyperPod or the orchestrator does not confirm: a closed, skipped
    incident (no lock, no storm flag, no budget), its trail ACT and AUDIT."""
    at = mark(step)
    err: SdcError = found.error or ClaimNotConfirmed(found.why_not or "not confirmed")
    incident_id = _incident_id(step, trigger)
    result = _skip(step, incident_id, trigger, err, found.why_not)
    passed(step, Stage.ACT, trigger.instance_id, action=result["action"], why=found.why_not)
    passed(step, Stage.AUDIT, trigger.instance_id, audited=audited_since(step, at))
    return result


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
