"""Reconciliation settles what nothing else will: a node kept by a failure close, a close that
never finished, an execution that ended under an open incident, an undelivered card, a guard
slot nobody holds; what it cannot settle is audited and counted for a person."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from sdc_remediation.lambdas.logic import approval, closing, recovery
from sdc_remediation.lambdas.logic.closing import (
    EXECUTION_START_GRACE_SECONDS,
    RECOVERY_PATIENCE_SECONDS,
    reconcile,
)
from sdc_remediation.lambdas.logic.core.steps import Step
from sdc_remediation.lambdas.metric_names import PipelineMetric
from sdc_remediation.lambdas.models.errors import ServiceUnavailable, Throttled
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.payloads import CloseRequest, IncidentRef, Outcome
from sdc_remediation.lambdas.observability import metrics
from tests.unit.test_recovery_in_flight import (
    close_failed,
    eks_world,
    killed_reboot,
)
from tests.unit.world import CLUSTER, EKS, INSTANCE, NODE, World

S = IncidentState


def counted(metric: PipelineMetric) -> float:
    return sum(metrics.provider.metric_set.get(metric, {}).get("Value", []))


def kept_by_a_failure_close(world: World) -> str:
    incident_id = world.decided("reboot", isolated=True)
    killed_reboot(world, incident_id, before=False)
    close_failed(world, incident_id)
    return incident_id


def cordoned(world: World) -> bool:
    return world.kube.node(EKS, NODE)["unschedulable"] is True


def reconcile_until_settled(world: World, runs: int = 10) -> list[dict]:
    results = []
    for _ in range(runs):
        results.append(reconcile(world.deps))
        if results[-1]["settled"] or results[-1]["needs_person"]:
            break
    return results


def test_a_node_kept_for_a_reboot_is_released_only_after_the_health_check_after_it_passed():
    world = eks_world()
    incident_id = kept_by_a_failure_close(world)
    world.hyperpod.advance(5)  # the reboot ends: the node is Running again

    results = reconcile_until_settled(world)

    assert [s["incident_id"] for s in results[-1]["settled"]] == [incident_id]
    assert all(r["settled"] == [] for r in results[:-1]) and len(results) > 2
    assert len(world.hyperpod.calls_to("StartClusterHealthCheck")) == 2  # before and after
    node = world.kube.node(EKS, NODE)
    assert node["unschedulable"] is False and node["taints"] == []
    assert world.store.open_incident_id(CLUSTER, INSTANCE) is None
    assert world.store.guard_state(CLUSTER).open_ids == ()
    incident = world.incident(incident_id)
    assert incident.reconciled_at is not None
    assert incident.health_check.after_reboot and incident.health_check.result == "passed"
    actions = world.audit.actions(incident_id)
    started = [i for i, a in enumerate(actions) if a == "health_check_started"]
    assert actions.index("reboot_done") < started[-1] < actions.index("reconciled")
    assert actions[-1] == "reconciled"


def test_a_reconcile_run_while_hyperpod_still_reports_the_rebooting_node_running_keeps_it():
    world = eks_world()
    incident_id = kept_by_a_failure_close(world)
    node = world.hyperpod.node(CLUSTER, INSTANCE)
    node.status, node.polls_left = "Running", 99  # the reboot is asked, not begun yet

    result = reconcile(world.deps)

    assert result["settled"] == [] and result["waiting"][0]["incident_id"] == incident_id
    assert cordoned(world) and world.kube.count("uncordon") == 0
    assert world.store.open_incident_id(CLUSTER, INSTANCE) == incident_id
    assert world.hyperpod.calls_to("StartClusterHealthCheck")[1:] == []


def test_a_node_seen_back_from_its_reboot_is_health_checked_and_kept_cordoned_meanwhile():
    world = eks_world()
    incident_id = kept_by_a_failure_close(world)
    reconcile(world.deps)  # the node is seen down (Pending)

    back = reconcile(world.deps)  # Running again: the reboot is done, the check starts

    assert back["waiting"][0]["why"] == "back from its reboot: the health check started"
    assert len(world.hyperpod.calls_to("StartClusterHealthCheck")) == 2
    assert cordoned(world) and world.store.open_incident_id(CLUSTER, INSTANCE) == incident_id
    assert world.incident(incident_id).reboot.done


def test_a_node_that_fails_the_health_check_after_its_reboot_stays_cordoned_for_a_person():
    world = eks_world()
    incident_id = kept_by_a_failure_close(world)
    world.hyperpod.set_health_check_result(CLUSTER, INSTANCE, passes=False)

    results = reconcile_until_settled(world)

    assert results[-1]["needs_person"][0]["incident_id"] == incident_id
    assert "did not pass" in results[-1]["needs_person"][0]["why"]
    assert cordoned(world) and world.kube.count("uncordon") == 0
    assert world.store.open_incident_id(CLUSTER, INSTANCE) == incident_id
    assert world.store.guard_state(CLUSTER).open_ids == (incident_id,)


def test_a_node_kept_for_a_reboot_that_is_still_running_stays_cordoned_and_waits():
    world = eks_world()
    incident_id = kept_by_a_failure_close(world)

    result = reconcile(world.deps)

    assert result["waiting"][0]["incident_id"] == incident_id
    assert world.kube.count("uncordon") == 0
    assert world.store.open_incident_id(CLUSTER, INSTANCE) == incident_id


def test_a_recovery_with_no_outcome_past_its_patience_needs_a_person_audited_once():
    world = eks_world()
    world.hyperpod.set_reboot_returns(CLUSTER, INSTANCE, returns=False)
    incident_id = kept_by_a_failure_close(world)
    world.clock.current += timedelta(seconds=RECOVERY_PATIENCE_SECONDS + 1)

    first = reconcile(world.deps)
    reconcile(world.deps)

    assert first["needs_person"][0]["finding"] == "recovery_unknown"
    assert world.audit.actions(incident_id).count("reconcile_needs_person") == 1
    assert counted(PipelineMetric.RECONCILE_NEEDS_PERSON) == 2
    assert world.kube.count("uncordon") == 0


def test_a_node_gone_after_the_close_kept_it_gives_back_its_lock_and_slot():
    world = eks_world()
    kept_by_a_failure_close(world)
    del world.hyperpod.clusters[CLUSTER].nodes[INSTANCE]

    result = reconcile(world.deps)

    assert result["settled"][0]["finding"] == "recovery_unknown"
    assert world.store.open_incident_id(CLUSTER, INSTANCE) is None
    assert world.store.guard_state(CLUSTER).open_ids == ()


def test_an_incident_marked_failed_whose_close_never_ran_is_closed_and_its_node_released():
    world = eks_world()
    incident_id = world.decided("reject", isolated=True)
    step = Step(world.deps, "check_health")
    step.fail(incident_id, RuntimeError("the close never ran"))
    world.workflow.ended[incident_id] = "FAILED"

    result = reconcile(world.deps)

    assert result["settled"][0]["finding"] == "close_failed"
    incident = world.incident(incident_id)
    assert incident.closed_at is not None
    assert world.kube.node(EKS, NODE)["unschedulable"] is False
    assert world.store.open_incident_id(CLUSTER, INSTANCE) is None


def test_an_open_incident_whose_execution_ended_is_closed_as_failed_with_the_reason():
    world = World()
    incident_id = world.health_checked()
    world.workflow.ended[incident_id] = "ABORTED"

    result = reconcile(world.deps)

    assert result["settled"][0]["finding"] == "execution_ended"
    incident = world.incident(incident_id)
    assert incident.state is S.FAILED
    assert "ABORTED" in incident.error.details["Cause"]
    assert world.store.guard_state(CLUSTER).open_ids == ()


def test_an_undelivered_card_goes_out_on_the_first_run_after_the_topic_is_back():
    world = World()
    world.notifier.outage = ServiceUnavailable("Publish failed: could not connect")
    incident_id = world.awaiting_approval()
    during = reconcile(world.deps)
    world.notifier.outage = None

    after = reconcile(world.deps)

    assert during["needs_person"][0]["finding"] == "card_undelivered"
    assert after["settled"][0]["finding"] == "card_undelivered"
    assert world.incident(incident_id).card_undelivered is None
    assert [p.attributes["kind"] for p in world.notifier.published] == ["approval_request"]


def test_a_guard_slot_of_a_closed_incident_is_given_back():
    world = World()
    incident_id = world.health_checked()
    incident = world.incident(incident_id)
    world.store.save(
        dataclasses.replace(
            incident, state=S.REJECTED, closed_at=incident.updated_at, version=incident.version
        )
    )  # closed, but the close died before it released anything

    result = reconcile(world.deps)

    assert result["settled"][0]["finding"] == "orphan_slot"
    assert world.store.guard_state(CLUSTER).open_ids == ()
    assert world.store.open_incident_id(CLUSTER, INSTANCE) is None


def test_nothing_stuck_means_nothing_done():
    world = World()
    world.awaiting_approval()

    result = reconcile(world.deps)

    assert result == {"settled": [], "waiting": [], "needs_person": [], "unfinished": False}


@pytest.mark.parametrize("left", [0.0, 89.0])
def test_a_run_short_of_time_stops_before_the_next_incident_and_says_so(left):
    world = World()
    incident_id = world.health_checked()
    world.workflow.ended[incident_id] = "ABORTED"

    result = reconcile(world.deps, lambda: left)

    assert result["unfinished"] is True and result["settled"] == []
    assert world.incident(incident_id).state is S.HEALTH_CHECK


def test_the_reboot_step_after_a_kept_close_is_not_run_again():
    world = eks_world()
    incident_id = kept_by_a_failure_close(world)
    world.hyperpod.advance(5)
    reconcile(world.deps)

    with pytest.raises(Exception, match="cannot reboot"):
        recovery.reboot_node(IncidentRef(incident_id), world.deps)
    assert len(world.hyperpod.calls_to("BatchRebootClusterNodes")) == 1


def test_an_incident_the_lagging_index_still_lists_as_open_is_left_alone_once_closed():
    world = World()
    incident_id = world.awaiting_approval()
    stale = world.incident(incident_id)  # what the index still says
    approval.decide(world.decision(incident_id, "reject"), world.deps)
    closing.close_incident(CloseRequest(incident_id, Outcome.REJECTED, None), world.deps)
    world.workflow.ended[incident_id] = "SUCCEEDED"
    listed = world.store.in_state
    world.store.in_state = lambda state: [stale] if state is S.AWAITING_APPROVAL else listed(state)

    result = reconcile(world.deps)

    assert result == {"settled": [], "waiting": [], "needs_person": [], "unfinished": False}
    assert "reconciled" not in world.audit.actions(incident_id)


def opened_without_execution(world: World) -> str:
    world.workflow.fail_next_start = Throttled("sfn throttled", request_id="sfn-x")
    with pytest.raises(Throttled):
        world.opened()
    return next(iter(world.store.incidents))


def test_an_incident_whose_execution_never_started_is_left_to_its_opening_within_the_grace():
    world = World()
    incident_id = opened_without_execution(world)

    result = reconcile(world.deps)

    assert result == {"settled": [], "waiting": [], "needs_person": [], "unfinished": False}
    assert world.workflow.executions == {}
    assert world.store.open_incident_id(CLUSTER, INSTANCE) == incident_id


def test_an_incident_whose_execution_never_started_has_it_started_after_the_grace():
    world = World()
    incident_id = opened_without_execution(world)
    world.clock.current += timedelta(seconds=EXECUTION_START_GRACE_SECONDS + 1)

    result = reconcile(world.deps)

    assert result["settled"][0]["finding"] == "execution_never_started"
    assert list(world.workflow.executions) == [incident_id]
    assert world.incident(incident_id).execution_arn is not None
    assert world.audit.actions(incident_id)[-2:] == ["execution_started", "reconciled"]


def test_an_incident_whose_execution_cannot_start_is_closed_and_gives_back_lock_and_slot():
    world = World()
    incident_id = opened_without_execution(world)
    world.clock.current += timedelta(seconds=EXECUTION_START_GRACE_SECONDS + 1)
    world.workflow.fail_next_start = Throttled("sfn throttled", request_id="sfn-y")

    result = reconcile(world.deps)

    assert result["settled"][0]["finding"] == "execution_never_started"
    incident = world.incident(incident_id)
    assert incident.state is S.FAILED and incident.error.details["Error"] == "ExecutionNeverStarted"
    assert world.store.open_incident_id(CLUSTER, INSTANCE) is None
    assert world.store.guard_state(CLUSTER).open_ids == ()
    assert {"execution_start_failed", "incident_closed", "reconciled"} <= set(
        world.audit.actions(incident_id)
    )
