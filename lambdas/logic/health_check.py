"""The deep health check: `start_health_check` starts it, `check_health` polls it.

Both run inside `Step.failing_visibly`: an error (a failed AWS call, an unexpected state) marks
the incident failed, is audited, and is re-raised so the state machine's Catch routes to
close-as-failed. A node-level incident checks its instance; a job-level one every involved
instance, one StartClusterHealthCheck per instance group.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sdc_remediation.lambdas.logic.core import lifecycle
from sdc_remediation.lambdas.logic.core.steps import Step, node_status_of
from sdc_remediation.lambdas.logic.ports import Deps
from sdc_remediation.lambdas.logic.safety import guard
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.errors import InvalidTransition, NodeNotFound
from sdc_remediation.lambdas.models.health_check import (
    CheckSummary,
    HealthCheckRecord,
    HealthCheckResult,
    NodeCheck,
)
from sdc_remediation.lambdas.models.hyperpod import NodeRecovery, NodeStatus
from sdc_remediation.lambdas.models.incident import Incident, IncidentState, Scope
from sdc_remediation.lambdas.models.payloads import HealthCheckStarted, HealthStatus, IncidentRef
from sdc_remediation.lambdas.observability import count, logger

S = IncidentState


def health_result(status: str, started: bool) -> HealthCheckResult | None:
    """None while a deep health check runs; then node_gone, not_run (we did not start one),
    passed (the node is Running again) or failed (any other status)."""
    if status == NodeStatus.DEEP_HEALTH_CHECK_IN_PROGRESS:
        return None
    if status == NodeStatus.NOT_FOUND:
        return HealthCheckResult.NODE_GONE
    if not started:
        return HealthCheckResult.NOT_RUN
    if status == NodeStatus.RUNNING:
        return HealthCheckResult.PASSED
    return HealthCheckResult.FAILED


def start_health_check(ref: IncidentRef, deps: Deps) -> HealthCheckStarted:
    """StartClusterHealthCheck for the incident's instance (every involved instance of a
    job-level incident) that is Running; records the node status as HyperPod then reports it.

    Nothing starts while the cluster is storm-held or the pipeline paused: the incident records
    the hold and the result says `held` (the state machine closes it as held). The request is
    written ahead (`requesting_at`) so that a retry after a crash does not start a second check
    on a node whose check already runs.

    After an approved reboot (`sdc_remediation.lambdas.logic.recovery`) it runs once more: the earlier result is
    kept under `before_reboot` and the new record says `after_reboot`."""
    step = Step(deps, "start_health_check")
    with step.failing_visibly(ref.incident_id):
        incident = step.load(ref.incident_id)
        if incident.state is S.HEALTH_CHECK and incident.health_check:
            _audit_if_unaudited(step, incident, incident.health_check)
            return {
                "status": str(incident.health_check.status),
                "started": incident.health_check.started,
                "held": False,
                "scope": incident.scope,
            }
        after_reboot = incident.state is S.REBOOTING
        if after_reboot and not incident.reboot_done:
            raise InvalidTransition("cannot start a health check: the reboot is not done")
        if incident.state not in (S.OPENED, S.REBOOTING):
            raise InvalidTransition(f"cannot start a health check: incident is {incident.state}")
        blocker = guard.blocker(deps, incident.cluster_name, trusted=incident.has_trusted_evidence)
        if blocker is not None:
            guard.hold_in_flight(step, incident, blocker)
            return {
                "status": str(incident.node_status),
                "started": False,
                "held": True,
                "scope": incident.scope,
            }
        if after_reboot:
            incident = step.update(ref.incident_id, _set_aside_health_check, incident)
        if incident.is_job:
            record, request_ids = _start_job_checks(step, incident)
        else:
            record, request_ids = _start_node_check(step, incident)
        if after_reboot:
            record = dataclasses.replace(record, after_reboot=True)
        status = NodeStatus(str(record.status))
        started = record.started

        def advance(current: Incident) -> bool:
            lifecycle.advance(current, S.HEALTH_CHECK, step.now())
            before = current.health_check.before_reboot if current.health_check else None
            current.health_check = dataclasses.replace(record, before_reboot=before)
            if not current.is_job:
                current.node_status = status
            return True

        step.update(ref.incident_id, advance)
        _audit_start(step, incident, record, request_ids)
        count(M.HEALTH_CHECKS_STARTED if started else M.HEALTH_CHECKS_NOT_STARTED)
        logger.info("health check", incident_id=ref.incident_id, started=started, status=status)
        return {"status": status, "started": started, "held": False, "scope": incident.scope}


_START_ACTIONS = (AuditAction.HEALTH_CHECK_STARTED, AuditAction.HEALTH_CHECK_NOT_STARTED)


def _audit_start(
    step: Step,
    incident: Incident,
    record: HealthCheckRecord,
    request_ids: list[str | None],
    **extra: Any,
) -> None:
    step.audit(
        incident.incident_id,
        _START_ACTIONS[0] if record.started else _START_ACTIONS[1],
        {
            **record.to_record(),
            "instance_group": incident.instance_group,
            "automatic_recovery": incident.node_recovery == NodeRecovery.AUTOMATIC,
            **extra,
        },
        request_ids,
    )


def _audit_if_unaudited(step: Step, incident: Incident, record: HealthCheckRecord) -> None:
    """A retry finding the check started and recorded: an earlier attempt died after saving it,
    perhaps before its audit entry. The audit must name every check that was started, so the
    entry is written now if it is missing (one per check: two after a reboot)."""
    checks = 2 if record.after_reboot else 1
    audited = sum(e.action in _START_ACTIONS for e in step.deps.audit.entries(incident.incident_id))
    if audited < checks:
        _audit_start(step, incident, record, [], recorded_late=True)


def _set_aside_health_check(current: Incident) -> bool:
    """Before the check after a reboot: the first check's record moves under `before_reboot`."""
    first = current.health_check
    current.health_check = HealthCheckRecord(
        after_reboot=True, before_reboot=first.summary() if first else CheckSummary()
    )
    return True


