"""Which approval decisions are accepted: a known decision, for an incident awaiting approval,
once, before the approval timeout. Every refusal is a `DecisionRefused` with a reason a person
can act on."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from lambdas.logic.core.lifecycle import MAX_REBOOTS, reboots_done
from lambdas.models.approvals import ApprovalRecord
from lambdas.models.errors import DecisionRefused
from lambdas.models.incident import Incident, IncidentState
from lambdas.models.payloads import INCIDENT_ID_RE, Decision, DecisionRequest
from lambdas.models.settings import Settings

MAX_COMMENT = 1000


@dataclass(frozen=True, slots=True)
class ValidDecision:
    incident_id: str
    decision: Decision
    comment: str
    approval_execution_arn: str


BINDING_HEADER = "x-sdc-approval"
"""The signed header that binds an identity proof to one decision (as `x-k8s-aws-id` binds an
EKS token to one cluster): STS ignores it, but its signature covers it, so the proof is
accepted for this value only."""


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
) -> str:
    """The task token to answer, or DecisionRefused unless the incident waits for its first
    decision and (when the timeout is known) its approval request has not timed out. A reboot
    is refused once the incident has had `MAX_REBOOTS`: then it is replace or reject."""
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
    if not incident.task_token:
        raise DecisionRefused(f"incident {incident.incident_id} holds no task token")
    if decision is Decision.REBOOT and reboots_done(incident) >= MAX_REBOOTS:
        raise DecisionRefused(
            f"incident {incident.incident_id} was already rebooted "
            f"({reboots_done(incident)} of at most {MAX_REBOOTS}) and failed its health check "
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
    return incident.task_token


def approvals_line(incident: Incident, required: int | None = None) -> str | None:
    """ "1 of 2: approve by arn:…/alice at 12:03:00" when more than one approval is (or was)
    required; None otherwise. `required` defaults to what the recorded approvals say."""
    decided = incident.decision
    records = decided.approvals if decided is not None and decided.approvals else incident.approvals
    approvals = [ApprovalRecord.from_record(a) for a in records or []]
    if required is None:
        required = max((a.required for a in approvals), default=1)
    if required <= 1:
        return None
    if not approvals:
        return f"0 of {required}"
    who = "; ".join(
        f"{a.decision} by {a.principal.label()} at {a.at[11:19] or a.at}" for a in approvals
    )
    return f"{len(approvals)} of {required}: {who}"


def approval_rule_lines(settings: Settings, incident: Incident) -> tuple[str, ...]:
    """What the card says about who may decide and how many must agree (nothing when one
    unsigned approval by anyone allowed to start the approval state machine is enough)."""
    if not settings.needs_identity_proof:
        return ()
    required = settings.approvals_required
    lines = [""]
    if required > 1:
        lines.append(
            f"  Approvals needed: {required} distinct approvers must give the same approve (or "
            "reboot); the same person twice counts once; a reject by any approver ends it."
        )
        so_far = approvals_line(incident, required)
        if so_far:
            lines.append(f"  So far: {so_far}")
    if settings.approvers:
        lines.append(f"  Allowed approvers: {', '.join(settings.approvers)}")
    lines.append(
        "  Decide with `sdc approve|reboot|reject <incident id> -m '<why>'`: it signs a proof of "
        "who you are. A console or plain start-execution approval carries none and is refused."
    )
    return tuple(lines)
