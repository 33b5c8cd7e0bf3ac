"""Two people means two humans: approvals count distinct humans (an IAM user, an IAM Identity
Center user, or the session of a role that names its sessions after the human), approvers are
pinned to the deployment's own account, every state-changing decision takes the configured
count, and an identity proof is redeemed once, at STS only."""

from __future__ import annotations

import dataclasses

import pytest

from sdc_remediation.lambdas.adapters.identity import checked_request, encode_proof
from sdc_remediation.lambdas.logic import approval, recovery
from sdc_remediation.lambdas.logic.safety.decisions import approval_binding
from sdc_remediation.lambdas.models.errors import DecisionRefused, IdentityRefused
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.payloads import (
    DecisionRequest,
    IncidentRef,
)
from tests.unit.test_guard import storm
from tests.unit.test_hostile_reports import held_big_job
from tests.unit.test_reboot import check_again, wait_until_back
from tests.unit.world import (
    APPROVAL_ARN,
    APPROVAL_EXECUTION,
    BOB,
    CLUSTER,
    INSTANCE,
    World,
)

S = IncidentState
HERE = "111122223333"
THERE = "444455556666"
SSO_ROLE = "AWSReservedSSO_SdcApprover_0123456789abcdef"
ALICE_HERE = f"arn:aws:sts::{HERE}:assumed-role/{SSO_ROLE}/alice"
ALICE_THERE = f"arn:aws:sts::{THERE}:assumed-role/AWSReservedSSO_SdcApprover_fedcba98/alice"
ONCALL = f"arn:aws:sts::{HERE}:assumed-role/sdc-approver/oncall-1"
ONCALL_SECOND = f"arn:aws:sts::{HERE}:assumed-role/sdc-approver/oncall-1-second"
OUTSIDER = f"arn:aws:iam::{THERE}:user/mallory"


def two_person(world: World, **changes) -> None:
    world.settings = dataclasses.replace(world.settings, approvals_required=2, **changes)


def second(n: int = 2) -> str:
    return f"{APPROVAL_EXECUTION}-{n}"


# -- distinct humans ------------------------------------------------------------------------------


def test_two_sessions_of_one_role_never_make_two_approvals(world):
    incident_id = world.awaiting_approval()
    two_person(world)

    for execution, session in ((APPROVAL_EXECUTION, ONCALL), (second(), ONCALL_SECOND)):
        with pytest.raises(DecisionRefused, match="names no human"):
            approval.decide(
                world.decision(incident_id, principal=session, execution=execution), world.deps
            )

    assert world.incident(incident_id).approvals == []
    assert world.workflow.answers == []
    assert world.audit.actions(incident_id)[-1] == "decision_refused"


def test_sessions_of_a_role_that_names_them_after_the_human_count_by_that_name(world):
    incident_id = world.awaiting_approval()
    two_person(world, human_session_roles=(f"arn:aws:iam::{HERE}:role/sdc-approver",))
    approval.decide(world.decision(incident_id, principal=ONCALL), world.deps)

    result = approval.decide(
        world.decision(incident_id, principal=ONCALL, execution=second()), world.deps
    )

    assert (result["approvals"], result["waiting"]) == ("1 of 2", True)
    assert world.workflow.answers == []


def test_one_identity_center_user_in_two_accounts_never_makes_two_approvals(world):
    incident_id = world.awaiting_approval()
    two_person(world, approvers=(f"arn:aws:sts::{HERE}:*", f"arn:aws:sts::{THERE}:*"))
    approval.decide(world.decision(incident_id, principal=ALICE_HERE), world.deps)

    result = approval.decide(
        world.decision(incident_id, principal=ALICE_THERE, execution=second()), world.deps
    )

    assert (result["approvals"], result["waiting"]) == ("1 of 2", True)
    assert world.workflow.answers == []
    assert world.audit.actions(incident_id)[-1] == "approval_repeated"


def test_an_identity_center_user_and_an_iam_user_are_two_humans(world):
    incident_id = world.awaiting_approval()
    two_person(world)
    approval.decide(world.decision(incident_id, principal=ALICE_HERE), world.deps)

    result = approval.decide(
        world.decision(incident_id, principal=BOB, execution=second()), world.deps
    )

    assert (result["approvals"], result["waiting"]) == ("2 of 2", False)
    humans = [a["principal"]["human"] for a in world.incident(incident_id).decision.approvals]
    assert humans == ["alice", "bob"]


def test_one_approval_still_accepts_a_session_that_names_no_human(world):
    incident_id = world.awaiting_approval()

    result = approval.decide(world.decision(incident_id, principal=ONCALL), world.deps)

    assert result["accepted"] and len(world.workflow.answers) == 1