def _write_ahead(step: Step, incident: Incident) -> Incident:
    """Note that a StartClusterHealthCheck is about to be sent (kept if the handler dies)."""

    def note(current: Incident) -> bool:
        current.health_check = dataclasses.replace(
            current.health_check or HealthCheckRecord(), requesting_at=step.now()
        )
        return True

    return step.update(incident.incident_id, note, incident)


def _start_node_check(step: Step, incident: Incident) -> tuple[HealthCheckRecord, list[str | None]]:
    deps = step.deps
    checks = list(deps.settings.health_checks)
    status, before_id = node_status_of(deps, incident)
    request_ids: list[str | None] = [before_id]
    pending = incident.health_check.requesting_at if incident.health_check else None
    reason = None
    started = False
    resumed = False
    group = incident.instance_group
    if status == NodeStatus.RUNNING and group:
        incident = _write_ahead(step, incident)
        request_ids.append(
            deps.hyperpod.start_health_check(
                incident.cluster_name, group, [incident.instance_id], checks
            )
        )
        started = True
        status, after_id = node_status_of(deps, incident)
        request_ids.append(after_id)
    elif pending and status == NodeStatus.DEEP_HEALTH_CHECK_IN_PROGRESS:
        started = resumed = True  # an earlier attempt's request went through, then it died
    elif status != NodeStatus.RUNNING:
        reason = f"node status is {status}, not Running"
    else:
        reason = "the node's instance group is unknown"
    record = HealthCheckRecord(
        started=started,
        checks=tuple(checks),
        status=status,
        result=health_result(status, started),
        reason=reason,
        started_at=step.now() if started else None,
        resumed=resumed,
    )
    return record, request_ids


