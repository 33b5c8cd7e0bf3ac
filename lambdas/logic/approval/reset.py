"""The storm reset job: decision `reset` names a storm hold (its id as `incident_id`) and lifts
it, once `approvals_required` distinct people agree (counted on the hold itself)."""

from __future__ import annotations

from sdc_remediation.lambdas.logic.core import ids
from sdc_remediation.lambdas.logic.core.steps import Step
from sdc_remediation.lambdas.logic.safety import approvers, guard
from sdc_remediation.lambdas.logic.safety.approvers import Count
from sdc_remediation.lambdas.logic.safety.decisions import ValidDecision
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.models.approvals import Principal
from sdc_remediation.lambdas.models.errors import ConditionFailed, DecisionRefused
from sdc_remediation.lambdas.models.guard import ClusterHold
from sdc_remediation.lambdas.models.notices import NoticeKind
from sdc_remediation.lambdas.models.payloads import DecisionAccepted, DecisionRequest
from sdc_remediation.lambdas.observability import count, logger
from sdc_remediation.lambdas.wording import chat

from .replies import approval_record, counted, refuse, taken, waiting


def reset_hold(
    step: Step, valid: ValidDecision, principal: Principal, actor: str, request: DecisionRequest
) -> DecisionAccepted:
    """Lift a storm hold: the id must name an active hold; a second reset is refused."""
    deps = step.deps
    hold = deps.guard.get_hold(valid.incident_id)
    if hold is None:
        if deps.incidents.get(valid.incident_id) is not None:
            refuse(
                step,
                valid.incident_id,
                actor,
                request,
                DecisionRefused(
                    f"{valid.incident_id} is an incident, not a storm hold: reset only lifts "
                    "a storm hold (use approve or reject)"
                ),
            )
        refuse(
            step,
            ids.decision_subject(request.approval_execution_arn),
            actor,
            request,
            DecisionRefused(f"no storm hold {valid.incident_id}"),
        )
    if not hold.active:
        refuse(
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
        tallied = _count_on_hold(step, valid, principal, hold)
    except DecisionRefused as refused:
        refuse(step, hold.hold_id, actor, request, refused)
    if tallied.count is not Count.DECIDED:
        counted(
            step,
            valid,
            principal,
            actor,
            tallied,
            lambda subject, text: chat.hold_notice(
                NoticeKind.APPROVAL_COUNTED, hold, subject, text
            ),
        )
        return waiting(step, valid, principal, tallied)
    try:
        guard.lift(step, hold, actor, valid.comment)
    except ConditionFailed:
        refuse(
            step,
            hold.hold_id,
            actor,
            request,
            DecisionRefused(f"storm hold {hold.hold_id} changed meanwhile: it was already reset"),
        )
    count(M.DECISIONS_ACCEPTED)
    logger.info("storm hold reset", hold_id=hold.hold_id)
    return taken(step, valid, hold.hold_id, tallied)


def _count_on_hold(
    step: Step, valid: ValidDecision, principal: Principal, hold: ClusterHold
) -> approvers.Tally:
    """A reset's approval counted on the storm hold (a conditional save: a racing approval is
    counted again on the fresh record)."""
    deps = step.deps
    approval = approval_record(step, valid, principal)
    required = deps.settings.approvals_required
    for _ in range(_COUNT_ATTEMPTS):
        tallied = approvers.tally(hold.approvals, approval, required)
        if tallied.count is not Count.RECORDED:
            return tallied
        hold.approvals.append(approval.to_record())
        try:
            deps.guard.save_hold(hold)
            return tallied
        except ConditionFailed:
            fresh = deps.guard.get_hold(hold.hold_id)
            if fresh is None or not fresh.active:
                raise DecisionRefused(f"storm hold {hold.hold_id} was reset meanwhile") from None
            hold = fresh
    raise DecisionRefused(f"storm hold {hold.hold_id} kept changing: decide again")


_COUNT_ATTEMPTS = 3
