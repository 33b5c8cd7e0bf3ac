"""The reboot tier end to end on moto: the synthesized state machine, the real handlers, the fake
HyperPod. What happens when the reboot is refused for a while, when the node never comes back,
and when the health check after the reboot fails (a second card, a second decision)."""

from __future__ import annotations

import pytest

from sdc_remediation.infra.local.run import CLUSTER, LocalRun, default_cluster
from tests.e2e.kills import Kill, killing
from tests.e2e.test_pipeline_on_moto import CULPRIT_INSTANCE, in_order, open_from_fixture, trail

pytestmark = [pytest.mark.slow, pytest.mark.synth]

REBOOT = "BatchRebootClusterNodes"
REPLACE = "BatchReplaceClusterNodes"


def rebooted_on_decision(run: LocalRun) -> str:
    """Open an incident from the documented alarm, wait for its card and decide reboot."""
    incident_id = open_from_fixture(run)
    run.wait_for(incident_id, "awaiting_approval")
    run.wait_for_notification("approve")
    decision = run.decide(incident_id, "reboot", "transient verdict: try a reboot first")
    assert decision["status"] == "SUCCEEDED", decision
    return incident_id


def test_a_reboot_refused_once_with_invalid_instance_status_is_retried_and_completes():
    hyperpod = default_cluster()
    hyperpod.inject_batch_failure(REBOOT, CULPRIT_INSTANCE, "InvalidInstanceStatus")
    with LocalRun.open(hyperpod=hyperpod) as run:
        incident_id = rebooted_on_decision(run)

        incident = run.wait_for(incident_id, "rebooted", timeout=90)

        assert len(run.hyperpod.calls_to(REBOOT)) == 2
        assert run.hyperpod.calls_to(REPLACE) == []
        assert incident.reboot.attempts == 2
        assert in_order(
            trail(run, incident_id),
            [
                ("approver", "decision_accepted"),
                ("reboot_node", "reboot_retry"),
                ("reboot_node", "reboot_requested"),
                ("check_reboot", "reboot_done"),
                ("start_health_check", "health_check_started"),
                ("close_incident", "incident_closed"),
            ],
        )


def test_a_node_that_never_comes_back_fails_the_incident_visibly_and_stays_cordoned():
    hyperpod = default_cluster()
    with LocalRun.open(hyperpod=hyperpod) as run:
        hyperpod.set_reboot_returns(CLUSTER, CULPRIT_INSTANCE, returns=False)
        incident_id = rebooted_on_decision(run)

        incident = run.wait_for(incident_id, "failed", timeout=90)

        assert incident.error.details["Error"] == "RebootTimedOut"
        assert run.execution(incident_id)["status"] == "FAILED"
        assert len(run.hyperpod.calls_to(REBOOT)) == 1
        assert run.hyperpod.calls_to(REPLACE) == []
        actions = [action for _, action in trail(run, incident_id)]
        assert actions.count("reboot_done") == 0
        # the reboot may still be running: the node stays cordoned for reconciliation
        assert actions[-3:] == ["recovery_unknown", "incident_closed", "closed_notified"]
        assert "node_released" not in actions
        assert incident.recovery_unknown is not None
        notice = run.wait_for_notification("closed: failed")
        assert "RebootTimedOut" in notice["message"]
        assert "Node kept" in notice["message"]


def test_a_health_check_that_fails_after_the_reboot_asks_again_and_only_then_replaces():
    hyperpod = default_cluster()
    with LocalRun.open(hyperpod=hyperpod) as run:
        incident_id = rebooted_on_decision(run)
        hyperpod.set_health_check_result(CLUSTER, CULPRIT_INSTANCE, passes=False)

        second = run.wait_for_notification("approve replacing", timeout=60)
        waiting = run.wait_for(incident_id, "awaiting_approval")
        assert run.hyperpod.calls_to(REPLACE) == []
        refused = run.decide(incident_id, "reboot", "again?")
        approved = run.decide(incident_id, "approve", "failed its check after the reboot")
        incident = run.wait_for(incident_id, "replaced", timeout=90)

        assert "the deep health check failed again after the reboot" in second["message"]
        assert "A reboot is no longer offered" in second["message"]
        assert waiting.decision is None and waiting.reboot.decision.decision == "reboot"
        assert refused["status"] == "FAILED"
        assert approved["status"] == "SUCCEEDED"
        assert run.hyperpod.calls_to(REPLACE) == [
            {"ClusterName": CLUSTER, "NodeIds": [CULPRIT_INSTANCE]}
        ]
        assert incident.replacement.new_instance_id != CULPRIT_INSTANCE
        assert in_order(
            trail(run, incident_id),
            [
                ("request_approval", "approval_requested"),
                ("approver", "decision_accepted"),
                ("reboot_node", "reboot_requested"),
                ("check_reboot", "reboot_done"),
                ("start_health_check", "health_check_started"),
                ("check_health", "health_check_status"),
                ("request_approval", "approval_requested"),
                ("approver", "decision_refused"),
                ("approver", "decision_accepted"),
                ("replace_node", "replacement_requested"),
                ("close_incident", "incident_closed"),
            ],
        )


def test_a_reboot_killed_right_after_its_request_keeps_the_node_cordoned_and_ends_rebooted():
    with (
        LocalRun.open() as run,
        killing(Kill("reboot_node", "hyperpod", "reboot_nodes", "timeout")) as kill,
    ):
        incident_id = rebooted_on_decision(run)

        incident = run.wait_for(incident_id, "rebooted", timeout=90)

        assert kill.fired == ["timed out in the call"]
        assert len(run.hyperpod.calls_to(REBOOT)) == 1
        assert incident.reboot.requested_by_us and incident.reboot.done
        steps = trail(run, incident_id)
        actions = [action for _, action in steps]
        assert actions.count("reboot_requested") == 1
        # released once, and only after the node was back and had passed its check again
        assert actions.count("node_released") == 1
        assert in_order(
            steps,
            [
                ("reboot_node", "reboot_requested"),
                ("check_reboot", "reboot_done"),
                ("start_health_check", "health_check_started"),
                ("close_incident", "node_released"),
                ("close_incident", "incident_closed"),
            ],
        )
        assert "recovery_unknown" not in actions
