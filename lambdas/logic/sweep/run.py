"""One run of a cluster's idle sweep (the package docstring says what it does, in order).

Its audit entry (`idle_sweep`, under `sweep_subject(cluster)`) is the run's whole record: the
checks it started, every other node with the reason it was not checked, the results it took of
earlier runs' checks (and the incident each failure opened), and the checks still running,
which the next run reads back from this entry. A run the pause switch or a storm hold stops
still takes the results of the checks already running (a failure goes to the intake, which
holds its incident as it holds any), and starts nothing.

Between the choice and the call a job may land on a chosen node: every chosen node is looked
at again just before StartClusterHealthCheck, and one no longer idle is left out (`turned_busy`,
with what was seen). What remains is the time of one call: on EKS HyperPod labels the node
Unschedulable as the check starts, on Slurm it holds it in a maintenance reservation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from sdc_remediation.lambdas.logic.core.steps import Step
from sdc_remediation.lambdas.logic.health_check import health_result
from sdc_remediation.lambdas.logic.ports import Deps
from sdc_remediation.lambdas.logic.safety import guard
from sdc_remediation.lambdas.logic.sweep import claim
from sdc_remediation.lambdas.logic.sweep.choose import choose
from sdc_remediation.lambdas.logic.sweep.looks import NotJudged, look
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.errors import NodeNotFound
from sdc_remediation.lambdas.models.health_check import HealthCheckResult
from sdc_remediation.lambdas.models.hyperpod import ClusterInfo, NodeRecovery, NodeStatus
from sdc_remediation.lambdas.models.sweep import (
    MAX_CONFIGURATIONS,
    CheckResult,
    NodeLook,
    Pending,
    SkipReason,
    SweepRecord,
    SweepRequest,
    sweep_subject,
)
from sdc_remediation.lambdas.observability import logger

ACTOR = "sweep_idle"


def sweep(request: SweepRequest, deps: Deps) -> dict[str, Any]:
    """Run the cluster's sweep once; returns its audit record (`SweepRecord`)."""
    step = Step(deps, ACTOR)
    subject = sweep_subject(request.cluster_name)
    checks = tuple(str(c) for c in request.checks)
    if request.cluster_name not in deps.settings.allowed_clusters:
        record = SweepRecord(
            request.cluster_name,
            checks,
            held=f"cluster {request.cluster_name} is not in ALLOWED_CLUSTERS: nothing checked",
        )
        step.audit(subject, AuditAction.IDLE_SWEEP, record.to_record())
        return record.to_record()
    last = deps.audit.last(subject)
    before = dict(last.details) if last and last.action == AuditAction.IDLE_SWEEP else {}
    pending = [Pending.from_record(p) for p in before.get("pending") or []]
    cluster = deps.hyperpod.describe_cluster(request.cluster_name)
    automatic = cluster.node_recovery == NodeRecovery.AUTOMATIC
    results, running = _results(step, cluster, pending)
    request_ids = [cluster.request_id]
    base = SweepRecord(
        cluster.name,
        checks,
        pending=tuple(p.to_record() for p in running),
        results=tuple(r.to_record() for r in results),
        automatic_recovery=automatic,
    )
    # its own health checks: a storm of reports and alarms does not stop it
    blocker = guard.blocker(deps, cluster.name, trusted=True)
    if blocker is not None:
        return _audit(step, subject, replace(base, held=blocker.reason), request_ids, before)
    try:
        looks = look(step, cluster)
    except NotJudged as err:
        return _audit(step, subject, replace(base, held=str(err)), request_ids, before)
    open_ids = {i for i in looks if deps.incidents.open_incident_id(cluster.name, i)}
    state = deps.guard.guard_state(cluster.name)
    room = guard.open_limit(cluster.node_count, deps.settings) - state.open_nodes - len(running)
    choice = choose(
        looks.values(),
        request,
        in_incident=open_ids,
        pending={p.instance_id for p in running},
        guard_room=room,
        cursor=before.get("cursor"),
    )
    skipped = {i: str(r) for i, r in choice.skipped.items()}
    details = {i: looks[i].detail or "" for i in choice.skipped if looks[i].detail}
    chosen = list(choice.chosen)
    if chosen:
        again = look(step, cluster)  # just before the call: a job may have landed meanwhile
        for node in list(chosen):
            now = again.get(node.instance_id)
            if now is None or not now.idle:
                chosen.remove(node)
                skipped[node.instance_id] = str(SkipReason.TURNED_BUSY)
                details[node.instance_id] = (
                    now.detail if now and now.detail else "gone from the node list"
                )
    started: list[NodeLook] = []
    failure: Exception | None = None
    if chosen:
        try:
            _start(step, cluster.name, chosen, checks, started, request_ids)
        except Exception as err:
            # The results read above and the checks the calls before it started are recorded
            # all the same (their results are read by the next run); it tries the rest again.
            failure = err
    at = step.now()
    record = replace(
        base,
        checked=tuple(n.instance_id for n in started),
        skipped=skipped,
        details=details,
        idle=choice.idle,
        limit=choice.limit,
        pending=(
            *base.pending,
            *(Pending(n.instance_id, n.instance_group, at, checks).to_record() for n in started),
        ),
        held=(
            f"StartClusterHealthCheck failed: {type(failure).__name__}: {failure}"[:1000]
            if failure is not None
            else None
        ),
    )
    cursor = started[-1].instance_id if started else before.get("cursor")
    audited = _audit(step, subject, record, request_ids, {"cursor": cursor})
    if failure is not None:
        raise failure
    return audited


