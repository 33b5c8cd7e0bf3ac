"""Who decided is proven: a decision is bound to a real approval execution, its principal is
established by a redeemed identity proof, two people can be required, and the decision is
written ahead of SendTaskSuccess and settled after."""

from __future__ import annotations

import dataclasses

import pytest

from sdc_remediation.lambdas.logic import approval
from sdc_remediation.lambdas.logic.core import ids
from sdc_remediation.lambdas.models.errors import DecisionRefused, ServiceUnavailable, Throttled
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.payloads import DecisionRequest
from sdc_remediation.lambdas.wording.card_lines import approvals_line
from tests.unit.world import ALICE, APPROVAL_ARN, APPROVAL_EXECUTION, APPROVER_ROLE, BOB, World

S = IncidentState
OTHER_MACHINE = "arn:aws:states:us-west-2:111122223333:stateMachine:someone-elses"


def two_person(world: World, **changes) -> None:
    world.settings = dataclasses.replace(world.settings, approvals_required=2, **changes)


# -- bound to a real approval ---------------------------------------------------------------------


def test_a_decide_invoked_with_a_made_up_execution_is_refused_audited_and_sends_nothing(world):
    incident_id = world.awaiting_approval()

    with pytest.raises(DecisionRefused, match="not an approval execution"):
        approval.decide(DecisionRequest(incident_id, "approve", "x", "x"), world.deps)

    assert world.workflow.answers == []
    assert world.incident(incident_id).decision is None
    assert world.audit.actions(incident_id)[-1] == "decision_refused"


def test_a_decide_naming_an_execution_of_another_state_machine_is_refused(world):
    incident_id = world.awaiting_approval()
    arn = "arn:aws:states:us-west-2:111122223333:execution:someone-elses:e1"
    world.workflow.add_execution(
        arn, OTHER_MACHINE, {"incident_id": incident_id, "decision": "approve", "comment": "x"}
    )

    with pytest.raises(DecisionRefused, match="not to this deployment's approval state machine"):
        approval.decide(DecisionRequest(incident_id, "approve", "x", arn), world.deps)

    assert world.workflow.answers == []
    assert world.audit.actions(incident_id)[-1] == "decision_refused"


def test_a_decide_naming_a_real_approval_of_another_incident_is_refused(world):
    incident_id = world.awaiting_approval()
    world.workflow.add_execution(
        APPROVAL_EXECUTION,
        APPROVAL_ARN,
        {"incident_id": "sdc-another-incident", "decision": "approve", "comment": "x"},
    )

    with pytest.raises(DecisionRefused, match=r"incident_id .* is not the one"):
        approval.decide(
            DecisionRequest(incident_id, "approve", "x", APPROVAL_EXECUTION), world.deps
        )

    assert world.workflow.answers == []
    assert world.incident(incident_id).decision is None
    assert world.audit.actions(incident_id)[-1] == "decision_refused"


def test_a_decide_naming_an_approval_that_already_ended_is_refused(world):
    incident_id = world.awaiting_approval()
    world.workflow.add_execution(
        APPROVAL_EXECUTION,
        APPROVAL_ARN,
        {"incident_id": incident_id, "decision": "approve", "comment": "x"},
        status="SUCCEEDED",
    )

    with pytest.raises(DecisionRefused, match="is SUCCEEDED"):
        approval.decide(
            DecisionRequest(incident_id, "approve", "x", APPROVAL_EXECUTION), world.deps
        )

    assert world.workflow.answers == []


def test_a_refused_made_up_execution_for_an_unknown_incident_is_audited_under_its_arn(world):
    with pytest.raises(DecisionRefused):
        approval.decide(DecisionRequest("sdc-nope", "approve", "x", "x"), world.deps)

    assert world.audit.actions(ids.decision_subject("x")) == ["decision_refused"]


# -- the principal ----------------------------------------------------------------------------------


def test_an_approval_with_an_identity_proof_records_the_principal_sts_named(world):
    incident_id = world.awaiting_approval()

    approval.decide(world.decision(incident_id, principal=ALICE), world.deps)

    decision = world.incident(incident_id).decision
    assert decision.principal["arn"] == ALICE
    assert decision.principal["session_name"] == "alice"
    accepted = [e for e in world.audit.entries(incident_id) if e.action == "decision_accepted"]
    assert accepted[0].actor == f"approver:{ALICE}"
    assert accepted[0].details["principal"]["verified"] is True


def test_an_approval_without_a_proof_is_recorded_as_unverified(world):
    incident_id = world.awaiting_approval()

    approval.decide(world.decision(incident_id), world.deps)

    assert world.incident(incident_id).decision.principal == {
        "source": "execution_only",
        "arn": None,
        "account": None,
        "user_id": None,
        "proof_id": None,
        "human": None,
        "verified": False,
        "session_name": None,
    }


