"""Human approval: the request (task token stored, card published) and the decision."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, NoReturn

from lambdas.logic.core import ids, lifecycle
from lambdas.logic.core.measures import elapsed, report_waiting
from lambdas.logic.core.steps import Step, deliver, error_details
from lambdas.logic.evidence import hyperpod_view, telemetry
from lambdas.logic.evidence.history import past_incidents
from lambdas.logic.evidence.recommendation import audit_recommendation, judge
from lambdas.logic.opening import proceeding
from lambdas.logic.ports import Deps, PageDeps
from lambdas.logic.safety import approvers, guard
from lambdas.logic.safety.approvers import Count
from lambdas.logic.safety.decisions import (
    ValidDecision,
    approval_binding,
    check_accepts_decision,
    check_task_token,
    validate_decision,
)
from lambdas.metric_names import PipelineMetric as M
from lambdas.models.approvals import ApprovalRecord, Delivery, Principal, PrincipalSource
from lambdas.models.audit import AuditAction, AuditEntry
from lambdas.models.deadline import ApprovalDeadline
from lambdas.models.errors import (
    ConditionFailed,
    DecisionRefused,
    ExecutionNotFound,
    IdentityRefused,
    InvalidTransition,
    TaskNotWaiting,
)
from lambdas.models.guard import ClusterHold
from lambdas.models.incident import Incident, IncidentState, task_token_digest
from lambdas.models.notices import ChatNotification, NoticeKind
from lambdas.models.payloads import (
    ApprovalRequest,
    ApprovalRequested,
    Decision,
    DecisionAccepted,
    DecisionRequest,
)
from lambdas.models.recommendation import Recommendation
from lambdas.models.recovery import DecisionRecord
from lambdas.models.widget import WidgetRequest
from lambdas.observability import count, logger, seconds
from lambdas.wording import cards, chat, page
from lambdas.wording.card_lines import approvals_line, tally_line

S = IncidentState
ChatOf = Callable[[str, str], ChatNotification]
"""The chat form of a notice, from its subject and text."""
PROOF_KEPT_SECONDS = 86_400
"""How long a redeemed proof's id is kept: STS refuses a proof 15 minutes after it was signed
at most (`lambdas.adapters.identity.PROOF_EXPIRES_SECONDS`), so a day outlives every proof."""


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
    Prometheus workspace (`lambdas.logic.evidence.telemetry`, bounded in time, never failing), and
    HyperPod's own events for the instance and its node's HyperPod labels
    (`lambdas.logic.evidence.hyperpod_view`, never failing); both are kept on the incident with the
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
            current.recommendation = judge(current, past, at)
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
    delivered, request_id = deliver(
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


def decide(request: DecisionRequest, deps: Deps) -> DecisionAccepted:
    """Accept one decision for an incident awaiting approval and hand it to the waiting task.

    In this order, each refusal audited, then raised as DecisionRefused:
    1. The decision is bound to a real approval: the execution it names must be a running
       execution of this deployment's approval state machine whose input (Step Functions' own
       record, not the payload) is this decision for this incident. Invoking `decide` directly
       gains nothing.
    2. The approver's principal: an identity proof in the execution's input (a presigned
       sts:GetCallerIdentity request bound to this decision) is redeemed, and the principal
       STS names must match `approvers` when set. Without a proof the decision is taken as an
       unverified console approval, unless the settings need one (`needs_identity_proof`).
    3. The incident must wait for its first decision, before the approval timeout.

    With `approvals_required` > 1, an approve or reboot is recorded until that many distinct
    verified principals agree; the same principal twice counts once; a reject by any allowed
    approver ends it.

    Write ahead, then act, then settle: the decision is claimed on the incident (a conditional
    save: of two racing decisions one wins) as pending and audited `decision_accepted`
    (delivery pending) before SendTaskSuccess; `decision_delivered` settles it after. A failed
    audit write, a lost SendTaskSuccess answer or a crash in between leaves the claim pending:
    a retry (or a later approval of the same decision) resumes the delivery and never sends a
    second, contradicting answer.

    Decision `reset` names a storm hold (its id as `incident_id`) and lifts it; decision
    `proceed` names a job-level incident the guard held and lets its nodes be health-checked.
    """
    step = Step(deps, "decide")
    actor = f"approver:{request.approval_execution_arn}"
    bound = _bound_request(step, request, actor)
    try:
        valid = validate_decision(bound)
    except DecisionRefused as refused:
        _refuse(step, _refusal_subject(step, request), actor, request, refused)
    principal = _principal(step, bound, valid, actor)
    if principal.verified:
        actor = f"approver:{principal.arn}"
    if valid.decision is Decision.RESET:
        return _reset(step, valid, principal, actor, request)
    if valid.decision is Decision.PROCEED:
        return _proceed(step, valid, principal, actor, request)
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
        _refuse_unknown(step, valid, actor, request)
    logger.set_correlation_id(valid.incident_id)
    held = incident.decision
    if held is not None and held.delivery == Delivery.PENDING and held.decision is valid.decision:
        return _resume(step, valid, principal, actor, incident)
    required = deps.settings.approvals_required
    approval = _approval(step, valid, principal)
    counted = required if valid.decision is not Decision.REJECT else 1
    token = deps.incidents.task_token(valid.incident_id)
    tokens: list[str] = []
    outcome: list[approvers.Tally] = []

    def claim(current: Incident) -> bool:
        tokens.append(
            check_accepts_decision(
                current,
                deps.clock.now(),
                deps.settings.approval_timeout_seconds,
                valid.decision,
                task_token=token,
            )
        )
        this = dataclasses.replace(approval, round=current.approval_round)
        outcome.append(approvers.tally(current.approvals, this, counted))
        if outcome[-1].count is Count.REPEATED:
            return False
        if outcome[-1].count is Count.RECORDED:
            current.approvals.append(this.to_record())
            return True
        current.decision = DecisionRecord(
            valid.decision,
            valid.comment,
            valid.approval_execution_arn,
            approval.at,
            principal=principal.to_record(),
            approvals=[a.to_record() for a in outcome[-1].approvals],
            delivery=Delivery.PENDING,
        )
        return True

    try:
        decided = step.update(valid.incident_id, claim, incident)
    except DecisionRefused as refused:
        _refuse(step, valid.incident_id, actor, request, refused)
    if outcome[-1].count is not Count.DECIDED:
        _counted(step, valid, principal, actor, outcome[-1], _incident_notice(decided))
        return _waiting(step, valid, principal, outcome[-1])
    assert decided.decision is not None
    _write_ahead(step, valid, actor, decided.decision)
    _deliver(step, valid, tokens[-1], actor, decided, resumed=False)
    return _accepted(step, valid, decided)


def _bound_request(step: Step, request: DecisionRequest, actor: str) -> DecisionRequest:
    """The decision as the approval execution it names carries it (DescribeExecution): that
    execution must be a running execution of this deployment's approval state machine, and
    its input must be this decision. Anything else is refused."""
    deps = step.deps
    arn = request.approval_execution_arn
    machine = deps.settings.approval_state_machine_arn

    def refuse(reason: str) -> NoReturn:
        _refuse(step, _refusal_subject(step, request), actor, request, DecisionRefused(reason))

    if not machine:
        refuse(
            "this deployment names no approval state machine (APPROVAL_STATE_MACHINE_ARN): a "
            "decision cannot be bound to an approval"
        )
    if not arn:
        refuse("the decision names no approval execution")
    try:
        execution = deps.workflow.describe_execution(arn)
    except ExecutionNotFound as err:
        refuse(f"{arn!r} is not an approval execution of this deployment: {err}")
    if execution.state_machine_arn != machine:
        refuse(
            f"execution {arn} belongs to {execution.state_machine_arn}, not to this "
            f"deployment's approval state machine {machine}"
        )
    if execution.status != "RUNNING":
        refuse(
            f"approval execution {arn} is {execution.status}: a decision is taken only from "
            "the approval execution while it runs"
        )
    given = execution.input if isinstance(execution.input, dict) else {}
    for key in ("incident_id", "decision", "comment"):
        if given.get(key) != getattr(request, key):
            refuse(
                f"the decision's {key} ({_printable(getattr(request, key))!r}) is not the one "
                f"approval execution {arn} was started with ({_printable(given.get(key))!r})"
            )
    return DecisionRequest(
        given.get("incident_id"),
        given.get("decision"),
        given.get("comment"),
        arn,
        identity_proof=given.get("identity_proof"),
    )


def _principal(step: Step, bound: DecisionRequest, valid: ValidDecision, actor: str) -> Principal:
    """Who decided, as AWS established it: the redeemed identity proof's principal, which must
    match an approver pattern when those are set; without a proof, an unverified console
    approval (refused when the settings need a proof)."""
    deps = step.deps
    settings = deps.settings

    def refuse(reason: str) -> NoReturn:
        _refuse(step, _refusal_subject(step, bound), actor, bound, DecisionRefused(reason))

    if bound.identity_proof is None:
        if settings.needs_identity_proof:
            refuse(
                "this deployment needs to know who decides (REQUIRE_IDENTITY_PROOF, APPROVERS "
                "or APPROVALS_REQUIRED > 1) and the approval carries no identity proof: decide "
                "with `sdc approve|reboot|reject|reset`, which signs one; a console approval "
                "cannot prove who started it"
            )
        return Principal(PrincipalSource.EXECUTION_ONLY)
    if not isinstance(bound.identity_proof, str):
        refuse("identity_proof must be a string (the token `sdc` signs)")
    assert settings.approval_state_machine_arn is not None  # checked by _bound_request
    binding = approval_binding(
        settings.approval_state_machine_arn, valid.incident_id, valid.decision
    )
    try:
        principal = deps.identity.redeem(bound.identity_proof, binding)
    except IdentityRefused as err:
        refuse(f"the identity proof was refused: {err}")
    if not principal.proof_id:
        refuse("the identity proof has no id to redeem it once by")
    expires = int(deps.clock.now().timestamp()) + PROOF_KEPT_SECONDS
    first = deps.incidents.redeem_proof(principal.proof_id, valid.approval_execution_arn, expires)
    if first is not None:
        refuse(
            f"the identity proof was already redeemed by approval execution {first}: a proof "
            "is good for one approval; run the sdc command again, which signs a new one"
        )
    why_not = approvers.refusal(principal, settings)
    if why_not:
        refuse(why_not)
    human = approvers.human_of(principal, settings.human_session_roles)
    if human is None and settings.approvals_required > 1 and valid.decision is not Decision.REJECT:
        refuse(
            f"{principal.arn} names no human, and this deployment needs "
            f"{settings.approvals_required} distinct people to agree (APPROVALS_REQUIRED): "
            "decide as an IAM Identity Center user, an IAM user, or in a session of a role "
            "listed in HUMAN_SESSION_ROLES (sdc:humanSessionRoles), whose session name is the "
            "person's"
        )
    return dataclasses.replace(principal, human=human)


def _incident_notice(incident: Incident) -> ChatOf:
    return lambda subject, text: chat.incident_notice(
        NoticeKind.APPROVAL_COUNTED, incident, subject, text
    )


def _counted(
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


def _waiting(
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
    deliver(
        step,
        subject_id,
        kind,
        lambda: step.deps.notifier.publish(
            subject, text, {"incident_id": subject_id, "kind": kind}, chat_of(subject, text)
        ),
    )


def _write_ahead(step: Step, valid: ValidDecision, actor: str, decision: DecisionRecord) -> None:
    """`decision_accepted` with delivery pending, before anything is sent."""
    step.audit(
        valid.incident_id,
        AuditAction.DECISION_ACCEPTED,
        {
            "decision": valid.decision,
            "comment": decision.comment,
            "approval_execution_arn": decision.approval_execution_arn,
            "principal": decision.principal,
            "approvals": [
                {
                    "principal": a["principal"].get("arn"),
                    "human": a["principal"].get("human"),
                    "at": a["at"],
                }
                for a in decision.approvals or []
            ],
            "delivery": Delivery.PENDING,
        },
        actor=actor,
    )


def _resume(
    step: Step, valid: ValidDecision, principal: Principal, actor: str, incident: Incident
) -> DecisionAccepted:
    """A decision claimed before and still pending: its delivery is resumed, never repeated.
    The write-ahead entry is written if the earlier attempt could not; an answer the audit
    already shows as delivered is only marked on the incident."""
    held = incident.decision
    assert held is not None
    entries = step.deps.audit.entries(valid.incident_id)
    claimed_by = held.approval_execution_arn
    acted = incident.state in _ACTED_ON.get(held.decision, frozenset())
    if acted and not _logged(entries, AuditAction.DECISION_DELIVERED, claimed_by):
        # The remediation moved on with this decision: an earlier answer landed.
        step.audit(
            valid.incident_id,
            AuditAction.DECISION_DELIVERED,
            {
                "decision": held.decision.value,
                "approval_execution_arn": claimed_by,
                "delivery": Delivery.DELIVERED,
                "how": f"the remediation acted on it (the incident is {incident.state}): the "
                "earlier SendTaskSuccess landed (its answer was lost)",
            },
            actor=actor,
        )
        _settle(step, valid.incident_id, incident)
    elif incident.state.terminal and not _logged(
        entries, AuditAction.DECISION_DELIVERED, claimed_by
    ):
        # Closed (expired, failed...) without acting on it: the decision never took effect.
        refused = DecisionRefused(
            f"incident {valid.incident_id} closed as {incident.state} before its pending "
            f"{held.decision} decision was delivered: it never took effect"
        )
        step.audit(
            valid.incident_id,
            AuditAction.DECISION_REFUSED,
            {
                "reason": str(refused),
                "decision": held.decision.value,
                "approval_execution_arn": claimed_by,
                "delivery": "not_delivered",
            },
            actor=actor,
        )
        count(M.DECISIONS_REFUSED)
        raise refused
    elif not _logged(entries, AuditAction.DECISION_DELIVERED, claimed_by):
        if not _logged(entries, AuditAction.DECISION_ACCEPTED, claimed_by):
            _write_ahead(step, valid, actor, held)
        try:
            token = check_task_token(incident, step.deps.incidents.task_token(valid.incident_id))
        except DecisionRefused as refused:
            asked = DecisionRequest(
                valid.incident_id, valid.decision, valid.comment, valid.approval_execution_arn
            )
            _refuse(step, valid.incident_id, actor, asked, refused)
        _deliver(step, valid, token, actor, incident, resumed=True)
    else:
        _settle(step, valid.incident_id, incident)
    logger.info(
        "pending decision resumed",
        incident_id=valid.incident_id,
        claimed_by=claimed_by,
        by=principal.label(),
    )
    return _accepted(step, valid, step.load(valid.incident_id))


_ACTED_ON: dict[Decision, frozenset[S]] = {
    Decision.APPROVE: frozenset({S.REPLACING, S.REPLACED, S.REPLACED_BY_HYPERPOD}),
    Decision.REBOOT: frozenset({S.REBOOTING, S.REBOOTED}),
    Decision.REJECT: frozenset({S.REJECTED}),
}
"""The states the remediation reaches only after it received each decision."""


def _logged(entries: list[AuditEntry], action: AuditAction, execution_arn: str | None) -> bool:
    return any(
        e.action == action and e.details.get("approval_execution_arn") == execution_arn
        for e in entries
    )


def _accepted(step: Step, valid: ValidDecision, decided: Incident) -> DecisionAccepted:
    deps = step.deps
    assert decided.decision is not None
    decided_at = decided.decision.at
    count(M.DECISIONS_ACCEPTED)
    seconds(
        M.DECISION_LATENCY,
        elapsed(
            decided.created_at,
            datetime.fromisoformat(decided_at) if decided_at else deps.clock.now(),
        ),
    )
    report_waiting(step, decided)
    logger.info("decision accepted", incident_id=valid.incident_id, decision=valid.decision)
    result: DecisionAccepted = {
        "incident_id": valid.incident_id,
        "decision": valid.decision,
        "accepted": True,
        "principal": decided.decision.who,
    }
    line = approvals_line(decided, deps.settings.approvals_required)
    if line is not None:
        result["approvals"] = line.split(":", 1)[0]
        result["waiting"] = False
    return result


def _settle(step: Step, incident_id: str, current: Incident) -> Incident:
    def delivered(found: Incident) -> bool:
        if found.decision is None or found.decision.delivery != Delivery.PENDING:
            return False
        found.decision = dataclasses.replace(found.decision, delivery=Delivery.DELIVERED)
        return True

    return step.update(incident_id, delivered, current)


def _deliver(
    step: Step,
    valid: ValidDecision,
    token: str,
    actor: str,
    decided: Incident,
    *,
    resumed: bool,
) -> None:
    """SendTaskSuccess with the decision `decided` records, then settle: `decision_delivered`
    audited, the decision marked delivered.

    Step Functions no longer waiting: on a first attempt, nobody answered the task (the claim
    held it), so the approval timed out or the remediation stopped: the claim is given back
    and the decision refused. On a resumed delivery before the approval deadline, an earlier
    attempt's answer landed (its reply was lost): that is settled as delivered, saying so.
    Any other failure leaves the claim pending, is audited `decision_delivery_unknown` and
    re-raised: the answer may or may not have landed, and the next attempt finds out."""
    recorded = decided.decision
    assert recorded is not None
    output = {
        "incident_id": valid.incident_id,
        "decision": recorded.decision.value,
        "comment": recorded.comment,
        "approval_execution_arn": recorded.approval_execution_arn,
    }
    deps = step.deps
    settled_by = "SendTaskSuccess answered"
    try:
        request_id = deps.workflow.send_task_success(token, output)
    except TaskNotWaiting as err:
        request_id = err.request_id
        if not resumed or _timed_out(deps, decided):
            _give_back(step, valid, recorded, decided)
            refused = DecisionRefused(
                f"incident {valid.incident_id}: the remediation no longer waits for a decision "
                f"(the approval request timed out or was answered): {err}"
            )
            step.audit(
                valid.incident_id,
                AuditAction.DECISION_REFUSED,
                {
                    "reason": str(refused),
                    "decision": valid.decision,
                    "comment": valid.comment,
                    "approval_execution_arn": recorded.approval_execution_arn,
                    "delivery": "not_delivered",
                },
                [err.request_id],
                actor=actor,
            )
            count(M.DECISIONS_REFUSED)
            raise refused from err
        settled_by = (
            "a retry found that Step Functions no longer waits for the task, before the "
            "approval deadline: the earlier SendTaskSuccess landed (its answer was lost)"
        )
    except Exception as err:
        step.audit(
            valid.incident_id,
            AuditAction.DECISION_DELIVERY_UNKNOWN,
            error_details(
                err,
                decision=valid.decision,
                approval_execution_arn=recorded.approval_execution_arn,
                delivery=Delivery.PENDING,
                next="a retry (or another approval of the same decision) resumes the delivery",
            ),
            [getattr(err, "request_id", None)],
            actor=actor,
        )
        raise
    step.audit(
        valid.incident_id,
        AuditAction.DECISION_DELIVERED,
        {
            "decision": recorded.decision.value,
            "approval_execution_arn": recorded.approval_execution_arn,
            "delivery": Delivery.DELIVERED,
            "how": settled_by,
        },
        [request_id],
        actor=actor,
    )
    _settle(step, valid.incident_id, decided)


def _timed_out(deps: Deps, incident: Incident) -> bool:
    timeout = deps.settings.approval_timeout_seconds
    if not timeout or not incident.approval_requested_at:
        return False
    deadline = datetime.fromisoformat(incident.approval_requested_at) + timedelta(seconds=timeout)
    return deps.clock.now() > deadline


def _give_back(
    step: Step, valid: ValidDecision, recorded: DecisionRecord, decided: Incident
) -> None:
    """Release the claim (only the one this decision made)."""

    def release(current: Incident) -> bool:
        if current.decision is None or (
            current.decision.approval_execution_arn != recorded.approval_execution_arn
        ):
            return False
        current.decision = None
        return True

    step.update(valid.incident_id, release, decided)


def _refusal_subject(step: Step, request: DecisionRequest) -> str:
    """The incident the refused decision names when it exists, else the decision's own."""
    if (
        isinstance(request.incident_id, str)
        and step.deps.incidents.get(request.incident_id) is not None
    ):
        return request.incident_id
    return ids.decision_subject(request.approval_execution_arn)


