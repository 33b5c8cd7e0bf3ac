from __future__ import annotations

import pytest

from sdc_remediation.lambdas.logic import closing, health_check, recovery
from sdc_remediation.lambdas.models.errors import (
    DependencyFailed,
    InvalidTransition,
    ReplacementNotApproved,
    Throttled,
)
from sdc_remediation.lambdas.models.hyperpod import NodeRecovery
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.payloads import CloseRequest, IncidentRef, Outcome
from tests.unit.world import CLUSTER, GROUP, INSTANCE, World, settings

S = IncidentState


def ref(incident_id: str) -> IncidentRef:
    return IncidentRef(incident_id)


def close(world: World, incident_id: str, outcome: Outcome, error=None):
    return closing.close_incident(CloseRequest(incident_id, outcome, error), world.deps)


# -- start health check -------------------------------------------------------------------------


def test_health_check_is_started_for_the_instance_in_its_group_with_the_configured_checks(world):
    incident_id = world.opened()

    health_check.start_health_check(ref(incident_id), world.deps)

    assert world.hyperpod.calls_to("StartClusterHealthCheck") == [
        {
            "ClusterName": CLUSTER,
            "DeepHealthCheckConfigurations": [
                {
                    "InstanceGroupName": GROUP,
                    "InstanceIds": [INSTANCE],
                    "DeepHealthChecks": ["InstanceStress", "InstanceConnectivity"],
                }
            ],
        }
    ]


def test_starting_records_the_status_the_node_reports_afterwards(world):
    incident_id = world.opened()

    result = health_check.start_health_check(ref(incident_id), world.deps)

    assert result == {
        "status": "DeepHealthCheckInProgress",
        "started": True,
        "held": False,
        "scope": "node",
    }
    incident = world.incident(incident_id)
    assert incident.state is S.HEALTH_CHECK
    assert incident.health_check.status == "DeepHealthCheckInProgress"
    assert world.audit.actions(incident_id)[-1] == "health_check_started"


def test_a_node_that_is_not_running_gets_no_health_check_and_says_why(world):
    incident_id = world.opened()
    world.hyperpod.node(CLUSTER, INSTANCE).status = "SystemUpdating"

    result = health_check.start_health_check(ref(incident_id), world.deps)

    assert result == {"status": "SystemUpdating", "started": False, "held": False, "scope": "node"}
    assert world.hyperpod.calls_to("StartClusterHealthCheck") == []
    entry = world.audit.entries(incident_id)[-1]
    assert entry.action == "health_check_not_started"
    assert "SystemUpdating" in entry.details["reason"]


def test_a_failed_health_check_call_marks_the_incident_failed_audits_and_reraises(world):
    incident_id = world.opened()
    refused = DependencyFailed("bad group", code="ValidationException", request_id="req-7")
    world.hyperpod.fail_next("StartClusterHealthCheck", refused)

    with pytest.raises(DependencyFailed):
        health_check.start_health_check(ref(incident_id), world.deps)

    incident = world.incident(incident_id)
    assert incident.state is S.FAILED
    assert incident.error.details["step"] == "start_health_check"
    entry = world.audit.entries(incident_id)[-1]
    assert (entry.action, entry.request_ids) == ("step_failed", ["req-7"])


def test_a_throttled_health_check_call_leaves_the_incident_open_for_the_retry(world):
    incident_id = world.opened()
    world.hyperpod.fail_next("StartClusterHealthCheck", Throttled("slow", request_id="req-7"))

    with pytest.raises(Throttled):
        health_check.start_health_check(ref(incident_id), world.deps)

    assert world.incident(incident_id).state is S.OPENED
    assert world.audit.actions(incident_id)[-1] == "step_error_retryable"


