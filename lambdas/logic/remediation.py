"""The remediation state machine's steps: health check, replacement, closing.

Every step but closing runs inside `Step.failing_visibly`: an error (a failed AWS call, an
unexpected state) marks the incident failed, is audited, and is re-raised so the state
machine's Catch routes to close-as-failed. Closing is the end of every path, failed included.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lambdas.logic import cards, guard, isolation, lifecycle, recovery
from lambdas.logic._steps import Step, send_notice
from lambdas.logic.history import record_history
from lambdas.logic.measures import elapsed, report_waiting
from lambdas.logic.ports import Deps
from lambdas.metric_names import PipelineMetric as M
from lambdas.metric_names import closed_metric
from lambdas.models.errors import (
    InvalidTransition,
    NodeNotFound,
)
from lambdas.models.guard import HoldKind
from lambdas.models.hyperpod import NodeRecovery, NodeStatus
from lambdas.models.incident import Incident, IncidentState, Scope
from lambdas.models.payloads import (
    CloseRequest,
    CloseResult,
    HealthCheckStarted,
    HealthStatus,
    IncidentRef,
    ReplacementStatus,
    ReplaceNodeResult,
    ReplaceStatus,
)
from lambdas.observability import count, logger, seconds

S = IncidentState


def node_status_of(deps: Deps, incident: Incident) -> tuple[str, str | None]:
    """The node's status as HyperPod reports it (`NotFound` when it is gone), and the request id."""
    try:
        node = deps.hyperpod.describe_node(incident.cluster_name, incident.instance_id)
    except NodeNotFound as err:
        return NodeStatus.NOT_FOUND.value, err.request_id
    return node.status, node.request_id


def health_result(status: str, started: bool) -> str | None:
    """None while a deep health check runs; then node_gone, not_run (we did not start one),
    passed (the node is Running again) or failed (any other status)."""
    if status == NodeStatus.DEEP_HEALTH_CHECK_IN_PROGRESS:
        return None
    if status == NodeStatus.NOT_FOUND:
        return "node_gone"
    if not started:
        return "not_run"
    if status == NodeStatus.RUNNING:
        return "passed"
    return "failed"


def start_health_check(ref: IncidentRef, deps: Deps) -> HealthCheckStarted:
    """StartClusterHealthCheck for the incident's instance (every involved instance of a
    job-level incident) that is Running; records the node status as HyperPod then reports it.

    Nothing starts while the cluster is storm-held or the pipeline paused: the incident records
    the hold and the result says `held` (the state machine closes it as held). The request is
    written ahead (`requesting_at`) so that a retry after a crash does not start a second check
    on a node whose check already runs.

    After an approved reboot (`lambdas.logic.reboot`) it runs once more: the earlier result is
    kept under `before_reboot` and the new record says `after_reboot`."""
    step = Step(deps, "start_health_check")
    with step.failing_visibly(ref.incident_id):
        incident = step.load(ref.incident_id)
        if incident.state is S.HEALTH_CHECK and incident.health_check:
            return {
                "status": str(incident.health_check.get("status")),
                "started": bool(incident.health_check.get("started")),
                "held": False,
                "scope": incident.scope,
            }
        after_reboot = incident.state is S.REBOOTING
        if after_reboot and (incident.reboot or {}).get("status") != "done":
            raise InvalidTransition("cannot start a health check: the reboot is not done")
        if incident.state not in (S.OPENED, S.REBOOTING):
            raise InvalidTransition(f"cannot start a health check: incident is {incident.state}")
        blocker = guard.blocker(deps, incident.cluster_name)
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
            record = {**record, "after_reboot": True}
        status = str(record["status"])
        started = bool(record["started"])

        def advance(current: Incident) -> bool:
            lifecycle.advance(current, S.HEALTH_CHECK, step.now())
            current.health_check = {
                **record,
                **_before_reboot(current),
            }
            if not current.is_job:
                current.node_status = status
            return True

        step.update(ref.incident_id, advance)
        step.audit(
            ref.incident_id,
            "health_check_started" if started else "health_check_not_started",
            {
                **record,
                "instance_group": incident.instance_group,
                "automatic_recovery": incident.node_recovery == NodeRecovery.AUTOMATIC,
            },
            request_ids,
        )
        count(M.HEALTH_CHECKS_STARTED if started else M.HEALTH_CHECKS_NOT_STARTED)
        logger.info("health check", incident_id=ref.incident_id, started=started, status=status)
        return {"status": status, "started": started, "held": False, "scope": incident.scope}


