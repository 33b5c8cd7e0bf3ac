"""The request job: keep the waiting task's token, judge the incident, publish the approval
card (and send it again when it never went out)."""

from __future__ import annotations

from datetime import datetime

from sdc_remediation.lambdas.logic.core import lifecycle
from sdc_remediation.lambdas.logic.core.measures import report_waiting
from sdc_remediation.lambdas.logic.core.steps import Step, publish_with_retries
from sdc_remediation.lambdas.logic.evidence import hyperpod_view, telemetry
from sdc_remediation.lambdas.logic.evidence.history import past_incidents, repeat_offence
from sdc_remediation.lambdas.logic.evidence.recommendation import audit_recommendation, judge
from sdc_remediation.lambdas.logic.ports import Deps
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.deadline import ApprovalDeadline
from sdc_remediation.lambdas.models.errors import InvalidTransition
from sdc_remediation.lambdas.models.incident import Incident, IncidentState, task_token_digest
from sdc_remediation.lambdas.models.notices import NoticeKind
from sdc_remediation.lambdas.models.payloads import ApprovalRequest, ApprovalRequested, Decision
from sdc_remediation.lambdas.models.recommendation import Recommendation
from sdc_remediation.lambdas.observability import count, logger
from sdc_remediation.lambdas.wording import cards, chat

S = IncidentState


def request_approval(request: ApprovalRequest, deps: Deps) -> ApprovalRequested:
    """Keep the task token and publish the approval card.

    The token is kept apart from the incident (`IncidentStore.keep_task_token`: where only the
    pipeline's functions read it, not approvers), and the incident records its digest
    (`task_token_sha256`), which `decide` checks the token against before it answers with it:
    the token never goes into the incident record, the notification, the audit log or the
    logs. It is kept before the incident says it waits, so an incident that waits always has
    it. A retried invocation with the incident already waiting stores the (new) token
    and publishes again, as long as nobody has decided yet. A failed publish does not lose the
    request: the token is stored, the failure audited, and the waiting state's input in the
    console still shows the approval input to paste.

    Before the card is built, the GPU's hardware counters are read from the cluster's
    Prometheus workspace (`sdc_remediation.lambdas.logic.evidence.telemetry`, bounded in time, never failing), and
    HyperPod's own events for the instance and its node's HyperPod labels
    (`sdc_remediation.lambdas.logic.evidence.hyperpod_view`, never failing); both are kept on the incident with the
    token's digest: the card says what they showed.
    """
    step = Step(deps, "request_approval")
    with step.failing_visibly(request.incident_id):
        incident = step.load(request.incident_id)
        if incident.state is S.AWAITING_APPROVAL and incident.decision:
            raise InvalidTransition(f"incident {incident.incident_id} was already decided")
        at = step.now()
        hardware = telemetry.gather(deps, incident, datetime.fromisoformat(at))
        seen_by_hyperpod = hyperpod_view.gather(deps, incident, datetime.fromisoformat(at))
        past = past_incidents(step, incident)

        deps.incidents.keep_task_token(request.incident_id, request.task_token)

        def wait(current: Incident) -> bool:
            if current.state is not S.AWAITING_APPROVAL:
                lifecycle.advance(current, S.AWAITING_APPROVAL, at)
                current.approval_round += 1  # approvals of an earlier round no longer count
                if current.decided == Decision.REBOOT and current.reboot:
                    # The health check after the reboot failed: the reboot decision is kept
                    # under `reboot.decision`, and this card asks for a new one.
                    current.decision = None
            current.task_token_sha256 = task_token_digest(request.task_token)
            current.approval_requested_at = at
            current.approval_deadline = _deadline(deps, at)
            current.telemetry = hardware
            current.hyperpod = seen_by_hyperpod
            current.recommendation = judge(
                current, past, at, repeat=repeat_offence(current, past, deps.settings)
            )
            return True

        incident = step.update(request.incident_id, wait, incident)
        audit_recommendation(step, incident, AuditAction.APPROVAL_REQUESTED)
        advice = _judged(incident)
        card = _card(step, incident)
        approve = dict(card.inputs[Decision.APPROVE])  # the input the card that goes out offers
        delivered, request_id = send_card(step, incident, card)
        step.audit(
            incident.incident_id,
            AuditAction.APPROVAL_REQUESTED,
            {
                "advice": advice.advice.value,
                "reasons": list(advice.reasons),
                "history": [p.incident_id for p in advice.past],
                "approval_input": approve,
                "approval_state_machine_arn": deps.settings.approval_state_machine_arn,
                "expires_at": (
                    incident.approval_deadline.expires_at if incident.approval_deadline else None
                ),
                "subject": card.subject,
                "notified": delivered,
                "telemetry": {"state": hardware.state, "summary": hardware.summary},
                "hyperpod": {
                    "events": len(seen_by_hyperpod.events),
                    "events_error": seen_by_hyperpod.events_error,
                    "labels": dict(seen_by_hyperpod.labels),
                },
            },
            [request_id],
        )
        count(M.APPROVALS_REQUESTED)
        report_waiting(step, incident)
        logger.info("approval requested", incident_id=incident.incident_id, advice=advice.advice)
        return {"incident_id": incident.incident_id, "approval_input": approve}


def _deadline(deps: Deps, requested_at: str) -> ApprovalDeadline | None:
    """When an approval requested at `requested_at` expires: the instant `decide` refuses a
    decision after (`_timed_out`)."""
    timeout = deps.settings.approval_timeout_seconds
    if not timeout:
        return None
    return ApprovalDeadline.after(requested_at, timeout, deps.settings.approver_time_zone)


def _card(step: Step, incident: Incident) -> cards.ApprovalCard:
    """The approval card of an incident waiting for a decision, worded from its record."""
    return cards.approval_card(incident, step.deps.settings)


def _judged(incident: Incident) -> Recommendation:
    """The stored recommendation of an incident whose approval request judged it."""
    if incident.recommendation is None:
        raise InvalidTransition(f"incident {incident.incident_id} was never judged")
    return incident.recommendation


def send_card(step: Step, incident: Incident, card: cards.ApprovalCard) -> tuple[bool, str | None]:
    """Publish the approval card, retried with backoff (`deliver`). Delivered: the request id,
    and a `card_undelivered` mark from an earlier attempt is cleared. Not delivered: the
    incident is marked `card_undelivered` (shown by `sdc status`), the `CardsUndelivered`
    metric (it has an alarm) counts it, and reconciliation sends it again. Returns (delivered,
    the request id)."""
    delivered, request_id = publish_with_retries(
        step,
        incident.incident_id,
        NoticeKind.APPROVAL_REQUEST,
        lambda: step.deps.notifier.publish(
            card.subject,
            card.text,
            {"incident_id": incident.incident_id, "kind": NoticeKind.APPROVAL_REQUEST},
            chat.approval_request(incident, card),
        ),
    )
    at = step.now()

    def mark(current: Incident) -> bool:
        if delivered == (current.card_undelivered is None):
            return False
        current.card_undelivered = None if delivered else at
        return True

    step.update(incident.incident_id, mark, incident)
    if not delivered:
        count(M.CARDS_UNDELIVERED)
    return delivered, request_id


def resend_card(step: Step, incident: Incident) -> bool:
    """Send the card of an incident still waiting for a decision whose card never went out
    (reconciliation); audited `card_delivered`. Returns whether it went out this time."""
    card = _card(step, incident)
    delivered, request_id = send_card(step, incident, card)
    if delivered:
        step.audit(
            incident.incident_id,
            AuditAction.CARD_DELIVERED,
            {"subject": card.subject},
            [request_id],
        )
    return delivered