# -- pinned to the deployment's account -----------------------------------------------------------


def test_a_principal_of_another_account_is_refused_when_no_approvers_are_listed(world):
    incident_id = world.awaiting_approval()

    with pytest.raises(DecisionRefused, match="another account"):
        approval.decide(world.decision(incident_id, principal=OUTSIDER), world.deps)

    assert world.workflow.answers == []
    assert world.audit.actions(incident_id)[-1] == "decision_refused"


def test_an_approver_pattern_with_any_account_does_not_let_another_account_in(world):
    incident_id = world.awaiting_approval()
    world.settings = dataclasses.replace(world.settings, approvers=("arn:aws:iam::*:user/*",))

    with pytest.raises(DecisionRefused, match="another account"):
        approval.decide(world.decision(incident_id, principal=OUTSIDER), world.deps)


def test_a_principal_of_another_account_listed_by_its_account_is_accepted(world):
    incident_id = world.awaiting_approval()
    world.settings = dataclasses.replace(
        world.settings, approvers=(f"arn:aws:iam::{THERE}:user/mallory",)
    )

    result = approval.decide(world.decision(incident_id, principal=OUTSIDER), world.deps)

    assert result["accepted"] and len(world.workflow.answers) == 1


# -- every state-changing decision takes the count ------------------------------------------------


def test_a_reset_by_one_approver_when_two_are_required_leaves_the_hold(world):
    hold_id = storm(world)
    two_person(world)

    result = approval.decide(world.decision(hold_id, "reset", principal=ALICE_HERE), world.deps)

    assert (result["approvals"], result["waiting"]) == ("1 of 2", True)
    assert world.store.get_hold(hold_id).active
    assert world.audit.entries(hold_id)[-1].action == "approval_recorded"


def test_a_reset_by_a_second_human_lifts_the_hold(world):
    hold_id = storm(world)
    two_person(world)
    approval.decide(world.decision(hold_id, "reset", principal=ALICE_HERE), world.deps)

    result = approval.decide(
        world.decision(hold_id, "reset", principal=BOB, execution=second()), world.deps
    )

    assert result["accepted"] and result["approvals"] == "2 of 2"
    assert not world.store.get_hold(hold_id).active


def test_a_proceed_by_one_approver_when_two_are_required_opens_nothing(world):
    held, _ = held_big_job(world)
    two_person(world)

    result = approval.decide(world.decision(held, "proceed", principal=ALICE_HERE), world.deps)

    assert (result["approvals"], result["waiting"]) == ("1 of 2", True)
    assert not world.workflow.executions
    assert world.audit.entries(held)[-1].action == "approval_recorded"


def test_a_proceed_by_a_second_human_opens_the_job_level_incident(world):
    held, _ = held_big_job(world)
    two_person(world)
    approval.decide(world.decision(held, "proceed", principal=ALICE_HERE), world.deps)

    result = approval.decide(
        world.decision(held, "proceed", principal=BOB, execution=second()), world.deps
    )

    assert result["accepted"] and result["approvals"] == "2 of 2"
    assert len(world.workflow.executions) == 1


def test_a_reset_without_a_proof_when_two_are_required_is_refused(world):
    hold_id = storm(world)
    two_person(world)

    with pytest.raises(DecisionRefused, match="no identity proof"):
        approval.decide(world.decision(hold_id, "reset"), world.deps)

    assert world.store.get_hold(hold_id).active


# -- a proof is redeemed once -------------------------------------------------------------------------


def test_a_proof_redeemed_twice_is_refused_the_second_time(world):
    incident_id = world.awaiting_approval()
    two_person(world)
    binding = approval_binding(APPROVAL_ARN, incident_id, "approve")
    proof = world.identity.sign(ALICE_HERE, binding)
    for execution in (APPROVAL_EXECUTION, second()):
        payload = {"incident_id": incident_id, "decision": "approve", "comment": "ok"}
        world.workflow.add_execution(execution, APPROVAL_ARN, {**payload, "identity_proof": proof})
    approval.decide(DecisionRequest(incident_id, "approve", "ok", APPROVAL_EXECUTION), world.deps)

    with pytest.raises(DecisionRefused, match="already redeemed"):
        approval.decide(DecisionRequest(incident_id, "approve", "ok", second()), world.deps)

    assert world.audit.actions(incident_id)[-1] == "decision_refused"


def test_a_retry_of_the_same_approval_execution_may_redeem_its_proof_again(world):
    incident_id = world.awaiting_approval()
    two_person(world)
    request = world.decision(incident_id, principal=ALICE_HERE)
    approval.decide(request, world.deps)

    result = approval.decide(request, world.deps)

    assert result["approvals"] == "1 of 2"


