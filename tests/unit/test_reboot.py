"""The reboot tier: an approver's `reboot` decision, BatchRebootClusterNodes and its per-node
codes, the wait until the node is Running again, the health check after it, and closing as
rebooted or asking again."""

from __future__ import annotations

import json
import re

import pytest

from sdc_remediation.lambdas.logic import approval, closing, health_check, recovery
from sdc_remediation.lambdas.models.errors import (
    DecisionRefused,
    InvalidTransition,
    RebootNotApproved,
    RebootRejected,
)
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.payloads import (
    CloseRequest,
    IncidentRef,
    Outcome,
)
from tests.unit.world import CLUSTER, INSTANCE, World, settings

S = IncidentState
REBOOT = "BatchRebootClusterNodes"


def ref(incident_id: str) -> IncidentRef:
    return IncidentRef(incident_id)


def rebooting(world: World) -> str:
    incident_id = world.decided("reboot")
    assert recovery.reboot_node(ref(incident_id), world.deps) == {"status": "requested"}
    return incident_id


def wait_until_back(world: World, incident_id: str, *, limit: int = 10) -> dict:
    for _ in range(limit):
        status = recovery.check_reboot(ref(incident_id), world.deps)
        if status["done"] or status["gone"]:
            return status
    raise AssertionError(f"the reboot of {incident_id} did not end in {limit} polls")


def check_again(world: World, incident_id: str) -> dict:
    health_check.start_health_check(ref(incident_id), world.deps)
    while (result := health_check.check_health(ref(incident_id), world.deps))["in_progress"]:
        pass
    return result


# -- the decision ------------------------------------------------------------------------------


def test_a_reboot_decision_is_accepted_and_handed_to_the_waiting_task(world):
    incident_id = world.decided("reboot")

    assert world.workflow.answers[-1][1]["decision"] == "reboot"
    assert world.incident(incident_id).decision.decision == "reboot"


def test_reboot_node_refuses_an_incident_without_a_reboot_decision(world):
    incident_id = world.decided("approve")

    with pytest.raises(RebootNotApproved):
        recovery.reboot_node(ref(incident_id), world.deps)

    assert world.hyperpod.calls_to(REBOOT) == []


# -- the request -------------------------------------------------------------------------------


def test_the_reboot_is_requested_for_the_instance_and_the_incident_is_rebooting(world):
    incident_id = rebooting(world)

    assert world.hyperpod.calls_to(REBOOT) == [{"ClusterName": CLUSTER, "NodeIds": [INSTANCE]}]
    incident = world.incident(incident_id)
    assert incident.state is S.REBOOTING
    assert incident.reboot.requested_by_us is True
    assert incident.reboot.path == "api"
    assert incident.reboot.decision.decision == "reboot"
    assert world.audit.actions(incident_id)[-1] == "reboot_requested"


@pytest.mark.parametrize(
    ("code", "status", "action"),
    [
        ("InstanceIdInUse", "in_progress", "reboot_in_progress"),
        ("InvalidInstanceStatus", "retry", "reboot_retry"),
        ("InternalServerError", "retry", "reboot_retry"),
        ("InstanceIdNotFound", "gone", "node_gone"),
    ],
)
def test_each_failed_code_of_the_reboot_is_read_as_for_the_replacement(world, code, status, action):
    incident_id = world.decided("reboot")
    world.hyperpod.inject_batch_failure(REBOOT, INSTANCE, code)

    result = recovery.reboot_node(ref(incident_id), world.deps)

    assert result == {"status": status}
    entry = world.audit.entries(incident_id)[-1]
    assert entry.action == action
    assert entry.details["code"] == code


def test_a_retried_reboot_after_a_retry_code_is_sent_again_and_then_requested(world):
    incident_id = world.decided("reboot")
    world.hyperpod.inject_batch_failure(REBOOT, INSTANCE, "InvalidInstanceStatus")

    first = recovery.reboot_node(ref(incident_id), world.deps)
    second = recovery.reboot_node(ref(incident_id), world.deps)

    assert (first, second) == ({"status": "retry"}, {"status": "requested"})
    assert len(world.hyperpod.calls_to(REBOOT)) == 2
    assert world.incident(incident_id).reboot.attempts == 2


def test_a_node_that_is_gone_before_the_reboot_is_not_rebooted(world):
    incident_id = world.decided("reboot")
    del world.hyperpod.clusters[CLUSTER].nodes[INSTANCE]

    assert recovery.reboot_node(ref(incident_id), world.deps) == {"status": "gone"}
    assert world.hyperpod.calls_to(REBOOT) == []


def test_a_dry_run_reboot_calls_nothing_and_is_recorded_as_would_reboot():
    world = World(settings=settings(dry_run=True))
    incident_id = world.decided("reboot")

    assert recovery.reboot_node(ref(incident_id), world.deps) == {"status": "dry_run"}
    assert world.hyperpod.calls_to(REBOOT) == []
    assert "reboot_would_reboot" in world.audit.actions(incident_id)
    assert wait_until_back(world, incident_id)["done"] is True


def test_a_paused_pipeline_holds_the_reboot_before_anything_is_called(world):
    incident_id = world.decided("reboot")
    world.switch.value = "true"

    assert recovery.reboot_node(ref(incident_id), world.deps) == {"status": "held"}
    assert world.hyperpod.calls_to(REBOOT) == []
    assert world.incident(incident_id).hold.kind == "paused"


# -- the wait ----------------------------------------------------------------------------------


def test_the_reboot_is_done_once_the_node_is_running_again(world):
    incident_id = rebooting(world)

    status = wait_until_back(world, incident_id)

    assert status == {"done": True, "gone": False, "status": "Running"}
    incident = world.incident(incident_id)
    assert incident.reboot.status == "done"
    assert incident.reboot.seen_down is True
    assert "reboot_done" in world.audit.actions(incident_id)