def test_the_retry_after_a_throttled_call_starts_the_health_check_once(world):
    incident_id = world.opened()
    world.hyperpod.fail_next("StartClusterHealthCheck", Throttled("slow"))
    with pytest.raises(Throttled):
        health_check.start_health_check(ref(incident_id), world.deps)

    result = health_check.start_health_check(ref(incident_id), world.deps)

    assert result["started"] is True
    assert world.incident(incident_id).state is S.HEALTH_CHECK


def test_starting_twice_does_not_start_a_second_health_check(world):
    incident_id = world.opened()
    health_check.start_health_check(ref(incident_id), world.deps)

    health_check.start_health_check(ref(incident_id), world.deps)

    assert len(world.hyperpod.calls_to("StartClusterHealthCheck")) == 1


# -- check health -------------------------------------------------------------------------------


def test_polling_reports_in_progress_then_the_passing_result(world):
    world.hyperpod.health_check_polls = 2  # the look right after starting, then one poll
    incident_id = world.opened()
    health_check.start_health_check(ref(incident_id), world.deps)

    first = health_check.check_health(ref(incident_id), world.deps)
    second = health_check.check_health(ref(incident_id), world.deps)

    assert first == {
        "status": "DeepHealthCheckInProgress",
        "in_progress": True,
        "scope": "node",
        "held": False,
        "passed_after_reboot": False,
    }
    assert second == {
        "status": "Running",
        "in_progress": False,
        "scope": "node",
        "held": False,
        "passed_after_reboot": False,
    }
    assert world.incident(incident_id).health_check.result == "passed"


def test_a_failing_health_check_is_recorded_as_failed(world):
    world.hyperpod.set_health_check_result(CLUSTER, INSTANCE, passes=False)

    incident_id = world.health_checked()

    assert world.incident(incident_id).health_check.result == "failed"
    assert world.incident(incident_id).node_status == "Failure"


def test_with_automatic_node_recovery_a_failed_check_shows_hyperpod_replacing_the_node(world):
    world.hyperpod.clusters[CLUSTER].node_recovery = NodeRecovery.AUTOMATIC
    world.hyperpod.set_health_check_result(CLUSTER, INSTANCE, passes=False)

    incident_id = world.health_checked()

    health = world.incident(incident_id).health_check
    assert (health.result, health.status) == ("failed", "ShuttingDown")


def test_a_node_that_hyperpod_replaces_itself_is_waited_for_not_replaced_again(world):
    world.hyperpod.clusters[CLUSTER].node_recovery = NodeRecovery.AUTOMATIC
    world.hyperpod.set_health_check_result(CLUSTER, INSTANCE, passes=False)
    incident_id = world.decided("approve")

    result = recovery.replace_node(ref(incident_id), world.deps)

    assert result == {"status": "in_progress"}
    assert world.hyperpod.calls_to("BatchReplaceClusterNodes") == []
    assert world.audit.actions(incident_id)[-1] == "replacement_by_hyperpod"


def test_a_node_hyperpod_replaced_by_itself_closes_as_replaced_by_hyperpod(world):
    world.hyperpod.clusters[CLUSTER].node_recovery = NodeRecovery.AUTOMATIC
    world.hyperpod.set_health_check_result(CLUSTER, INSTANCE, passes=False)
    incident_id = world.decided("approve")
    recovery.replace_node(ref(incident_id), world.deps)
    while not recovery.check_replacement(ref(incident_id), world.deps)["done"]:
        pass

    result = close(world, incident_id, Outcome.REPLACED)

    assert result["state"] == "replaced_by_hyperpod"
    assert world.hyperpod.calls_to("BatchReplaceClusterNodes") == []


def test_a_node_gone_during_the_health_check_ends_the_check_as_node_gone(world):
    incident_id = world.opened()
    health_check.start_health_check(ref(incident_id), world.deps)
    del world.hyperpod.clusters[CLUSTER].nodes[INSTANCE]

    result = health_check.check_health(ref(incident_id), world.deps)

    assert result == {
        "status": "NotFound",
        "in_progress": False,
        "scope": "node",
        "held": False,
        "passed_after_reboot": False,
    }
    assert world.incident(incident_id).health_check.result == "node_gone"