def _set_aside_health_check(current: Incident) -> bool:
    """Before the check after a reboot: the first check's record moves under `before_reboot`."""
    current.health_check = {"before_reboot": _summary(current.health_check), "after_reboot": True}
    return True


def _before_reboot(current: Incident) -> dict[str, Any]:
    before = (current.health_check or {}).get("before_reboot")
    return {"before_reboot": before} if before else {}


def _summary(health_check: dict[str, Any] | None) -> dict[str, Any]:
    keep = ("started", "checks", "status", "result", "reason", "started_at")
    return {key: (health_check or {}).get(key) for key in keep}


def _write_ahead(step: Step, incident: Incident) -> Incident:
    """Note that a StartClusterHealthCheck is about to be sent (kept if the handler dies)."""

    def note(current: Incident) -> bool:
        current.health_check = {**(current.health_check or {}), "requesting_at": step.now()}
        return True

    return step.update(incident.incident_id, note, incident)


def _start_node_check(step: Step, incident: Incident) -> tuple[dict[str, Any], list[str | None]]:
    deps = step.deps
    checks = list(deps.settings.health_checks)
    status, before_id = node_status_of(deps, incident)
    request_ids: list[str | None] = [before_id]
    pending = (incident.health_check or {}).get("requesting_at")
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
    record: dict[str, Any] = {
        "started": started,
        "checks": checks,
        "status": status,
        "result": health_result(status, started),
        "reason": reason,
        "started_at": step.now() if started else None,
        "resumed": resumed,
    }
    return record, request_ids


def _start_job_checks(step: Step, incident: Incident) -> tuple[dict[str, Any], list[str | None]]:
    """One StartClusterHealthCheck per instance group, for the involved nodes that are Running."""
    deps = step.deps
    checks = list(deps.settings.health_checks)
    pending = (incident.health_check or {}).get("requesting_at")
    nodes: dict[str, dict[str, Any]] = {}
    groups: dict[str, list[str]] = {}
    request_ids: list[str | None] = []
    for instance_id in incident.instance_ids:
        try:
            info = deps.hyperpod.describe_node(incident.cluster_name, instance_id)
            status, group, request_id = info.status, info.instance_group, info.request_id
        except NodeNotFound as err:
            status, group, request_id = NodeStatus.NOT_FOUND.value, None, err.request_id
        request_ids.append(request_id)
        nodes[instance_id] = {"status": status, "group": group, "started": False, "reason": None}
        if status == NodeStatus.RUNNING and group:
            groups.setdefault(group, []).append(instance_id)
        elif pending and status == NodeStatus.DEEP_HEALTH_CHECK_IN_PROGRESS:
            nodes[instance_id]["started"] = True
        else:
            nodes[instance_id]["reason"] = f"node status is {status}, not Running"
    if groups:
        incident = _write_ahead(step, incident)
    for group, instance_ids in sorted(groups.items()):
        request_ids.append(
            deps.hyperpod.start_health_check(incident.cluster_name, group, instance_ids, checks)
        )
        for instance_id in instance_ids:  # the next poll reads their real status
            nodes[instance_id].update(
                started=True, status=NodeStatus.DEEP_HEALTH_CHECK_IN_PROGRESS.value
            )
    for node in nodes.values():
        node["result"] = health_result(node["status"], node["started"])
    record: dict[str, Any] = {
        "started": any(n["started"] for n in nodes.values()),
        "checks": checks,
        "nodes": nodes,
        "status": job_summary(nodes),
        "result": None if any(n["result"] is None for n in nodes.values()) else "done",
        "reason": None if nodes else "no involved instance left",
        "started_at": step.now(),
    }
    return record, request_ids