def test_a_node_that_stays_running_counts_as_rebooted_only_after_two_polls(world):
    incident_id = world.decided("reboot")
    world.hyperpod.reboot_polls = 0
    recovery.reboot_node(ref(incident_id), world.deps)
    world.hyperpod.advance()  # the reboot is over before the first poll sees it

    first = recovery.check_reboot(ref(incident_id), world.deps)
    second = recovery.check_reboot(ref(incident_id), world.deps)

    assert (first["done"], second["done"]) == (False, True)


def test_a_node_that_never_comes_back_stays_not_done(world):
    incident_id = world.decided("reboot")
    world.hyperpod.set_reboot_returns(CLUSTER, INSTANCE, returns=False)
    recovery.reboot_node(ref(incident_id), world.deps)

    results = [recovery.check_reboot(ref(incident_id), world.deps) for _ in range(5)]

    assert {(r["done"], r["gone"], r["status"]) for r in results} == {(False, False, "Pending")}
    assert world.incident(incident_id).state is S.REBOOTING


def test_a_node_that_disappears_during_the_reboot_is_reported_gone(world):
    incident_id = rebooting(world)
    del world.hyperpod.clusters[CLUSTER].nodes[INSTANCE]

    assert recovery.check_reboot(ref(incident_id), world.deps)["gone"] is True
    assert "reboot_node_gone" in world.audit.actions(incident_id)


def test_check_reboot_refuses_an_incident_that_is_not_rebooting(world):
    incident_id = world.decided("approve")

    with pytest.raises(InvalidTransition):
        recovery.check_reboot(ref(incident_id), world.deps)


# -- after the reboot --------------------------------------------------------------------------


def test_a_passing_check_after_the_reboot_closes_the_incident_as_rebooted(world):
    incident_id = rebooting(world)
    wait_until_back(world, incident_id)

    result = check_again(world, incident_id)
    closed = closing.close_incident(CloseRequest(incident_id, Outcome.REBOOTED, None), world.deps)

    assert result["passed_after_reboot"] is True
    assert closed == {"incident_id": incident_id, "state": "rebooted"}
    incident = world.incident(incident_id)
    assert incident.health_check.after_reboot is True
    assert incident.health_check.before_reboot.result == "passed"
    assert world.hyperpod.calls_to("BatchReplaceClusterNodes") == []
    notice = world.notifier.published[-1]
    assert "closed as rebooted" in notice.message
    assert "Reboot: done (through api)" in notice.message


def test_closing_as_rebooted_without_a_passed_check_after_the_reboot_fails(world):
    incident_id = rebooting(world)

    closed = closing.close_incident(CloseRequest(incident_id, Outcome.REBOOTED, None), world.deps)

    assert closed["state"] == "failed"
    assert "rebooted" in world.incident(incident_id).error.details["close_mismatch"]


def test_the_health_check_cannot_run_again_before_the_reboot_is_done(world):
    incident_id = rebooting(world)

    with pytest.raises(InvalidTransition, match="reboot is not done"):
        health_check.start_health_check(ref(incident_id), world.deps)


def test_a_failing_check_after_the_reboot_asks_for_a_second_decision_on_a_new_card(world):
    incident_id = rebooting(world)
    wait_until_back(world, incident_id)
    world.hyperpod.set_health_check_result(CLUSTER, INSTANCE, passes=False)

    result = check_again(world, incident_id)
    world.approval_requested(incident_id)

    assert result["passed_after_reboot"] is False
    incident = world.incident(incident_id)
    assert incident.state is S.AWAITING_APPROVAL
    assert incident.decision is None
    assert incident.reboot.decision.decision == "reboot"
    card = world.notifier.published[-1].message
    assert "after the reboot: InstanceStress, InstanceConnectivity: FAILED" in card
    assert "before the reboot: InstanceStress, InstanceConnectivity: PASSED" in card
    assert "RECOMMENDATION: REPLACE AFTER REVIEW" in card
    assert "the deep health check failed again after the reboot" in card
    assert "A reboot is no longer offered" in card
    pasted = [json.loads(m) for m in re.findall(r"^\s+(\{.*\})$", card, flags=re.MULTILINE)]
    assert [p["decision"] for p in pasted] == ["approve", "reject"]
    assert world.hyperpod.calls_to("BatchReplaceClusterNodes") == []


def test_a_second_reboot_of_the_same_incident_is_refused(world):
    incident_id = rebooting(world)
    wait_until_back(world, incident_id)
    world.hyperpod.set_health_check_result(CLUSTER, INSTANCE, passes=False)
    check_again(world, incident_id)
    world.approval_requested(incident_id)

    with pytest.raises(DecisionRefused, match="already rebooted"):
        approval.decide(world.decision(incident_id, "reboot"), world.deps)

    approval.decide(world.decision(incident_id, "approve"), world.deps)
    assert world.incident(incident_id).decision.decision == "approve"


def test_the_first_card_offers_a_reboot(world):
    world.awaiting_approval()

    card = world.notifier.published[-1].message

    assert "To reboot the node (same instance and volumes" in card
    assert '"decision": "reboot"' in card


def test_a_reboot_the_api_refuses_for_another_reason_fails_the_step_visibly(world):
    incident_id = world.decided("reboot")
    world.hyperpod._batch_failures[(REBOOT, INSTANCE)] = [("SomethingNew", "new code")]

    with pytest.raises(RebootRejected, match="SomethingNew"):
        recovery.reboot_node(ref(incident_id), world.deps)

    assert world.incident(incident_id).state is S.FAILED