def test_polls_are_audited_only_when_the_status_changes(world):
    world.hyperpod.health_check_polls = 3  # in progress, in progress, in progress, Running
    incident_id = world.opened()
    health_check.start_health_check(ref(incident_id), world.deps)

    for _ in range(4):
        health_check.check_health(ref(incident_id), world.deps)

    polled = [e for e in world.audit.entries(incident_id) if e.action == "health_check_status"]
    assert [(e.details["status"], e.details["result"]) for e in polled] == [("Running", "passed")]


def test_polling_an_incident_that_is_not_in_health_check_fails_it(world):
    incident_id = world.opened()

    with pytest.raises(InvalidTransition):
        health_check.check_health(ref(incident_id), world.deps)

    assert world.incident(incident_id).state is S.FAILED


# -- replace node -------------------------------------------------------------------------------


def test_an_approved_incident_requests_the_replacement_of_its_node(world):
    incident_id = world.decided("approve")

    result = recovery.replace_node(ref(incident_id), world.deps)

    assert result == {"status": "requested"}
    assert world.hyperpod.calls_to("BatchReplaceClusterNodes") == [
        {"ClusterName": CLUSTER, "NodeIds": [INSTANCE]}
    ]
    assert world.incident(incident_id).state is S.REPLACING
    assert world.audit.actions(incident_id)[-1] == "replacement_requested"


def test_the_node_is_rechecked_before_replacing(world):
    incident_id = world.decided("approve")
    calls_before = len(world.hyperpod.calls)

    recovery.replace_node(ref(incident_id), world.deps)

    operations = [c.operation for c in world.hyperpod.calls[calls_before:]]
    assert operations == ["DescribeClusterNode", "BatchReplaceClusterNodes"]


def test_a_node_already_gone_is_not_replaced(world):
    incident_id = world.decided("approve")
    del world.hyperpod.clusters[CLUSTER].nodes[INSTANCE]

    result = recovery.replace_node(ref(incident_id), world.deps)

    assert result == {"status": "gone"}
    assert world.hyperpod.calls_to("BatchReplaceClusterNodes") == []
    assert world.audit.actions(incident_id)[-1] == "node_gone"


@pytest.mark.parametrize(
    ("code", "status", "action"),
    [
        ("InstanceIdInUse", "in_progress", "replacement_in_progress"),
        ("InvalidInstanceStatus", "retry", "replacement_retry"),
        ("InstanceIdNotFound", "gone", "node_gone"),
    ],
)
def test_each_documented_failed_code_maps_to_its_next_step(world, code, status, action):
    incident_id = world.decided("approve")
    world.hyperpod.inject_replace_failure(INSTANCE, code, "from the test")

    result = recovery.replace_node(ref(incident_id), world.deps)

    assert result == {"status": status}
    entry = world.audit.entries(incident_id)[-1]
    assert (entry.action, entry.details["code"]) == (action, code)


def test_an_internal_server_error_in_failed_is_retried_later(world):
    incident_id = world.decided("approve")
    world.hyperpod.inject_replace_failure(INSTANCE, "InternalServerError", "boom")

    result = recovery.replace_node(ref(incident_id), world.deps)

    assert result == {"status": "retry"}
    assert world.incident(incident_id).state is S.REPLACING
    assert world.audit.entries(incident_id)[-1].details["code"] == "InternalServerError"


def test_a_retry_after_invalid_status_requests_the_replacement(world):
    incident_id = world.decided("approve")
    world.hyperpod.inject_replace_failure(INSTANCE, "InvalidInstanceStatus")
    recovery.replace_node(ref(incident_id), world.deps)

    result = recovery.replace_node(ref(incident_id), world.deps)

    assert result == {"status": "requested"}
    assert world.incident(incident_id).replacement.attempts == 2