def _reset(
    step: Step, valid: ValidDecision, principal: Principal, actor: str, request: DecisionRequest
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
        tallied = _count_on_hold(step, valid, principal, hold)
    except DecisionRefused as refused:
        _refuse(step, hold.hold_id, actor, request, refused)
    if tallied.count is not Count.DECIDED:
        _counted(
            step,
            valid,
            principal,
            actor,
            tallied,
            lambda subject, text: chat.hold_notice(
                NoticeKind.APPROVAL_COUNTED, hold, subject, text
            ),
        )
        return _waiting(step, valid, principal, tallied)
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
    return _taken(step, valid, hold.hold_id, tallied)


def _taken(
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


def _approval(step: Step, valid: ValidDecision, principal: Principal) -> ApprovalRecord:
    required = step.deps.settings.approvals_required
    return ApprovalRecord(
        valid.decision,
        principal,
        valid.approval_execution_arn,
        step.now(),
        valid.comment,
        required,
    )


def _count_on_hold(
    step: Step, valid: ValidDecision, principal: Principal, hold: ClusterHold
) -> approvers.Tally:
    """A reset's approval counted on the storm hold (a conditional save: a racing approval is
    counted again on the fresh record)."""
    deps = step.deps
    approval = _approval(step, valid, principal)
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


def _proceed(
    step: Step, valid: ValidDecision, principal: Principal, actor: str, request: DecisionRequest
) -> DecisionAccepted:
    """Let a job-level incident the guard held proceed (`lambdas.logic.opening.proceeding`)."""
    held = step.deps.incidents.get(valid.incident_id)
    if held is None:
        _refuse_unknown(step, valid, actor, request)
    logger.set_correlation_id(held.incident_id)
    try:
        proceeding.check_may_proceed(step, held)
    except DecisionRefused as refused:
        _refuse(step, held.incident_id, actor, request, refused)
    approval = _approval(step, valid, principal)
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
        _counted(step, valid, principal, actor, tallied, _incident_notice(held))
        return _waiting(step, valid, principal, tallied)
    try:
        opened = proceeding.proceed(step, held, actor, valid.comment)
    except DecisionRefused as refused:
        _refuse(step, held.incident_id, actor, request, refused)
    count(M.DECISIONS_ACCEPTED)
    logger.info("held job incident proceeds", incident_id=held.incident_id, opened=opened)
    return _taken(step, valid, held.incident_id, tallied)


def _refuse_unknown(
    step: Step, valid: ValidDecision, actor: str, request: DecisionRequest
) -> NoReturn:
    """No incident or hold has the id: audited under the approval execution's own subject."""
    _refuse(
        step,
        ids.decision_subject(request.approval_execution_arn),
        actor,
        request,
        DecisionRefused(f"no incident {valid.incident_id}"),
    )


def _refuse(
    step: Step, subject: str, actor: str, request: DecisionRequest, refused: DecisionRefused
) -> NoReturn:
    step.audit(
        subject,
        AuditAction.DECISION_REFUSED,
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


def incidents_page(request: WidgetRequest, deps: PageDeps) -> str:
    """The dashboard's custom widget: the open incidents as HTML (`lambdas.wording.page`), or
    the widget's documentation when the console asks for it. Reads only; decides nothing."""
    if request.describe:
        return page.DESCRIBE
    incidents = deps.incidents.open_incidents()
    logger.info("page rendered", incidents=len(incidents))
    return page.page_html(incidents, deps.settings, now=deps.clock.now(), zone=request.zone)
