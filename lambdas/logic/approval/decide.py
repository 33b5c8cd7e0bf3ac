"""The decide job: one decision arrives from the approval state machine. Read top to bottom, it is
the whole walk: the decision bound to the approval execution that carries it
(`_bound_request`), checked (`safety.decisions`), its principal established by AWS
(`_principal`, `safety.approvers`), then a storm hold's `reset` (`reset`) or a held job's
`proceed` (`proceed`) handed on; an incident's decision claimed and counted
(`replies.counted` while more people must agree), then the waiting remediation task answered
(`_answer_task`: written ahead, SendTaskSuccess, settled), or a pending answer resumed
(`_resume`)."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import NoReturn

from sdc_remediation.lambdas.logic.core.measures import elapsed, report_waiting
from sdc_remediation.lambdas.logic.core.steps import Step, error_details
from sdc_remediation.lambdas.logic.ports import Deps
from sdc_remediation.lambdas.logic.safety import approvers
from sdc_remediation.lambdas.logic.safety.approvers import Count
from sdc_remediation.lambdas.logic.safety.decisions import (
    ValidDecision,
    approval_binding,
    check_accepts_decision,
    check_task_token,
    validate_decision,
)
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.models.approvals import AnswerState, Principal, PrincipalSource
from sdc_remediation.lambdas.models.audit import AuditAction, AuditEntry
from sdc_remediation.lambdas.models.errors import (
    DecisionRefused,
    ExecutionNotFound,
    IdentityRefused,
    TaskNotWaiting,
)
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.payloads import Decision, DecisionAccepted, DecisionRequest
from sdc_remediation.lambdas.models.recovery import DecisionRecord
from sdc_remediation.lambdas.observability import count, logger, seconds
from sdc_remediation.lambdas.wording.card_lines import approvals_line

from .proceed import proceed_held
from .replies import (
    approval_record,
    counted,
    incident_notice,
    printable,
    refusal_subject,
    refuse,
    refuse_unknown,
    waiting,
)
from .reset import reset_hold

S = IncidentState
PROOF_KEPT_SECONDS = 86_400
"""How long a redeemed proof's id is kept: STS refuses a proof 15 minutes after it was signed
at most (`sdc_remediation.lambdas.adapters.identity.PROOF_EXPIRES_SECONDS`), so a day outlives every proof."""


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
        refuse(step, refusal_subject(step, request), actor, request, refused)
    principal = _principal(step, bound, valid, actor)
    if principal.verified:
        actor = f"approver:{principal.arn}"
    if valid.decision is Decision.RESET:
        return reset_hold(step, valid, principal, actor, request)
    if valid.decision is Decision.PROCEED:
        return proceed_held(step, valid, principal, actor, request)
    incident = deps.incidents.get(valid.incident_id)
    if incident is None:
        if deps.guard.get_hold(valid.incident_id) is not None:
            refuse(
                step,
                valid.incident_id,
                actor,
                request,
                DecisionRefused(
                    f"{valid.incident_id} is a storm hold: only decision 'reset' lifts it"
                ),
            )
        refuse_unknown(step, valid, actor, request)
    logger.set_correlation_id(valid.incident_id)
    held = incident.decision
    if (
        held is not None
        and held.delivery == AnswerState.PENDING
        and held.decision is valid.decision
    ):
        return _resume(step, valid, principal, actor, incident)
    required = deps.settings.approvals_required
    approval = approval_record(step, valid, principal)
    needed = required if valid.decision is not Decision.REJECT else 1
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
        outcome.append(approvers.tally(current.approvals, this, needed))
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
            delivery=AnswerState.PENDING,
        )
        return True

    try:
        decided = step.update(valid.incident_id, claim, incident)
    except DecisionRefused as refused:
        refuse(step, valid.incident_id, actor, request, refused)
    if outcome[-1].count is not Count.DECIDED:
        counted(step, valid, principal, actor, outcome[-1], incident_notice(decided))
        return waiting(step, valid, principal, outcome[-1])
    assert decided.decision is not None
    _write_ahead(step, valid, actor, decided.decision)
    _answer_task(step, valid, tokens[-1], actor, decided, resumed=False)
    return _accepted(step, valid, decided)


def _bound_request(step: Step, request: DecisionRequest, actor: str) -> DecisionRequest:
    """The decision as the approval execution it names carries it (DescribeExecution): that
    execution must be a running execution of this deployment's approval state machine, and
    its input must be this decision. Anything else is refused."""
    deps = step.deps
    arn = request.approval_execution_arn
    machine = deps.settings.approval_state_machine_arn

    def refuse_because(reason: str) -> NoReturn:
        refuse(step, refusal_subject(step, request), actor, request, DecisionRefused(reason))

    if not machine:
        refuse_because(
            "this deployment names no approval state machine (APPROVAL_STATE_MACHINE_ARN): a "
            "decision cannot be bound to an approval"
        )
    if not arn:
        refuse_because("the decision names no approval execution")
    try:
        execution = deps.workflow.describe_execution(arn)
    except ExecutionNotFound as err:
        refuse_because(f"{arn!r} is not an approval execution of this deployment: {err}")
    if execution.state_machine_arn != machine:
        refuse_because(
            f"execution {arn} belongs to {execution.state_machine_arn}, not to this "
            f"deployment's approval state machine {machine}"
        )
    if execution.status != "RUNNING":
        refuse_because(
            f"approval execution {arn} is {execution.status}: a decision is taken only from "
            "the approval execution while it runs"
        )
    given = execution.input if isinstance(execution.input, dict) else {}
    for key in ("incident_id", "decision", "comment"):
        if given.get(key) != getattr(request, key):
            refuse_because(
                f"the decision's {key} ({printable(getattr(request, key))!r}) is not the one "
                f"approval execution {arn} was started with ({printable(given.get(key))!r})"
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

    def refuse_because(reason: str) -> NoReturn:
        refuse(step, refusal_subject(step, bound), actor, bound, DecisionRefused(reason))

    if bound.identity_proof is None:
        if settings.needs_identity_proof:
            refuse_because(
                "this deployment needs to know who decides (REQUIRE_IDENTITY_PROOF, APPROVERS "
                "or APPROVALS_REQUIRED > 1) and the approval carries no identity proof: decide "
                "with `sdc approve|reboot|reject|reset`, which signs one; a console approval "
                "cannot prove who started it"
            )
        return Principal(PrincipalSource.EXECUTION_ONLY)
    if not isinstance(bound.identity_proof, str):
        refuse_because("identity_proof must be a string (the token `sdc` signs)")
    assert settings.approval_state_machine_arn is not None  # checked by _bound_request
    binding = approval_binding(
        settings.approval_state_machine_arn, valid.incident_id, valid.decision
    )
    try:
        principal = deps.identity.redeem(bound.identity_proof, binding)
    except IdentityRefused as err:
        refuse_because(f"the identity proof was refused: {err}")
    if not principal.proof_id:
        refuse_because("the identity proof has no id to redeem it once by")
    expires = int(deps.clock.now().timestamp()) + PROOF_KEPT_SECONDS
    first = deps.incidents.redeem_proof(principal.proof_id, valid.approval_execution_arn, expires)
    if first is not None:
        refuse_because(
            f"the identity proof was already redeemed by approval execution {first}: a proof "
            "is good for one approval; run the sdc command again, which signs a new one"
        )
    why_not = approvers.refusal(principal, settings)
    if why_not:
        refuse_because(why_not)
    human = approvers.human_of(principal, settings.human_session_roles)
    if human is None and settings.approvals_required > 1 and valid.decision is not Decision.REJECT:
        refuse_because(
            f"{principal.arn} names no human, and this deployment needs "
            f"{settings.approvals_required} distinct people to agree (APPROVALS_REQUIRED): "
            "decide as an IAM Identity Center user, an IAM user, or in a session of a role "
            "listed in HUMAN_SESSION_ROLES (sdc:humanSessionRoles), whose session name is the "
            "person's"
        )
    return dataclasses.replace(principal, human=human)


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
            "delivery": AnswerState.PENDING,
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
                "delivery": AnswerState.DELIVERED,
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
            refuse(step, valid.incident_id, actor, asked, refused)
        _answer_task(step, valid, token, actor, incident, resumed=True)
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
        if found.decision is None or found.decision.delivery != AnswerState.PENDING:
            return False
        found.decision = dataclasses.replace(found.decision, delivery=AnswerState.DELIVERED)
        return True

    return step.update(incident_id, delivered, current)


def _answer_task(
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
                delivery=AnswerState.PENDING,
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
            "delivery": AnswerState.DELIVERED,
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