def test_dry_run_records_would_replace_and_calls_nothing(world):
    world.settings = settings(dry_run=True)
    incident_id = world.decided("approve")

    result = recovery.replace_node(ref(incident_id), world.deps)

    assert result == {"status": "dry_run"}
    assert world.hyperpod.calls_to("BatchReplaceClusterNodes") == []
    entry = world.audit.entries(incident_id)[-1]
    assert (entry.action, entry.details["would_replace"]) == ("replacement_would_replace", INSTANCE)


def test_a_rejected_incident_is_never_replaced(world):
    incident_id = world.decided("reject")

    with pytest.raises(ReplacementNotApproved):
        recovery.replace_node(ref(incident_id), world.deps)

    assert world.hyperpod.calls_to("BatchReplaceClusterNodes") == []


def test_an_undecided_incident_is_never_replaced(world):
    incident_id = world.awaiting_approval()

    with pytest.raises(ReplacementNotApproved):
        recovery.replace_node(ref(incident_id), world.deps)

    assert world.hyperpod.calls_to("BatchReplaceClusterNodes") == []


# -- check replacement --------------------------------------------------------------------------


def replacing(world: World) -> str:
    incident_id = world.decided("approve")
    recovery.replace_node(ref(incident_id), world.deps)
    return incident_id


def test_replacement_is_done_when_the_old_instance_is_gone_and_names_the_new_one(world):
    world.hyperpod.replacement_polls = 1
    incident_id = replacing(world)

    first = recovery.check_replacement(ref(incident_id), world.deps)
    second = recovery.check_replacement(ref(incident_id), world.deps)

    new_id = world.hyperpod.replaced_by[INSTANCE]
    assert first == {"done": False, "new_instance_id": None}
    assert second == {"done": True, "new_instance_id": new_id}
    assert world.incident(incident_id).replacement.new_instance_id == new_id
    assert world.audit.actions(incident_id)[-1] == "replacement_done"


def test_a_dry_run_replacement_is_done_at_once_without_a_new_node(world):
    world.settings = settings(dry_run=True)
    incident_id = world.decided("approve")
    recovery.replace_node(ref(incident_id), world.deps)

    result = recovery.check_replacement(ref(incident_id), world.deps)

    assert result == {"done": True, "new_instance_id": None}
    assert world.hyperpod.node(CLUSTER, INSTANCE) is not None


def test_a_failed_describe_while_waiting_fails_the_incident(world):
    incident_id = replacing(world)
    world.hyperpod.fail_next("DescribeClusterNode", DependencyFailed("AccessDenied"))

    with pytest.raises(DependencyFailed):
        recovery.check_replacement(ref(incident_id), world.deps)

    assert world.incident(incident_id).state is S.FAILED


# -- close --------------------------------------------------------------------------------------


def test_closing_after_the_replacement_ends_replaced_and_frees_the_lock(world):
    world.hyperpod.replacement_polls = 0
    incident_id = replacing(world)
    recovery.check_replacement(ref(incident_id), world.deps)

    result = close(world, incident_id, Outcome.REPLACED)

    assert result == {"incident_id": incident_id, "state": "replaced"}
    assert world.store.locks == {}
    assert world.store.task_token(incident_id) is None


def test_closing_is_audited_and_notified(world):
    incident_id = world.decided("reject")

    close(world, incident_id, Outcome.REJECTED)

    assert world.audit.actions(incident_id)[-2:] == ["incident_closed", "closed_notified"]
    assert "closed: rejected" in world.notifier.published[-1].subject


def test_a_failed_close_notifies_with_the_error(world):
    incident_id = world.opened()

    close(world, incident_id, Outcome.FAILED, {"Error": "Lambda.Unknown", "Cause": "boom"})

    notice = world.notifier.published[-1]
    assert "closed: failed" in notice.subject
    assert "Lambda.Unknown" in notice.message
    assert world.incident(incident_id).error.to_record() == {
        "Error": "Lambda.Unknown",
        "Cause": "boom",
    }


