"""Which approval decisions are accepted: a known decision, for an incident awaiting approval,
once, before the approval timeout. Every refusal is a `DecisionRefused` with a reason a person
can act on."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sdc_remediation.lambdas.models.errors import DecisionRefused
from sdc_remediation.lambdas.models.incident import Incident, IncidentState, task_token_digest
from sdc_remediation.lambdas.models.payloads import INCIDENT_ID_RE, Decision, DecisionRequest
from sdc_remediation.lambdas.models.recovery import MAX_REBOOTS

MAX_COMMENT = 1000


@dataclass(frozen=True, slots=True)
class ValidDecision:
    incident_id: str
    decision: Decision
    comment: str
    approval_execution_arn: str


def approval_binding(approval_state_machine_arn: str, incident_id: str, decision: str) -> str:
    """The value an identity proof is bound to: this deployment's approval state machine, the
    incident (or storm hold) and the decision."""
    return f"{approval_state_machine_arn}|{incident_id}|{decision}"


def validate_decision(request: DecisionRequest) -> ValidDecision:
    """The request's values, checked; raises DecisionRefused naming the first bad one."""
    if not isinstance(request.incident_id, str) or not INCIDENT_ID_RE.match(request.incident_id):
        raise DecisionRefused(
            f"incident_id is not an incident id: {str(request.incident_id)[:100]!r}"
        )
    if not isinstance(request.decision, str) or request.decision.strip().lower() not in {
        d.value for d in Decision
    }:
        raise DecisionRefused(
            "decision must be 'approve' (replace), 'reboot' or 'reject' (or 'reset' for a storm "
            "hold, 'proceed' for a job-level incident the guard held), "
            f"got {str(request.decision)[:100]!r}"
        )
    comment = request.comment if request.comment is not None else ""
    if not isinstance(comment, str):
        raise DecisionRefused(f"comment must be a string, got {type(comment).__name__}")
    if len(comment) > MAX_COMMENT:
        raise DecisionRefused(f"comment is longer than {MAX_COMMENT} characters")
    return ValidDecision(
        incident_id=request.incident_id,
        decision=Decision(request.decision.strip().lower()),
        comment=comment.strip(),
        approval_execution_arn=request.approval_execution_arn,
    )


def check_accepts_decision(
    incident: Incident,
    now: datetime | None = None,
    timeout_seconds: int | None = None,
    decision: Decision | None = None,
    *,
    task_token: str | None = None,
) -> str:
    """The task token to answer (`task_token`, as kept for the incident), or DecisionRefused
    unless the incident waits for its first decision, the token is the one its approval request
    stored (`check_task_token`) and (when the timeout is known) its approval request has not
    timed out. A reboot is refused once the incident has had `MAX_REBOOTS`: then it is replace
    or reject."""
    if incident.decision:
        raise DecisionRefused(
            f"incident {incident.incident_id} was already decided: "
            f"{incident.decision.decision} at {incident.decision.at} "
            f"by {incident.decision.who}"
        )
    if incident.state is not IncidentState.AWAITING_APPROVAL:
        raise DecisionRefused(
            f"incident {incident.incident_id} is {incident.state}, not awaiting approval"
        )
    token = check_task_token(incident, task_token)
    if decision is Decision.REBOOT and incident.reboots >= MAX_REBOOTS:
        raise DecisionRefused(
            f"incident {incident.incident_id} was already rebooted "
            f"({incident.reboots} of at most {MAX_REBOOTS}) and failed its health check "
            "again: decide 'approve' (replace) or 'reject'"
        )
    if now is not None and timeout_seconds and incident.approval_requested_at:
        deadline = datetime.fromisoformat(incident.approval_requested_at) + timedelta(
            seconds=timeout_seconds
        )
        if now > deadline:
            raise DecisionRefused(
                f"incident {incident.incident_id}: the approval request timed out at "
                f"{deadline.isoformat()} (it closes as expired; nothing is replaced)"
            )
    return token


def check_task_token(incident: Incident, task_token: str | None) -> str:
    """`task_token`, when its digest is the one the incident's approval request recorded
    (`Incident.task_token_sha256`); else DecisionRefused: nothing is sent with a token the
    incident does not name (another request's, or one put in its place)."""
    if not incident.task_token_sha256 or not task_token:
        raise DecisionRefused(f"incident {incident.incident_id} holds no task token")
    if task_token_digest(task_token) != incident.task_token_sha256:
        raise DecisionRefused(
            f"incident {incident.incident_id}: the task token kept for it is not the one its "
            "approval request recorded (its SHA-256 differs): nothing is sent with it"
        )
    return task_token