def job_summary(nodes: dict[str, dict[str, Any]]) -> str:
    """`2 running, 1 passed, 1 failed` over a job-level incident's nodes."""
    counts: dict[str, int] = {}
    for node in nodes.values():
        label = {None: "running"}.get(node.get("result"), str(node.get("result")))
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
        status, request_id = node_status_of(deps, incident)
        previous = dict(incident.health_check or {})
        result = health_result(status, bool(previous.get("started")))
        changed = status != previous.get("status") or result != previous.get("result")
        polls = int(previous.get("polls", 0)) + 1

        def record(current: Incident) -> bool:
            current.health_check = {
                **(current.health_check or {}),
                "status": status,
                "result": result,
                "polls": polls,
            }
            current.node_status = status
            return True

        incident = step.update(ref.incident_id, record, incident)
        if changed:
            step.audit(
                ref.incident_id,
                "health_check_status",
                {"status": status, "result": result, "in_progress": result is None, "polls": polls},
                [request_id],
            )
        held = False
        if result is not None and status != NodeStatus.NOT_FOUND:
            # The approval request comes next: a storm or a pause holds it here, so no approval
            # card goes out while the cluster is held.
            blocker = guard.blocker(deps, incident.cluster_name)
            if blocker is not None:
                guard.hold_in_flight(step, incident, blocker)
                held = True
        return {
            "status": status,
            "in_progress": result is None,
            "scope": Scope.NODE.value,
            "held": held,
            "passed_after_reboot": not held and lifecycle.passed_after_reboot(incident),
        }


def _check_job(step: Step, incident: Incident) -> HealthStatus:
    previous = dict(incident.health_check or {})
    nodes = {k: dict(v) for k, v in (previous.get("nodes") or {}).items()}
    request_ids: list[str | None] = []
    for instance_id, node in nodes.items():
        if node.get("result") is not None:
            continue
        try:
            info = step.deps.hyperpod.describe_node(incident.cluster_name, instance_id)
            node["status"], request_id = info.status, info.request_id
        except NodeNotFound as err:
            node["status"], request_id = NodeStatus.NOT_FOUND.value, err.request_id
        request_ids.append(request_id)
        node["result"] = health_result(node["status"], bool(node.get("started")))
    summary = job_summary(nodes)
    in_progress = any(n.get("result") is None for n in nodes.values())
    polls = int(previous.get("polls", 0)) + 1

    def record(current: Incident) -> bool:
        current.health_check = {
            **(current.health_check or {}),
            "nodes": nodes,
            "status": summary,
            "result": None if in_progress else "done",
            "polls": polls,
        }
        return True

    step.update(incident.incident_id, record, incident)
    if summary != previous.get("status"):
        step.audit(
            incident.incident_id,
            "health_check_status",
            {"status": summary, "in_progress": in_progress, "polls": polls},
            request_ids,
        )
    return {
        "status": summary,
        "in_progress": in_progress,
        "scope": Scope.JOB.value,
        "held": False,
        "passed_after_reboot": False,
    }