def test_an_approval_without_a_proof_is_refused_when_proofs_are_required(world):
    incident_id = world.awaiting_approval()
    world.settings = dataclasses.replace(world.settings, require_identity_proof=True)

    with pytest.raises(DecisionRefused, match="carries no identity proof"):
        approval.decide(world.decision(incident_id), world.deps)

    assert world.workflow.answers == []


def test_a_proof_signed_for_another_decision_is_refused(world):
    incident_id = world.awaiting_approval()
    request = world.decision(incident_id, "approve", principal=ALICE)
    proof = world.identity.sign(ALICE, "another binding")
    world.workflow.add_execution(
        APPROVAL_EXECUTION,
        APPROVAL_ARN,
        {
            "incident_id": incident_id,
            "decision": "approve",
            "comment": request.comment,
            "identity_proof": proof,
        },
    )

    with pytest.raises(DecisionRefused, match="identity proof was refused"):
        approval.decide(request, world.deps)

    assert world.workflow.answers == []


def test_a_principal_outside_the_approver_patterns_is_refused(world):
    incident_id = world.awaiting_approval()
    world.settings = dataclasses.replace(
        world.settings, approvers=(f"arn:aws:sts::111122223333:assumed-role/{APPROVER_ROLE}/*",)
    )

    with pytest.raises(DecisionRefused, match="not an allowed approver"):
        approval.decide(world.decision(incident_id, principal=BOB), world.deps)

    assert world.workflow.answers == []
    assert world.audit.actions(incident_id)[-1] == "decision_refused"


# -- two people ---------------------------------------------------------------------------------------


def test_with_two_required_one_approval_leaves_the_incident_waiting_with_one_of_two(world):
    incident_id = world.awaiting_approval()
    two_person(world)

    result = approval.decide(world.decision(incident_id, principal=ALICE), world.deps)

    assert (result["approvals"], result["waiting"]) == ("1 of 2", True)
    incident = world.incident(incident_id)
    assert (incident.state, incident.decision) == (S.AWAITING_APPROVAL, None)
    assert world.workflow.answers == []
    assert approvals_line(incident, 2).startswith(f"1 of 2: approve by {ALICE} at ")
    assert world.audit.actions(incident_id)[-1] == "approval_recorded"


def test_with_two_required_the_same_principal_again_changes_nothing(world):
    incident_id = world.awaiting_approval()
    two_person(world)
    approval.decide(world.decision(incident_id, principal=ALICE), world.deps)
    before = world.incident(incident_id)

    second = world.decision(incident_id, principal=ALICE, execution=f"{APPROVAL_EXECUTION}-2")
    result = approval.decide(second, world.deps)

    assert result["approvals"] == "1 of 2"
    assert world.incident(incident_id).approvals == before.approvals
    assert world.workflow.answers == []


def test_with_two_required_a_second_principal_completes_the_decision(world):
    incident_id = world.awaiting_approval()
    two_person(world)
    approval.decide(world.decision(incident_id, principal=ALICE), world.deps)

    second = world.decision(incident_id, principal=BOB, execution=f"{APPROVAL_EXECUTION}-2")
    result = approval.decide(second, world.deps)

    assert (result["approvals"], result["waiting"]) == ("2 of 2", False)
    decision = world.incident(incident_id).decision
    assert [a["principal"]["arn"] for a in decision.approvals] == [ALICE, BOB]
    assert len(world.workflow.answers) == 1


def test_with_two_required_a_reject_by_one_allowed_approver_ends_it(world):
    incident_id = world.awaiting_approval()
    two_person(world)
    approval.decide(world.decision(incident_id, principal=ALICE), world.deps)

    reject = world.decision(
        incident_id, "reject", principal=BOB, execution=f"{APPROVAL_EXECUTION}-2"
    )
    approval.decide(reject, world.deps)

    assert world.incident(incident_id).decision.decision == "reject"
    assert world.workflow.answers[0][1]["decision"] == "reject"


def test_with_two_required_an_approval_without_a_proof_is_refused(world):
    incident_id = world.awaiting_approval()
    two_person(world)

    with pytest.raises(DecisionRefused, match="no identity proof"):
        approval.decide(world.decision(incident_id), world.deps)


# -- write ahead, act, settle --------------------------------------------------------------------------


def test_the_decision_is_audited_pending_before_it_is_sent_and_settled_after(world):
    incident_id = world.awaiting_approval()

    approval.decide(world.decision(incident_id), world.deps)

    entries = world.audit.entries(incident_id)
    assert [e.action for e in entries][-2:] == ["decision_accepted", "decision_delivered"]
    assert entries[-2].details["delivery"] == "pending"
    assert entries[-1].details["delivery"] == "delivered"
    assert world.incident(incident_id).decision.delivery == "delivered"


