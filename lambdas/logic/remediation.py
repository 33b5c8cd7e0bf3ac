"""The remediation state machine's steps: health check, replacement, closing.

Every step but closing runs inside `Step.failing_visibly`: an error (a failed AWS call, an
unexpected state) marks the incident failed, is audited, and is re-raised so the state
machine's Catch routes to close-as-failed. Closing is the end of every path, failed included.
"""

from __future__ import annotations

from typing import Any

from lambdas.logic import cards, lifecycle
from lambdas.logic._steps import Step, error_details
from lambdas.logic.ports import Deps
from lambdas.models.errors import (
    InvalidTransition,
    NodeNotFound,
    ReplacementNotApproved,
    ReplacementRejected,
)
from lambdas.models.hyperpod import NodeRecovery, NodeStatus, ReplaceErrorCode
from lambdas.models.incident import Incident, IncidentState
from lambdas.models.payloads import (
    CloseRequest,
    CloseResult,
    Decision,
    HealthCheckStarted,
    HealthStatus,
    IncidentRef,
    ReplacementStatus,
    ReplaceNodeResult,
    ReplaceStatus,
)
from lambdas.observability import count, logger

S = IncidentState


def _status_of(deps: Deps, incident: Incident) -> tuple[str, str | None]:
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
    """StartClusterHealthCheck for the instance in its group, if it is Running; records the
    node status as HyperPod then reports it."""
    step = Step(deps, "start_health_check")
    with step.failing_visibly(ref.incident_id):
        incident = step.load(ref.incident_id)
        if incident.state is S.HEALTH_CHECK and incident.health_check:
            return {
                "status": str(incident.health_check.get("status")),
                "started": bool(incident.health_check.get("started")),
            }
        if incident.state is not S.OPENED:
            raise InvalidTransition(f"cannot start a health check: incident is {incident.state}")
        checks = list(deps.settings.health_checks)
        status, before_id = _status_of(deps, incident)
        request_ids: list[str | None] = [before_id]
        reason = None
        started = False
        if status != NodeStatus.RUNNING:
            reason = f"node status is {status}, not Running"
        elif not incident.instance_group:
            reason = "the node's instance group is unknown"
        else:
            request_ids.append(
                deps.hyperpod.start_health_check(
                    incident.cluster_name, incident.instance_group, [incident.instance_id], checks
                )
            )
            started = True
            status, after_id = _status_of(deps, incident)
            request_ids.append(after_id)
        record: dict[str, Any] = {
            "started": started,
            "checks": checks,
            "status": status,
            "result": health_result(status, started),
            "reason": reason,
            "started_at": step.now() if started else None,
        }

        def advance(current: Incident) -> bool:
            lifecycle.advance(current, S.HEALTH_CHECK, step.now())
            current.health_check = record
            current.node_status = status
            return True

        step.update(ref.incident_id, advance, incident)
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
        count("HealthChecksStarted" if started else "HealthChecksNotStarted")
        logger.info("health check", incident_id=ref.incident_id, started=started, status=status)
        return {"status": status, "started": started}


def check_health(ref: IncidentRef, deps: Deps) -> HealthStatus:
    """One poll of the node status; audited when the status changes."""
    step = Step(deps, "check_health")
    with step.failing_visibly(ref.incident_id):
        incident = step.load(ref.incident_id)
        if incident.state is not S.HEALTH_CHECK:
            raise InvalidTransition(f"no health check to poll: incident is {incident.state}")
        status, request_id = _status_of(deps, incident)
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

        step.update(ref.incident_id, record, incident)
        if changed:
            step.audit(
                ref.incident_id,
                "health_check_status",
                {"status": status, "result": result, "in_progress": result is None, "polls": polls},
                [request_id],
            )
        return {"status": status, "in_progress": result is None}