def _start(
    step: Step,
    cluster_name: str,
    chosen: Sequence[NodeLook],
    checks: Sequence[str],
    started: list[NodeLook],
    request_ids: list[str | None],
) -> None:
    """One StartClusterHealthCheck, one configuration per instance group (at most 99 groups
    a call: more groups, more calls). Each call's nodes go into `started` and its request id
    into `request_ids` once it returned, so a call that fails after others leaves theirs
    recorded."""
    groups: dict[str, list[NodeLook]] = {}
    for node in chosen:
        groups.setdefault(node.instance_group or "", []).append(node)
    names = sorted(groups)
    for first in range(0, len(names), MAX_CONFIGURATIONS):
        batch = {g: groups[g] for g in names[first : first + MAX_CONFIGURATIONS]}
        ids = {g: [n.instance_id for n in nodes] for g, nodes in batch.items()}
        request_ids.append(step.deps.hyperpod.start_health_checks(cluster_name, ids, checks))
        started.extend(n for nodes in batch.values() for n in nodes)


def _results(
    step: Step, cluster: ClusterInfo, pending: Sequence[Pending]
) -> tuple[list[CheckResult], list[Pending]]:
    """The earlier runs' checks that finished (a failed one into the intake) and those still
    running."""
    results: list[CheckResult] = []
    running: list[Pending] = []
    for check in pending:
        try:
            node = step.deps.hyperpod.describe_node(cluster.name, check.instance_id)
            status, message = node.status, node.message
        except NodeNotFound:
            status, message = NodeStatus.NOT_FOUND, "the node is gone (HyperPod replaced it)"
        outcome = health_result(status, started=True)
        if outcome is None:
            running.append(check)
            continue
        result = CheckResult(
            instance_id=check.instance_id,
            passed=outcome == HealthCheckResult.PASSED,
            status=str(status),
            message=message,
            checks=check.checks,
            started_at=check.started_at,
        )
        if outcome == HealthCheckResult.FAILED:
            opened = claim.open_failed_check(step, cluster.name, result)
            result = replace(
                result, incident_id=opened.get("incident_id"), action=str(opened.get("action"))
            )
            logger.info(
                "sweep check failed",
                cluster_name=cluster.name,
                instance_id=check.instance_id,
                incident_id=result.incident_id,
            )
        results.append(result)
    return results, running


def _audit(
    step: Step,
    subject: str,
    record: SweepRecord,
    request_ids: Sequence[str | None],
    carried: Mapping[str, Any],
) -> dict[str, Any]:
    """The run's audit entry: its record, and the cursor the next run starts after."""
    details = {**record.to_record(), "cursor": carried.get("cursor")}
    step.audit(subject, AuditAction.IDLE_SWEEP, details, request_ids)
    logger.info(
        "idle sweep",
        cluster_name=record.cluster_name,
        checked=len(record.checked),
        skipped=len(record.skipped),
        results=len(record.results),
        held=record.held,
    )
    return details
