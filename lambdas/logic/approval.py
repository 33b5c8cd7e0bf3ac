"""Human approval: the request (task token stored, card published) and the decision."""

from __future__ import annotations

from typing import Any, NoReturn

from lambdas.logic import cards, evidence, ids, lifecycle
from lambdas.logic._steps import Step, error_details
from lambdas.logic.decisions import ValidDecision, check_accepts_decision, validate_decision
from lambdas.logic.ports import Deps
from lambdas.logic.recommendation import recommend
from lambdas.models.errors import DecisionRefused, InvalidTransition
from lambdas.models.incident import Incident, IncidentState
from lambdas.models.payloads import (
    ApprovalRequest,
    ApprovalRequested,
    Decision,
    DecisionAccepted,
    DecisionRequest,
)
from lambdas.observability import count, logger

S = IncidentState


def request_approval(request: ApprovalRequest, deps: Deps) -> ApprovalRequested:
    """Store the task token with the incident and publish the approval card.

    The token goes into the incident record only: never into the notification, the audit log
    or the logs. A retried invocation with the incident already waiting stores the (new) token
    and publishes again, as long as nobody has decided yet.
    """
    step = Step(deps, "request_approval")
    with step.failing_visibly(request.incident_id):
        incident = step.load(request.incident_id)
        if incident.state is S.AWAITING_APPROVAL and incident.decision:
            raise InvalidTransition(f"incident {incident.incident_id} was already decided")
        at = step.now()

        def wait(current: Incident) -> bool:
            if current.state is not S.AWAITING_APPROVAL:
                lifecycle.advance(current, S.AWAITING_APPROVAL, at)
            current.task_token = request.task_token
            current.approval_requested_at = at
            return True

        incident = step.update(request.incident_id, wait, incident)
        health = (incident.health_check or {}).get("result")
        advice = recommend(evidence.reports(incident), health)
        card = cards.approval_card(incident, deps.settings, advice)
        request_id = deps.notifier.publish(
            card.subject,
            card.text,
            {"incident_id": incident.incident_id, "kind": "approval_request"},
        )
        approve = cards.approval_input(incident.incident_id, Decision.APPROVE)
        step.audit(
            incident.incident_id,
            "approval_requested",
            {
                "advice": advice.advice.value,
                "reasons": list(advice.reasons),
                "approval_input": approve,
                "approval_state_machine_arn": deps.settings.approval_state_machine_arn,
                "subject": card.subject,
            },
            [request_id],
        )
        count("ApprovalsRequested")
        logger.info("approval requested", incident_id=incident.incident_id, advice=advice.advice)
        return {"incident_id": incident.incident_id, "approval_input": approve}


def decide(request: DecisionRequest, deps: Deps) -> DecisionAccepted:
    """Accept one decision for an incident awaiting approval and hand it to the waiting task.

    Refusals (bad input, unknown incident, wrong state, second decision) are audited, then raised
    as DecisionRefused. The decision is claimed on the incident (a conditional save) before
    SendTaskSuccess, so two racing approvals cannot both go through (the loser re-reads, sees the
    first decision and is refused); if SendTaskSuccess fails the claim is released, the failure
    audited and re-raised.
    """
    step = Step(deps, "decide")
    actor = f"approver:{request.approval_execution_arn}"
    try:
        valid = validate_decision(request)
    except DecisionRefused as refused:
        subject = (
            request.incident_id
            if isinstance(request.incident_id, str)
            and deps.incidents.get(request.incident_id) is not None
            else ids.decision_subject(request.approval_execution_arn)
        )
        _refuse(step, subject, actor, request, refused)
    incident = deps.incidents.get(valid.incident_id)
    if incident is None:
        _refuse(
            step,
            ids.decision_subject(request.approval_execution_arn),
            actor,
            request,
            DecisionRefused(f"no incident {valid.incident_id}"),
        )
    logger.set_correlation_id(valid.incident_id)
    decision = {
        "decision": valid.decision.value,
        "comment": valid.comment,
        "approval_execution_arn": valid.approval_execution_arn,
        "at": step.now(),
    }
    tokens: list[str] = []

    def claim(current: Incident) -> bool:
        tokens.append(check_accepts_decision(current))
        current.decision = decision
        return True

    try:
        step.update(valid.incident_id, claim, incident)
    except DecisionRefused as refused:
        _refuse(step, valid.incident_id, actor, request, refused)
    token = tokens[-1]
    _deliver(step, valid, token, actor)
    count("DecisionsAccepted")
    logger.info("decision accepted", incident_id=valid.incident_id, decision=valid.decision)
    return {"incident_id": valid.incident_id, "decision": valid.decision.value, "accepted": True}


def _deliver(step: Step, valid: ValidDecision, token: str, actor: str) -> None:
    output = {
        "incident_id": valid.incident_id,
        "decision": valid.decision.value,
        "comment": valid.comment,
        "approval_execution_arn": valid.approval_execution_arn,
    }
    try:
        request_id = step.deps.workflow.send_task_success(token, output)
    except Exception as err:

        def release(current: Incident) -> bool:
            if (current.decision or {}).get("approval_execution_arn") != (
                valid.approval_execution_arn
            ):
                return False
            current.decision = None
            return True

        try:
            step.update(valid.incident_id, release)
        finally:
            step.audit(
                valid.incident_id,
                "decision_not_delivered",
                error_details(err, decision=valid.decision.value, comment=valid.comment),
                [getattr(err, "request_id", None)],
                actor=actor,
            )
        raise
    step.audit(
        valid.incident_id,
        "decision_accepted",
        {
            "decision": valid.decision.value,
            "comment": valid.comment,
            "approval_execution_arn": valid.approval_execution_arn,
        },
        [request_id],
        actor=actor,
    )


def _refuse(
    step: Step, subject: str, actor: str, request: DecisionRequest, refused: DecisionRefused
) -> NoReturn:
    step.audit(
        subject,
        "decision_refused",
        {
            "reason": str(refused),
            "incident_id": _printable(request.incident_id),
            "decision": _printable(request.decision),
            "comment": _printable(request.comment),
            "approval_execution_arn": request.approval_execution_arn,
        },
        actor=actor,
    )
    count("DecisionsRefused")
    logger.warning("decision refused", subject=subject, reason=str(refused))
    raise refused


def _printable(value: Any) -> Any:
    """Raw input, kept JSON-safe and short for the audit log."""
    if value is None or isinstance(value, (bool, int)):
        return value
    return str(value)[:1000]