def _start_job_checks(step: Step, incident: Incident) -> tuple[HealthCheckRecord, list[str | None]]:
    """One StartClusterHealthCheck per instance group, for the involved nodes that are Running."""
    deps = step.deps
    checks = list(deps.settings.health_checks)
    pending = incident.health_check.requesting_at if incident.health_check else None
    nodes: dict[str, NodeCheck] = {}
    groups: dict[str, list[str]] = {}
    request_ids: list[str | None] = []
    for instance_id in incident.instance_ids:
        try:
            info = deps.hyperpod.describe_node(incident.cluster_name, instance_id)
            status, group, request_id = info.status, info.instance_group, info.request_id
        except NodeNotFound as err:
            status, group, request_id = NodeStatus.NOT_FOUND, None, err.request_id
        request_ids.append(request_id)
        node = NodeCheck(status, group)
        if status == NodeStatus.RUNNING and group:
            groups.setdefault(group, []).append(instance_id)
        elif pending and status == NodeStatus.DEEP_HEALTH_CHECK_IN_PROGRESS:
            node = dataclasses.replace(node, started=True)
        else:
            node = dataclasses.replace(node, reason=f"node status is {status}, not Running")
        nodes[instance_id] = node
    if groups:
        incident = _write_ahead(step, incident)
    for group, instance_ids in sorted(groups.items()):
        request_ids.append(
            deps.hyperpod.start_health_check(incident.cluster_name, group, instance_ids, checks)
        )
        for instance_id in instance_ids:  # the next poll reads their real status
            nodes[instance_id] = dataclasses.replace(
                nodes[instance_id],
                started=True,
                status=NodeStatus.DEEP_HEALTH_CHECK_IN_PROGRESS.value,
            )
    nodes = {
        i: dataclasses.replace(n, result=health_result(n.status, n.started))
        for i, n in nodes.items()
    }
    record = HealthCheckRecord(
        started=any(n.started for n in nodes.values()),
        checks=tuple(checks),
        nodes=nodes,
        status=job_summary(nodes),
        result=None if any(n.result is None for n in nodes.values()) else HealthCheckResult.DONE,
        reason=None if nodes else "no involved instance left",
        started_at=step.now(),
    )
    return record, request_ids


def job_summary(nodes: dict[str, NodeCheck]) -> str:
    """`2 running, 1 passed, 1 failed` over a job-level incident's nodes."""
    counts: dict[str, int] = {}
    for node in nodes.values():
        label = "running" if node.result is None else node.result
        counts[label] = counts.get(label, 0) + 1
    return ", ".join(f"{n} {label}" for label, n in sorted(counts.items())) or "no nodes"


def check_health(ref: IncidentRef, deps: Deps) -> HealthStatus:
    """One poll of the node status (of every node, job level); audited when it changes."""
    step = Step(deps, "check_health")
    with step.failing_visibly(ref.incident_id):
        incident = step.load(ref.incident_id)
        if incident.state is not S.HEALTH_CHECK:
            raise InvalidTransition(f"no health check to poll: incident is {incident.state}")
        if incident.is_job:
            return _check_job(step, incident)
        incident, status, result = _check_node(step, incident)
        held = False
        if result is not None and status != NodeStatus.NOT_FOUND:
            # The approval request comes next: a storm or a pause holds it here, so no approval
            # card goes out while the cluster is held.
            blocker = guard.blocker(
                deps, incident.cluster_name, trusted=incident.has_trusted_evidence
            )
            if blocker is not None:
                guard.hold_in_flight(step, incident, blocker)
                held = True
        return {
            "status": status,
            "in_progress": result is None,
            "scope": Scope.NODE,
            "held": held,
            "passed_after_reboot": not held and lifecycle.passed_after_reboot(incident),
        }


def _check_node(step: Step, incident: Incident) -> tuple[Incident, NodeStatus, str | None]:
    """One look at a node-level check: recorded, audited when it changed."""
    status, request_id = node_status_of(step.deps, incident)
    previous = incident.health_check or HealthCheckRecord()
    result = health_result(status, previous.started)
    changed = status != previous.status or result != previous.result
    polls = (previous.polls or 0) + 1

    def record(current: Incident) -> bool:
        current.health_check = dataclasses.replace(
            current.health_check or HealthCheckRecord(),
            status=status,
            result=result,
            polls=polls,
        )
        current.node_status = status
        return True

    incident = step.update(incident.incident_id, record, incident)
    if changed:
        step.audit(
            incident.incident_id,
            AuditAction.HEALTH_CHECK_STATUS,
            {"status": status, "result": result, "in_progress": result is None, "polls": polls},
            [request_id],
        )
    return incident, status, result