def replace_node(ref: IncidentRef, deps: Deps) -> ReplaceNodeResult:
    """Re-check the node, then BatchReplaceClusterNodes, reading every `Failed[]` code.

    - storm hold or paused, and nothing requested yet → held (nothing is called);
    - the node is gone → gone (HyperPod replaced it: closes as replaced_by_hyperpod unless
      this pipeline had asked);
    - NodeRecovery Automatic and the node ShuttingDown without our request → in_progress: it is
      HyperPod's own replacement, nothing is called;
    - DRY_RUN → "would replace" audited, nothing is called;
    - otherwise the request is written ahead (`pending`), then sent: InstanceIdInUse →
      in_progress, InvalidInstanceStatus or InternalServerError → retry, InstanceIdNotFound →
      gone, anything else → ReplacementRejected.
    """
    step = Step(deps, "replace_node")
    with step.failing_visibly(ref.incident_id):
        incident = step.load(ref.incident_id)
        ours = lifecycle.requested_by_us(incident)
        begun = recovery.begin(step, incident, recovery.REPLACEMENT, ours=ours)
        if not isinstance(begun, Incident):
            return begun
        incident = begun

        status_now, check_id = node_status_of(deps, incident)
        if status_now == NodeStatus.NOT_FOUND:
            return recovery.record(
                step,
                incident,
                recovery.REPLACEMENT,
                ReplaceStatus.GONE,
                "node_gone",
                {"reason": "the node is already gone: nothing to replace", "by_us": ours},
                [check_id],
                ours=ours,
            )
        if deps.settings.dry_run:
            return recovery.record(
                step,
                incident,
                recovery.REPLACEMENT,
                ReplaceStatus.DRY_RUN,
                "replacement_would_replace",
                {"would_replace": incident.instance_id, "node_status": status_now},
                [check_id],
            )
        if (
            not ours
            and incident.node_recovery == NodeRecovery.AUTOMATIC
            and status_now == NodeStatus.SHUTTING_DOWN
        ):
            return recovery.record(
                step,
                incident,
                recovery.REPLACEMENT,
                ReplaceStatus.IN_PROGRESS,
                "replacement_by_hyperpod",
                {
                    "reason": "NodeRecovery is Automatic and HyperPod is already replacing the "
                    "node: nothing requested",
                    "node_status": status_now,
                },
                [check_id],
            )

        incident = step.update(ref.incident_id, _pending(step.now()), incident)
        return recovery.send(step, incident, recovery.REPLACEMENT, status_now, check_id, ours=ours)


def _pending(at: str) -> Callable[[Incident], bool]:
    """Write ahead: a BatchReplaceClusterNodes is about to be sent (kept if the handler dies,
    so a retry counts a replacement it finds as ours)."""

    def note(current: Incident) -> bool:
        current.replacement = {**(current.replacement or {}), "pending": True, "sent_at": at}
        return True

    return note


def check_replacement(ref: IncidentRef, deps: Deps) -> ReplacementStatus:
    """Done once the old instance is gone; the new instance id is recorded when HyperPod names
    it (the replacement keeps the node's logical id)."""
    step = Step(deps, "check_replacement")
    with step.failing_visibly(ref.incident_id):
        incident = step.load(ref.incident_id)
        if incident.state is not S.REPLACING:
            raise InvalidTransition(f"no replacement to poll: incident is {incident.state}")
        replacement = dict(incident.replacement or {})
        if replacement.get("status") == "done":
            return {"done": True, "new_instance_id": replacement.get("new_instance_id")}
        if replacement.get("dry_run"):
            _finish_replacement(step, incident, None, [], dry_run=True)
            return {"done": True, "new_instance_id": None}

        status, request_id = node_status_of(deps, incident)
        if status != NodeStatus.NOT_FOUND:
            if status != replacement.get("node_status"):

                def note(current: Incident) -> bool:
                    current.replacement = {**(current.replacement or {}), "node_status": status}
                    current.node_status = status
                    return True

                step.update(ref.incident_id, note, incident)
                step.audit(
                    ref.incident_id, "replacement_status", {"node_status": status}, [request_id]
                )
            return {"done": False, "new_instance_id": None}

        new_id, new_request_id = _new_instance_id(deps, incident)
        _finish_replacement(step, incident, new_id, [request_id, new_request_id])
        return {"done": True, "new_instance_id": new_id}


def _new_instance_id(deps: Deps, incident: Incident) -> tuple[str | None, str | None]:
    if not incident.node_logical_id:
        return None, None
    try:
        node = deps.hyperpod.describe_node_by_logical_id(
            incident.cluster_name, incident.node_logical_id
        )
    except NodeNotFound as err:
        return None, err.request_id
    if node.instance_id == incident.instance_id:
        return None, node.request_id
    return node.instance_id, node.request_id


def _finish_replacement(
    step: Step,
    incident: Incident,
    new_instance_id: str | None,
    request_ids: list[str | None],
    *,
    dry_run: bool = False,
) -> None:
    def record(current: Incident) -> bool:
        current.replacement = {
            **(current.replacement or {}),
            "status": "done",
            "new_instance_id": new_instance_id,
            "done_at": step.now(),
        }
        if not dry_run:
            current.node_status = NodeStatus.NOT_FOUND.value
        return True

    step.update(incident.incident_id, record, incident)
    step.audit(
        incident.incident_id,
        "replacement_done",
        {
            "old_instance_id": incident.instance_id,
            "new_instance_id": new_instance_id,
            "dry_run": dry_run,
        },
        request_ids,
    )
    count(M.REPLACEMENTS_DONE)


