"""The proceed job: decision `proceed` names a job-level incident the blast-radius guard held and,
once `approvals_required` distinct people agree, lets its nodes be health-checked
(`sdc_remediation.lambdas.logic.opening.proceeding`)."""

from __future__ import annotations

import dataclasses

from sdc_remediation.lambdas.logic.core.steps import Step
from sdc_remediation.lambdas.logic.opening import proceeding
from sdc_remediation.lambdas.logic.safety import approvers
from sdc_remediation.lambdas.logic.safety.approvers import Count
from sdc_remediation.lambdas.logic.safety.decisions import ValidDecision
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.models.approvals import Principal
from sdc_remediation.lambdas.models.errors import DecisionRefused
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.payloads import DecisionAccepted, DecisionRequest
from sdc_remediation.lambdas.observability import count, logger

from .replies import (
    approval_record,
    counted,
    incident_notice,
    refuse,
    refuse_unknown,
    taken,
    waiting,
)


def proceed_held(
    step: Step, valid: ValidDecision, principal: Principal, actor: str, request: DecisionRequest
) -> DecisionAccepted:
    """Let a job-level incident the guard held proceed (`sdc_remediation.lambdas.logic.opening.proceeding`)."""
    held = step.deps.incidents.get(valid.incident_id)
    if held is None:
        refuse_unknown(step, valid, actor, request)
    logger.set_correlation_id(held.incident_id)
    try:
        proceeding.check_may_proceed(step, held)
    except DecisionRefused as refused:
        refuse(step, held.incident_id, actor, request, refused)
    approval = approval_record(step, valid, principal)
    outcome: list[approvers.Tally] = []

    def record(current: Incident) -> bool:
        this = dataclasses.replace(approval, round=current.approval_round)
        outcome.append(
            approvers.tally(current.approvals, this, step.deps.settings.approvals_required)
        )
        if outcome[-1].count is not Count.RECORDED:
            return False
        current.approvals.append(this.to_record())
        return True

    held = step.update(held.incident_id, record, held)
    tallied = outcome[-1]
    if tallied.count is not Count.DECIDED:
        counted(step, valid, principal, actor, tallied, incident_notice(held))
        return waiting(step, valid, principal, tallied)
    try:
        opened = proceeding.proceed(step, held, actor, valid.comment)
    except DecisionRefused as refused:
        refuse(step, held.incident_id, actor, request, refused)
    count(M.DECISIONS_ACCEPTED)
    logger.info("held job incident proceeds", incident_id=held.incident_id, opened=opened)
    return taken(step, valid, held.incident_id, tallied)