def test_a_proof_sent_to_a_host_that_is_not_sts_is_refused():
    url = (
        "https://sts.evil.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15"
        "&X-Amz-SignedHeaders=host%3Bx-sdc-approval&X-Amz-Expires=900"
        "&X-Amz-Credential=AKIA%2F20260101%2Fus-east-1%2Fsts%2Faws4_request&X-Amz-Signature=ab"
    )

    with pytest.raises(IdentityRefused, match="not addressed to STS"):
        checked_request(encode_proof(url))


@pytest.mark.parametrize(
    "host",
    [
        "sts.amazonaws.com",
        "sts.us-west-2.amazonaws.com",
        "sts.ap-southeast-5.amazonaws.com",
        "sts.us-gov-west-1.amazonaws.com",
        "sts.cn-north-1.amazonaws.com.cn",
    ],
)
def test_a_proof_sent_to_sts_global_or_a_regional_endpoint_passes_the_host_check(host):
    url = (
        f"https://{host}/?Action=GetCallerIdentity&Version=2011-06-15"
        "&X-Amz-SignedHeaders=host%3Bx-sdc-approval&X-Amz-Expires=900"
        "&X-Amz-Credential=AKIA%2F20260101%2Fus-east-1%2Fsts%2Faws4_request&X-Amz-Signature=ab"
    )

    assert checked_request(encode_proof(url))[0] == url


@pytest.mark.parametrize(
    "host",
    [
        "sts.evil.amazonaws.com",
        "sts.us-evil-1.amazonaws.com",
        "sts.amazonaws.com.cn",
        "sts.us-west-2.amazonaws.com.cn",
        "sts.cn-north-1.amazonaws.com",
    ],
)
def test_a_proof_sent_to_a_made_up_sts_host_is_refused(host):
    url = f"https://{host}/?Action=GetCallerIdentity"

    with pytest.raises(IdentityRefused, match="not addressed to STS"):
        checked_request(encode_proof(url))


def test_an_approval_to_proceed_with_an_incident_that_may_not_is_refused_not_counted(world):
    incident_id = world.awaiting_approval()
    two_person(world)

    with pytest.raises(DecisionRefused, match="only a held job-level incident proceeds"):
        approval.decide(world.decision(incident_id, "proceed", principal=ALICE_HERE), world.deps)

    assert world.incident(incident_id).approvals == []


# -- rounds ------------------------------------------------------------------------------------


def sso(name: str) -> str:
    return f"arn:aws:sts::{HERE}:assumed-role/{SSO_ROLE}/{name}"


def second_round(world: World) -> str:
    """Two approvals required; in round 1 alice approves a replacement (1 of 2) while bob and
    carol agree on a reboot (decided); the health check after the reboot fails and a new card
    asks again (round 2)."""
    incident_id = world.awaiting_approval()
    two_person(world)
    approval.decide(world.decision(incident_id, principal=sso("alice")), world.deps)
    for n, person in ((2, "bob"), (3, "carol")):
        approval.decide(
            world.decision(incident_id, "reboot", principal=sso(person), execution=second(n)),
            world.deps,
        )
    assert world.incident(incident_id).decision.decision == "reboot"
    recovery.reboot_node(IncidentRef(incident_id), world.deps)
    wait_until_back(world, incident_id)
    world.hyperpod.set_health_check_result(CLUSTER, INSTANCE, passes=False)
    check_again(world, incident_id)
    return world.approval_requested(incident_id)


def test_an_approval_counts_only_in_the_round_it_was_given_in(world):
    incident_id = second_round(world)

    result = approval.decide(
        world.decision(incident_id, principal=sso("dave"), execution=second(4)), world.deps
    )

    assert (result["approvals"], result["waiting"]) == ("1 of 2", True)
    assert world.incident(incident_id).decision is None
    assert [output["decision"] for _, output in world.workflow.answers] == ["reboot"]


def test_the_new_card_shows_no_approval_of_the_round_before(world):
    second_round(world)

    card = world.notifier.published[-1].message

    assert "So far: 0 of 2" in card
    assert "alice" not in card


def test_who_approved_in_round_one_may_approve_again_in_round_two(world):
    incident_id = second_round(world)

    result = approval.decide(
        world.decision(incident_id, principal=sso("alice"), execution=second(4)), world.deps
    )

    assert (result["approvals"], result["waiting"]) == ("1 of 2", True)
    assert world.audit.actions(incident_id)[-1] == "approval_recorded"
