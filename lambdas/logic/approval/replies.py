"""What a decision gets back when it does not act (yet), shared by the three kinds of decision
(an incident's, a storm hold's reset, a held job's proceed): its approval recorded and counted
towards `approvals_required` (announced, audited, answered "1 of 2"), or its refusal (audited,
counted, raised as DecisionRefused so that the approval execution fails and the approver sees
why)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from sdc_remediation.lambdas.logic.core import ids
from sdc_remediation.lambdas.logic.core.steps import Step, publish_with_retries
from sdc_remediation.lambdas.logic.safety import approvers
from sdc_remediation.lambdas.logic.safety.approvers import Count
from sdc_remediation.lambdas.logic.safety.decisions import ValidDecision
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.models.approvals import ApprovalRecord, Principal
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.errors import DecisionRefused
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.notices import ChatNotification, NoticeKind
from sdc_remediation.lambdas.models.payloads import Decision, DecisionAccepted, DecisionRequest
from sdc_remediation.lambdas.observability import count, logger
from sdc_remediation.lambdas.wording import chat
from sdc_remediation.lambdas.wording.card_lines import tally_line

ChatOf = Callable[[str, str], ChatNotification]
"""The chat form of a notice, from its subject and text."""


def approval_record(step: Step, valid: ValidDecision, principal: Principal) -> ApprovalRecord:
    required = step.deps.settings.approvals_required
    return ApprovalRecord(
        valid.decision,
        principal,
        valid.approval_execution_arn,
        step.now(),
        valid.comment,
        required,
    )


def incident_notice(incident: Incident) -> ChatOf:
    return lambda subject, text: chat.incident_notice(
        NoticeKind.APPROVAL_COUNTED, incident, subject, text
    )


def counted(
    step: Step,
    valid: ValidDecision,
    principal: Principal,
    actor: str,
    tallied: approvers.Tally,
    chat_of: ChatOf,
) -> None:
    """An approval recorded (or repeated by the same human) while more are required: audited
    under the decision's subject; a recorded one is announced."""
    required = step.deps.settings.approvals_required
    counted = f"{len(tallied.approvals)} of {required}"
    repeated = tallied.count is Count.REPEATED
    if not repeated:
        _notify_counted(step, valid, tally_line(tallied.approvals, required), chat_of)
    step.audit(
        valid.incident_id,
        AuditAction.APPROVAL_REPEATED if repeated else AuditAction.APPROVAL_RECORDED,
        {
            "decision": valid.decision,
            "comment": valid.comment,
            "approval_execution_arn": valid.approval_execution_arn,
            "principal": principal.to_record(),
            "approvals": counted,
        },
        actor=actor,
    )
    logger.info(
        "approval counted", incident_id=valid.incident_id, approvals=counted, repeated=repeated
    )


def waiting(
    step: Step, valid: ValidDecision, principal: Principal, tallied: approvers.Tally
) -> DecisionAccepted:
    return {
        "incident_id": valid.incident_id,
        "decision": valid.decision,
        "accepted": True,
        "approvals": f"{len(tallied.approvals)} of {step.deps.settings.approvals_required}",
        "waiting": True,
        "principal": principal.label(),
    }


def _notify_counted(step: Step, valid: ValidDecision, line: str, chat_of: ChatOf) -> None:
    """Tell the approvers that an approval was recorded and another is needed (best effort,
    retried as every notice is: a failed publish is audited, the approval stands)."""
    subject_id = valid.incident_id
    subject = f"SDC approval {line.split(':', 1)[0]}: {subject_id}"[:100]
    ends = (
        "; a reject by any approver ends it"
        if valid.decision in (Decision.APPROVE, Decision.REBOOT)
        else ""
    )
    text = "\n".join(
        (
            f"Approvals of {valid.decision} for {subject_id}: {line}",
            "Nothing acts until another person gives the same decision; the same person again "
            f"(in any session or account) counts once{ends}.",
            f"Decide with: sdc {valid.decision} {subject_id} -m '<why>'",
        )
    )
    kind = NoticeKind.APPROVAL_COUNTED
    publish_with_retries(
        step,
        subject_id,
        kind,
        lambda: step.deps.notifier.publish(
            subject, text, {"incident_id": subject_id, "kind": kind}, chat_of(subject, text)
        ),
    )


def taken(
    step: Step, valid: ValidDecision, subject: str, tallied: approvers.Tally
) -> DecisionAccepted:
    """A reset or proceed that acted; with several approvals required, how many agreed."""
    result: DecisionAccepted = {
        "incident_id": subject,
        "decision": valid.decision,
        "accepted": True,
    }
    required = step.deps.settings.approvals_required
    if required > 1:
        result["approvals"] = f"{len(tallied.approvals)} of {required}"
        result["waiting"] = False
    return result


def refusal_subject(step: Step, request: DecisionRequest) -> str:
    """The incident the refused decision names when it exists, else the decision's own."""
    if (
        isinstance(request.incident_id, str)
        and step.deps.incidents.get(request.incident_id) is not None
    ):
        return request.incident_id
    return ids.decision_subject(request.approval_execution_arn)


def refuse_unknown(
    step: Step, valid: ValidDecision, actor: str, request: DecisionRequest
) -> NoReturn:
    """No incident or hold has the id: audited under the approval execution's own subject."""
    refuse(
        step,
        ids.decision_subject(request.approval_execution_arn),
        actor,
        request,
        DecisionRefused(f"no incident {valid.incident_id}"),
    )


def refuse(
    step: Step, subject: str, actor: str, request: DecisionRequest, refused: DecisionRefused
) -> NoReturn:
    step.audit(
        subject,
        AuditAction.DECISION_REFUSED,
        {
            "reason": str(refused),
            "incident_id": printable(request.incident_id),
            "decision": printable(request.decision),
            "comment": printable(request.comment),
            "approval_execution_arn": request.approval_execution_arn,
        },
        actor=actor,
    )
    count(M.DECISIONS_REFUSED)
    logger.warning("decision refused", subject=subject, reason=str(refused))
    raise refused


def printable(value: Any) -> Any:
    """Raw input, kept JSON-safe and short for the audit log."""
    if value is None or isinstance(value, (bool, int)):
        return value
    return str(value)[:1000]
