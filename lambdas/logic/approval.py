"""Human approval: the request (task token stored, card published) and the decision."""

from __future__ import annotations

from datetime import datetime
from typing import Any, NoReturn

from lambdas.logic import cards, evidence, guard, ids, lifecycle, proceeding, telemetry
from lambdas.logic._steps import Step, error_details
from lambdas.logic.decisions import ValidDecision, check_accepts_decision, validate_decision
from lambdas.logic.history import past_incidents
from lambdas.logic.measures import elapsed, report_waiting
from lambdas.logic.ports import Deps
from lambdas.logic.recommendation import recommend
from lambdas.metric_names import PipelineMetric as M
from lambdas.models.errors import (
    ConditionFailed,
    DecisionRefused,
    InvalidTransition,
    TaskNotWaiting,
)
from lambdas.models.incident import Incident, IncidentState
from lambdas.models.payloads import (
    ApprovalRequest,
    ApprovalRequested,
    Decision,
    DecisionAccepted,
    DecisionRequest,
)
from lambdas.models.recovery import DecisionRecord
from lambdas.observability import count, logger, seconds

S = IncidentState


def request_approval(request: ApprovalRequest, deps: Deps) -> ApprovalRequested:
    """Store the task token with the incident and publish the approval card.

    The token goes into the incident record only: never into the notification, the audit log
    or the logs. A retried invocation with the incident already waiting stores the (new) token
    and publishes again, as long as nobody has decided yet. A failed publish does not lose the
    request: the token is stored, the failure audited, and the waiting state's input in the
    console still shows the approval input to paste.

    Before the card is built, the GPU's hardware counters are read from the cluster's
    Prometheus workspace (`lambdas.logic.telemetry`, bounded in time, never failing) and kept on
    the incident with the token: the card says what they showed.
    """
    step = Step(deps, "request_approval")
    with step.failing_visibly(request.incident_id):
        incident = step.load(request.incident_id)
        if incident.state is S.AWAITING_APPROVAL and incident.decision:
            raise InvalidTransition(f"incident {incident.incident_id} was already decided")
        at = step.now()
        hardware = telemetry.check(deps, incident, datetime.fromisoformat(at))

        def wait(current: Incident) -> bool:
            if current.state is not S.AWAITING_APPROVAL:
                lifecycle.advance(current, S.AWAITING_APPROVAL, at)
                if current.decided == Decision.REBOOT and current.reboot:
                    # The health check after the reboot failed: the reboot decision is kept
                    # under `reboot.decision`, and this card asks for a new one.
                    current.decision = None
            current.task_token = request.task_token
            current.approval_requested_at = at
            current.telemetry = hardware
            return True

        incident = step.update(request.incident_id, wait, incident)
        health = incident.health_check.result if incident.health_check else None
        history = past_incidents(step, incident)
        advice = recommend(
            evidence.reports(incident),
            health,
            [p.incident_id for p in history if p.counts_as_history],
            job_level=incident.is_job,
            rebooted=lifecycle.reboots_done(incident) > 0,
            unconfirmed=bool(incident.unconfirmed),
        )
        card = cards.approval_card(incident, deps.settings, advice, history)
        approve = dict(card.inputs[Decision.APPROVE])  # the input the card that goes out offers
        try:
            request_id = deps.notifier.publish(
                card.subject,
                card.text,
                {"incident_id": incident.incident_id, "kind": "approval_request"},
            )
        except Exception as err:
            request_id = None
            step.audit(
                incident.incident_id,
                "notification_failed",
                error_details(err, kind="approval_request"),
            )
        step.audit(
            incident.incident_id,
            "approval_requested",
            {
                "advice": advice.advice.value,
                "reasons": list(advice.reasons),
                "history": [p.incident_id for p in history],
                "approval_input": approve,
                "approval_state_machine_arn": deps.settings.approval_state_machine_arn,
                "subject": card.subject,
                "notified": request_id is not None,
                "telemetry": {"state": hardware.state, "summary": hardware.summary},
            },
            [request_id],
        )
        count(M.APPROVALS_REQUESTED)
        report_waiting(step, incident)
        logger.info("approval requested", incident_id=incident.incident_id, advice=advice.advice)
        return {"incident_id": incident.incident_id, "approval_input": approve}