def close_incident(request: CloseRequest, deps: Deps) -> CloseResult:
    """The end of every path: final state, the node's isolation lifted (unless it was replaced),
    lock and guard slot released, audited, history kept, notified (failures too).

    Closing twice is harmless: a closed incident keeps its state; what the first attempt may not
    have finished (it died after saving the state) is finished: the locks and the slot are
    released again (idempotent), the closing is audited and the history written if no
    `incident_closed` entry exists yet, and the notice is sent if it did not go out. An outcome
    that does not follow from the incident's state closes it as failed, with the reason.
    """
    step = Step(deps, "close_incident")
    incident = step.load(request.incident_id)
    audited = False
    if incident.closed_at is None:
        target, mismatch = lifecycle.closing_state(incident, request.outcome)
        error = _close_error(request, incident, mismatch)
        at = step.now()

        def close(current: Incident) -> bool:
            current.state = target
            current.outcome = request.outcome.value
            current.error = error
            current.closed_at = at
            current.task_token = None
            return True

        incident = step.update(request.incident_id, close, incident)
    else:
        born_closed = incident.state is S.SKIPPED or (
            incident.state is S.HELD and not incident.execution_arn
        )  # recorded closed when opened: audited then (incident_skipped / incident_held)
        audited = born_closed or any(
            e.action == "incident_closed" for e in deps.audit.entries(incident.incident_id)
        )
    # Before the lock goes: the next incident on this node must not find our cordon.
    incident = isolation.release(step, incident)
    for instance_id in incident.locked_instances:
        deps.incidents.release_lock(incident.cluster_name, instance_id, incident.incident_id)
    deps.guard.release_slot(incident.cluster_name, incident.incident_id)
    if not audited:
        step.audit(
            incident.incident_id,
            "incident_closed",
            {
                "state": incident.state.value,
                "outcome": incident.outcome,
                "error": incident.error,
                "dry_run": bool((incident.replacement or {}).get("dry_run")),
                "new_instance_id": (incident.replacement or {}).get("new_instance_id"),
                "hold": incident.hold,
            },
        )
        count(closed_metric(incident.state))
        _measure_close(step, incident)
        logger.info("incident closed", incident_id=incident.incident_id, state=incident.state)
        record_history(step, incident)
    if (
        not incident.close_notified
        and incident.state is not S.SKIPPED
        and (incident.hold or {}).get("kind") != HoldKind.STORM
    ):
        _notify_close(step, incident)
    return {"incident_id": incident.incident_id, "state": incident.state.value}


def _measure_close(step: Step, incident: Incident) -> None:
    """Time from opened to node recovered (replaced, by us or HyperPod, or rebooted and checked
    again; a dry run recovers nothing), and the approvals-waiting gauge when the incident had waited for a decision."""
    dry_run = bool((incident.replacement or incident.reboot or {}).get("dry_run"))
    if incident.state in (S.REPLACED, S.REPLACED_BY_HYPERPOD, S.REBOOTED) and not dry_run:
        seconds(M.RECOVERY_LATENCY, elapsed(incident.created_at, step.deps.clock.now()))
    if incident.approval_requested_at:
        report_waiting(step, incident)


def _close_error(
    request: CloseRequest, incident: Incident, mismatch: str | None
) -> dict[str, Any] | None:
    error: dict[str, Any] | None = None
    if request.error is not None:
        error = {k: str(v)[:2000] for k, v in request.error.items()}
    elif incident.error is not None:
        error = incident.error
    if mismatch:
        error = {**(error or {}), "close_mismatch": mismatch}
    return error


def _notify_close(step: Step, incident: Incident) -> None:
    notice = cards.close_notice(incident)
    # Not raised on failure: the execution must not end red for a notice.
    send_notice(step, incident, notice.subject, notice.text, "closed", "closed_notified", incident)