def replace_node(ref: IncidentRef, deps: Deps) -> ReplaceNodeResult:
    """Re-check the node, then BatchReplaceClusterNodes, reading every `Failed[]` code:
    InstanceIdInUse → in_progress, InvalidInstanceStatus → retry, InstanceIdNotFound → gone,
    anything else → ReplacementRejected. DRY_RUN records "would replace" and calls nothing."""
    step = Step(deps, "replace_node")
    with step.failing_visibly(ref.incident_id):
        incident = step.load(ref.incident_id)
        decided = (incident.decision or {}).get("decision")
        if decided != Decision.APPROVE:
            raise ReplacementNotApproved(
                f"incident {incident.incident_id} has no approve decision (decision: {decided})"
            )
        if incident.state is S.AWAITING_APPROVAL:
            incident = step.update(
                ref.incident_id,
                lambda current: _enter_replacing(current, step.now()),
                incident,
            )
        elif incident.state is not S.REPLACING:
            raise InvalidTransition(f"cannot replace: incident is {incident.state}")

        status_now, check_id = _status_of(deps, incident)
        if status_now == NodeStatus.NOT_FOUND:
            return _record_replacement(
                step,
                incident,
                ReplaceStatus.GONE,
                "node_gone",
                {"reason": "the node is already gone: nothing to replace"},
                [check_id],
            )
        if deps.settings.dry_run:
            return _record_replacement(
                step,
                incident,
                ReplaceStatus.DRY_RUN,
                "replacement_would_replace",
                {"would_replace": incident.instance_id, "node_status": status_now},
                [check_id],
                dry_run=True,
            )

        result = deps.hyperpod.replace_nodes(incident.cluster_name, [incident.instance_id])
        request_ids = [check_id, result.request_id]
        if incident.instance_id in result.successful:
            return _record_replacement(
                step,
                incident,
                ReplaceStatus.REQUESTED,
                "replacement_requested",
                {"node_status": status_now},
                request_ids,
            )
        failure = result.failure_for(incident.instance_id)
        if failure is None:
            raise ReplacementRejected(
                "BatchReplaceClusterNodes named the node neither successful nor failed",
                operation="BatchReplaceClusterNodes",
                request_id=result.request_id,
            )
        details = {"code": failure.code, "message": failure.message, "node_status": status_now}
        if failure.code == ReplaceErrorCode.INSTANCE_ID_IN_USE:
            return _record_replacement(
                step,
                incident,
                ReplaceStatus.IN_PROGRESS,
                "replacement_in_progress",
                details,
                request_ids,
            )
        if failure.code == ReplaceErrorCode.INVALID_INSTANCE_STATUS:
            return _record_replacement(
                step, incident, ReplaceStatus.RETRY, "replacement_retry", details, request_ids
            )
        if failure.code == ReplaceErrorCode.INSTANCE_ID_NOT_FOUND:
            return _record_replacement(
                step, incident, ReplaceStatus.GONE, "node_gone", details, request_ids
            )
        raise ReplacementRejected(
            f"BatchReplaceClusterNodes refused {failure.node_id}: {failure.code} "
            f"{failure.message or ''}".strip(),
            operation="BatchReplaceClusterNodes",
            code=failure.code,
            request_id=result.request_id,
        )


def _enter_replacing(incident: Incident, at: str) -> bool:
    lifecycle.advance(incident, S.REPLACING, at)
    return True


def _record_replacement(
    step: Step,
    incident: Incident,
    status: ReplaceStatus,
    action: str,
    details: dict[str, Any],
    request_ids: list[str | None],
    *,
    dry_run: bool = False,
) -> ReplaceNodeResult:
    attempts = int((incident.replacement or {}).get("attempts", 0)) + 1
    at = step.now()

    def record(current: Incident) -> bool:
        previous = current.replacement or {}
        current.replacement = {
            **previous,
            "status": status.value,
            "attempts": attempts,
            "dry_run": dry_run,
            "requested_at": at
            if status is ReplaceStatus.REQUESTED
            else previous.get("requested_at"),
            "new_instance_id": previous.get("new_instance_id"),
            "last": details,
        }
        return True

    step.update(incident.incident_id, record, incident)
    step.audit(
        incident.incident_id,
        action,
        {
            "status": status.value,
            "instance_id": incident.instance_id,
            "attempt": attempts,
            **details,
        },
        request_ids,
    )
    count(f"Replace{status.value.title().replace('_', '')}")
    logger.info("replace node", incident_id=incident.incident_id, status=status.value)
    return {"status": status.value}


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

        status, request_id = _status_of(deps, incident)
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
    count("ReplacementsDone")


def close_incident(request: CloseRequest, deps: Deps) -> CloseResult:
    """The end of every path: final state, lock released, audited, notified (failures too).

    Closing twice is harmless: a closed incident is returned as it is (its notification is sent
    again only if the first attempt did not go out). An outcome that does not follow from the
    incident's state closes it as failed, with the reason.
    """
    step = Step(deps, "close_incident")
    incident = step.load(request.incident_id)
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
        deps.incidents.release_lock(
            incident.cluster_name, incident.instance_id, incident.incident_id
        )
        step.audit(
            incident.incident_id,
            "incident_closed",
            {
                "state": target.value,
                "outcome": request.outcome.value,
                "error": error,
                "dry_run": bool((incident.replacement or {}).get("dry_run")),
                "new_instance_id": (incident.replacement or {}).get("new_instance_id"),
            },
        )
        count(f"Closed{target.value.title().replace('_', '')}")
        logger.info("incident closed", incident_id=incident.incident_id, state=target.value)
    if not incident.close_notified and incident.state is not S.SKIPPED:
        _notify_close(step, incident)
    return {"incident_id": incident.incident_id, "state": incident.state.value}


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
    try:
        request_id = step.deps.notifier.publish(
            notice.subject,
            notice.text,
            {"incident_id": incident.incident_id, "kind": "closed", "state": incident.state.value},
        )
    except Exception as err:
        step.audit(incident.incident_id, "notification_failed", error_details(err, kind="closed"))
        raise

    def mark(current: Incident) -> bool:
        current.close_notified = True
        return True

    step.update(incident.incident_id, mark, incident)
    step.audit(incident.incident_id, "closed_notified", {"subject": notice.subject}, [request_id])