def test_an_outcome_that_does_not_follow_the_state_closes_as_failed_with_the_reason(world):
    incident_id = world.awaiting_approval()

    result = close(world, incident_id, Outcome.REPLACED)

    assert result["state"] == "failed"
    assert "does not follow" in world.incident(incident_id).error.details["close_mismatch"]


def test_closing_twice_changes_nothing_and_notifies_once(world):
    incident_id = world.awaiting_approval()
    close(world, incident_id, Outcome.EXPIRED)
    published = len(world.notifier.published)
    entries = len(world.audit.entries(incident_id))

    again = close(world, incident_id, Outcome.FAILED)

    assert again["state"] == "expired"
    assert len(world.notifier.published) == published
    assert len(world.audit.entries(incident_id)) == entries


def test_a_close_whose_notification_fails_still_closes_and_says_so(world):
    incident_id = world.awaiting_approval()
    world.notifier.outage = Throttled("sns throttled")

    result = close(world, incident_id, Outcome.EXPIRED)

    assert result["state"] == "expired"
    assert world.audit.actions(incident_id)[-1] == "notification_failed"
    assert not world.incident(incident_id).close_notified


def test_a_close_whose_notification_failed_notifies_when_closed_again(world):
    incident_id = world.awaiting_approval()
    world.notifier.outage = Throttled("sns throttled")
    close(world, incident_id, Outcome.EXPIRED)
    world.notifier.outage = None

    close(world, incident_id, Outcome.FAILED)

    assert "closed: expired" in world.notifier.published[-1].subject
    assert world.incident(incident_id).close_notified


def test_a_notice_refused_once_is_retried_with_backoff_and_goes_out(world):
    incident_id = world.awaiting_approval()
    world.slept.clear()
    world.notifier.fail_next = Throttled("sns throttled")

    close(world, incident_id, Outcome.EXPIRED)

    assert world.incident(incident_id).close_notified
    assert world.slept == [0.5]
    actions = world.audit.actions(incident_id)
    assert "closed_notified" in actions and "notification_failed" not in actions


def test_a_notice_during_an_outage_is_tried_with_growing_waits_then_recorded_undelivered(world):
    incident_id = world.awaiting_approval()
    world.slept.clear()
    world.notifier.attempts = 0
    world.notifier.outage = Throttled("sns throttled")

    close(world, incident_id, Outcome.EXPIRED)

    assert world.slept == [0.5, 1.0, 2.0, 4.0]
    assert world.notifier.attempts == 5
    (entry,) = [e for e in world.audit.entries(incident_id) if e.action == "notification_failed"]
    assert entry.details["attempts"] == 5


def test_a_notice_refused_for_good_is_not_retried(world):
    incident_id = world.awaiting_approval()
    world.slept.clear()
    world.notifier.attempts = 0
    world.notifier.outage = DependencyFailed("AuthorizationError: not allowed")

    close(world, incident_id, Outcome.EXPIRED)

    assert (world.notifier.attempts, world.slept) == (1, [])


def test_after_closing_a_new_alarm_can_open_a_new_incident(world):
    incident_id = world.awaiting_approval()
    close(world, incident_id, Outcome.EXPIRED)

    assert world.store.open_incident_id(CLUSTER, INSTANCE) is None


def test_a_health_check_that_was_never_started_is_not_reported_as_failed(world):
    world.hyperpod.node(CLUSTER, INSTANCE).status = "SystemUpdating"
    incident_id = world.opened()
    health_check.start_health_check(ref(incident_id), world.deps)

    result = health_check.check_health(ref(incident_id), world.deps)

    assert result == {
        "status": "SystemUpdating",
        "in_progress": False,
        "scope": "node",
        "held": False,
        "passed_after_reboot": False,
    }
    assert world.incident(incident_id).health_check.result == "not_run"