def decide(request: DecisionRequest, deps: Deps) -> DecisionAccepted:
    """Accept one decision for an incident awaiting approval and hand it to the waiting task.

    Refusals (bad input, unknown incident, wrong state, second decision, after the approval
    timeout, a token Step Functions no longer waits on) are audited, then raised as
    DecisionRefused. The decision is claimed on the incident (a conditional save) before
    SendTaskSuccess, so two racing approvals cannot both go through (the loser re-reads, sees the
    first decision and is refused); if SendTaskSuccess fails the claim is released, the failure
    audited and re-raised.

    Decision `reset` names a storm hold (its id as `incident_id`) and lifts it; decision
    `proceed` names a job-level incident the guard held and lets its nodes be health-checked.
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
    if valid.decision is Decision.RESET:
        return _reset(step, valid, actor, request)
    if valid.decision is Decision.PROCEED:
        return _proceed(step, valid, actor, request)
    incident = deps.incidents.get(valid.incident_id)
    if incident is None:
        if deps.guard.get_hold(valid.incident_id) is not None:
            _refuse(
                step,
                valid.incident_id,
                actor,
                request,
                DecisionRefused(
                    f"{valid.incident_id} is a storm hold: only decision 'reset' lifts it"
                ),
            )
        _refuse(
            step,
            ids.decision_subject(request.approval_execution_arn),
            actor,
            request,
            DecisionRefused(f"no incident {valid.incident_id}"),
        )
    logger.set_correlation_id(valid.incident_id)
    decision = DecisionRecord(
        valid.decision, valid.comment, valid.approval_execution_arn, step.now()
    )
    tokens: list[str] = []

    def claim(current: Incident) -> bool:
        tokens.append(
            check_accepts_decision(
                current, deps.clock.now(), deps.settings.approval_timeout_seconds, valid.decision
            )
        )
        current.decision = decision
        return True

    try:
        decided = step.update(valid.incident_id, claim, incident)
    except DecisionRefused as refused:
        _refuse(step, valid.incident_id, actor, request, refused)
    token = tokens[-1]
    _deliver(step, valid, token, actor, decided)
    count(M.DECISIONS_ACCEPTED)
    seconds(M.DECISION_LATENCY, elapsed(decided.created_at, deps.clock.now()))
    report_waiting(step, decided)
    logger.info("decision accepted", incident_id=valid.incident_id, decision=valid.decision)
    return {"incident_id": valid.incident_id, "decision": valid.decision.value, "accepted": True}


def _deliver(step: Step, valid: ValidDecision, token: str, actor: str, decided: Incident) -> None:
    """SendTaskSuccess with the decision `decided` records; when it fails, the claim is given
    back on that record."""
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
            if current.decision is None or (
                current.decision.approval_execution_arn != valid.approval_execution_arn
            ):
                return False
            current.decision = None
            return True

        if isinstance(err, TaskNotWaiting):
            # Step Functions no longer waits: the approval timed out (or the token was used).
            step.update(valid.incident_id, release, decided)
            refused = DecisionRefused(
                f"incident {valid.incident_id}: the remediation no longer waits for a decision "
                f"(the approval request timed out or was answered): {err}"
            )
            step.audit(
                valid.incident_id,
                "decision_refused",
                {
                    "reason": str(refused),
                    "decision": valid.decision.value,
                    "comment": valid.comment,
                    "approval_execution_arn": valid.approval_execution_arn,
                },
                [err.request_id],
                actor=actor,
            )
            count(M.DECISIONS_REFUSED)
            raise refused from err
        try:
            step.update(valid.incident_id, release, decided)
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


def _reset(
    step: Step, valid: ValidDecision, actor: str, request: DecisionRequest
) -> DecisionAccepted:
    """Lift a storm hold: the id must name an active hold; a second reset is refused."""
    deps = step.deps
    hold = deps.guard.get_hold(valid.incident_id)
    if hold is None:
        if deps.incidents.get(valid.incident_id) is not None:
            _refuse(
                step,
                valid.incident_id,
                actor,
                request,
                DecisionRefused(
                    f"{valid.incident_id} is an incident, not a storm hold: reset only lifts "
                    "a storm hold (use approve or reject)"
                ),
            )
        _refuse(
            step,
            ids.decision_subject(request.approval_execution_arn),
            actor,
            request,
            DecisionRefused(f"no storm hold {valid.incident_id}"),
        )
    if not hold.active:
        _refuse(
            step,
            hold.hold_id,
            actor,
            request,
            DecisionRefused(
                f"storm hold {hold.hold_id} was already reset at {hold.lifted_at} "
                f"by {hold.lifted_by}"
            ),
        )
    logger.set_correlation_id(hold.hold_id)
    try:
        guard.lift(step, hold, actor, valid.comment)
    except ConditionFailed:
        _refuse(
            step,
            hold.hold_id,
            actor,
            request,
            DecisionRefused(f"storm hold {hold.hold_id} changed meanwhile: it was already reset"),
        )
    count(M.DECISIONS_ACCEPTED)
    logger.info("storm hold reset", hold_id=hold.hold_id)
    return {"incident_id": hold.hold_id, "decision": Decision.RESET.value, "accepted": True}


def _proceed(
    step: Step, valid: ValidDecision, actor: str, request: DecisionRequest
) -> DecisionAccepted:
    """Let a job-level incident the guard held proceed (`lambdas.logic.proceeding`)."""
    held = step.deps.incidents.get(valid.incident_id)
    if held is None:
        _refuse(
            step,
            ids.decision_subject(request.approval_execution_arn),
            actor,
            request,
            DecisionRefused(f"no incident {valid.incident_id}"),
        )
    logger.set_correlation_id(held.incident_id)
    try:
        opened = proceeding.proceed(step, held, actor, valid.comment)
    except DecisionRefused as refused:
        _refuse(step, held.incident_id, actor, request, refused)
    count(M.DECISIONS_ACCEPTED)
    logger.info("held job incident proceeds", incident_id=held.incident_id, opened=opened)
    return {"incident_id": held.incident_id, "decision": Decision.PROCEED.value, "accepted": True}


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
    count(M.DECISIONS_REFUSED)
    logger.warning("decision refused", subject=subject, reason=str(refused))
    raise refused


def _printable(value: Any) -> Any:
    """Raw input, kept JSON-safe and short for the audit log."""
    if value is None or isinstance(value, (bool, int)):
        return value
    return str(value)[:1000]