# -- after a reboot that reconciliation saw through ------------------------------------------


def start_after_reboot(step: Step, incident: Incident) -> HealthCheckRecord:
    """The deep health check after a reboot, for an incident whose execution is gone
    (reconciliation, `sdc_remediation.lambdas.logic.closing`): the same request `start_health_check` sends after
    a reboot, recorded (the first check set aside under `before_reboot`) and audited; the
    incident's state is left as it is. Not started when the node is not Running (the record
    says why): the next run tries again."""
    if not (incident.health_check and incident.health_check.after_reboot):
        incident = step.update(incident.incident_id, _set_aside_health_check, incident)
    if incident.is_job:
        record, request_ids = _start_job_checks(step, incident)
    else:
        record, request_ids = _start_node_check(step, incident)
    record = dataclasses.replace(record, after_reboot=True)

    def save(current: Incident) -> bool:
        before = current.health_check.before_reboot if current.health_check else None
        current.health_check = dataclasses.replace(record, before_reboot=before)
        if not current.is_job:
            current.node_status = NodeStatus(str(record.status))
        return True

    incident = step.update(incident.incident_id, save, incident)
    _audit_start(step, incident, record, request_ids, by="reconciliation")
    return incident.health_check or record


def poll_after_reboot(step: Step, incident: Incident) -> HealthCheckRecord:
    """One look at the check `start_after_reboot` started, recorded as `check_health` records
    it."""
    if incident.is_job:
        incident = _record_job_look(step, incident)
    else:
        incident, _, _ = _check_node(step, incident)
    return incident.health_check or HealthCheckRecord()


def passed_every_node(record: HealthCheckRecord) -> bool:
    """A finished check that gives the node back: passed (or the node gone), on every node of a
    job-level incident."""
    fine = (HealthCheckResult.PASSED, HealthCheckResult.NODE_GONE)
    if record.nodes is not None:
        return bool(record.nodes) and all(n.result in fine for n in record.nodes.values())
    return record.result in fine


def _check_job(step: Step, incident: Incident) -> HealthStatus:
    incident = _record_job_look(step, incident)
    record = incident.health_check or HealthCheckRecord()
    return {
        "status": str(record.status),
        "in_progress": record.result is None,
        "scope": Scope.JOB,
        "held": False,
        "passed_after_reboot": False,
    }


def _record_job_look(step: Step, incident: Incident) -> Incident:
    """One look at every node of a job-level check still running: recorded, audited when the
    summary changed."""
    previous = incident.health_check or HealthCheckRecord()
    nodes = dict(previous.nodes or {})
    request_ids: list[str | None] = []
    for instance_id, node in previous.nodes.items() if previous.nodes else ():
        if node.result is not None:
            continue
        try:
            info = step.deps.hyperpod.describe_node(incident.cluster_name, instance_id)
            status, request_id = info.status, info.request_id
        except NodeNotFound as err:
            status, request_id = NodeStatus.NOT_FOUND, err.request_id
        request_ids.append(request_id)
        nodes[instance_id] = dataclasses.replace(
            node, status=status, result=health_result(status, node.started)
        )
    summary = job_summary(nodes)
    in_progress = any(n.result is None for n in nodes.values())
    polls = (previous.polls or 0) + 1

    def record(current: Incident) -> bool:
        current.health_check = dataclasses.replace(
            current.health_check or HealthCheckRecord(),
            nodes=nodes,
            status=summary,
            result=None if in_progress else HealthCheckResult.DONE,
            polls=polls,
        )
        return True

    incident = step.update(incident.incident_id, record, incident)
    if summary != previous.status:
        step.audit(
            incident.incident_id,
            AuditAction.HEALTH_CHECK_STATUS,
            {"status": summary, "in_progress": in_progress, "polls": polls},
            request_ids,
        )
    return incident