def fail_next_append(world: World, action: str, error: Exception) -> None:
    original = world.audit.append

    def append(entry):
        if entry.action == action:
            world.audit.append = original
            raise error
        original(entry)

    world.audit.append = append


def test_a_throttled_write_ahead_sends_nothing_and_its_retry_delivers_once(world):
    incident_id = world.awaiting_approval()
    request = world.decision(incident_id)
    fail_next_append(world, "decision_accepted", Throttled("PutItem throttled"))

    with pytest.raises(Throttled):
        approval.decide(request, world.deps)
    assert world.workflow.answers == []
    approval.decide(request, world.deps)  # the approval state machine's retry

    assert len(world.workflow.answers) == 1
    actions = world.audit.actions(incident_id)
    assert actions[-2:] == ["decision_accepted", "decision_delivered"]
    assert "decision_refused" not in actions


def test_a_lost_send_task_success_answer_is_settled_as_delivered_by_the_retry(world):
    incident_id = world.awaiting_approval()
    request = world.decision(incident_id)
    world.workflow.lose_next_answer = ServiceUnavailable("read timeout")

    with pytest.raises(ServiceUnavailable):
        approval.decide(request, world.deps)
    approval.decide(request, world.deps)  # the approval state machine's retry

    assert len(world.workflow.answers) == 1
    entries = world.audit.entries(incident_id)
    assert [e.action for e in entries][-3:] == [
        "decision_accepted",
        "decision_delivery_unknown",
        "decision_delivered",
    ]
    assert "earlier SendTaskSuccess landed" in entries[-1].details["how"]
    assert world.incident(incident_id).decision.delivery == "delivered"


def test_a_crash_after_sending_is_settled_by_the_retry_without_a_second_answer(world):
    incident_id = world.awaiting_approval()
    request = world.decision(incident_id)
    fail_next_append(world, "decision_delivered", RuntimeError("the function was killed"))

    with pytest.raises(RuntimeError):
        approval.decide(request, world.deps)
    approval.decide(request, world.deps)

    assert len(world.workflow.answers) == 1
    assert world.audit.actions(incident_id)[-2:] == ["decision_accepted", "decision_delivered"]


def test_the_card_says_how_many_approvals_are_needed_and_how_to_sign(world):
    two_person(world)

    world.awaiting_approval()

    card = world.notifier.published[-1].message
    assert "Approvals needed: 2 distinct approvers" in card
    assert "sdc approve|reboot|reject" in card


def test_a_recorded_first_approval_is_announced_with_one_of_two(world):
    incident_id = world.awaiting_approval()
    two_person(world)

    approval.decide(world.decision(incident_id, principal=ALICE), world.deps)

    notice = world.notifier.published[-1]
    assert notice.subject == f"SDC approval 1 of 2: {incident_id}"
    assert f"1 of 2: approve by {ALICE} at " in notice.message


def test_the_card_of_a_single_unsigned_approval_says_nothing_about_signing(world):
    world.awaiting_approval()

    assert "sdc approve|reboot|reject" not in world.notifier.published[-1].message


def test_an_assumed_role_session_matches_an_approver_pattern_on_its_role(world):
    incident_id = world.awaiting_approval()
    world.settings = dataclasses.replace(
        world.settings, approvers=(f"arn:aws:iam::111122223333:role/{APPROVER_ROLE}",)
    )

    result = approval.decide(world.decision(incident_id, principal=ALICE), world.deps)

    assert result["principal"] == ALICE
    assert len(world.workflow.answers) == 1


def test_a_retry_after_the_remediation_acted_settles_without_sending_again(world):
    incident_id = world.awaiting_approval()
    request = world.decision(incident_id)
    world.workflow.lose_next_answer = ServiceUnavailable("read timeout")
    with pytest.raises(ServiceUnavailable):
        approval.decide(request, world.deps)
    world.store.incidents[incident_id].state = S.REPLACING  # the remediation went on

    approval.decide(request, world.deps)

    assert len(world.workflow.answers) == 1
    delivered = world.audit.entries(incident_id)[-1]
    assert delivered.action == "decision_delivered"
    assert "the remediation acted on it (the incident is replacing)" in delivered.details["how"]


def test_a_pending_decision_of_an_incident_closed_meanwhile_is_refused_not_claimed_delivered(
    world,
):
    incident_id = world.awaiting_approval()
    request = world.decision(incident_id)
    world.workflow.fail_next_send = ServiceUnavailable("SendTaskSuccess failed")
    with pytest.raises(ServiceUnavailable):
        approval.decide(request, world.deps)
    world.store.incidents[incident_id].state = S.FAILED  # closed by another path

    with pytest.raises(DecisionRefused, match="closed as failed before its pending approve"):
        approval.decide(request, world.deps)

    assert world.workflow.answers == []
    assert world.audit.actions(incident_id)[-1] == "decision_refused"
