"""The guards: blast-radius limit, pause switch, storm hold and its audited reset."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import pytest

from sdc_remediation.lambdas.logic import approval, closing, health_check, intake, recovery
from sdc_remediation.lambdas.logic.safety import guard
from sdc_remediation.lambdas.models.errors import DecisionRefused, DependencyFailed
from sdc_remediation.lambdas.models.events import parse_contributor_event
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.payloads import CloseRequest, IncidentRef, Outcome
from sdc_remediation.lambdas.models.report import parse_report_event
from tests.unit.reports import forged_event
from tests.unit.world import CLUSTER, GROUP, World, alarm_event, settings

S = IncidentState
BASE = datetime(2026, 11, 30, 8, 15, 4, tzinfo=UTC)


def alarm_for(world: World, instance_id: str, *, seconds: int = 0, event_id: str | None = None):
    """A contributor ALARM for `instance_id` (added to the fake cluster if new)."""
    if world.hyperpod.node(CLUSTER, instance_id) is None:
        world.hyperpod.add_node(CLUSTER, GROUP, instance_id)
    event = copy.deepcopy(alarm_event())
    event["id"] = event_id or f"event-{instance_id}-{seconds}"
    event["detail"]["alarmContributor"]["attributes"]["InstanceId"] = instance_id
    at = BASE + timedelta(seconds=seconds)
    event["detail"]["state"]["timestamp"] = at.strftime("%Y-%m-%dT%H:%M:%S.000+0000")
    world.clock.current = max(world.clock.current, at)  # received as it fires
    return intake.open_incident(parse_contributor_event(event), world.deps)


def fault_on(world: World, instance_id: str, *, seconds: int = 0, event_id: str | None = None):
    """A culprit report naming `instance_id` (its result), then its contributor alarm:
    the storm rule counts the nodes reports name, never an alarm's alone (any pod can put a
    metric datapoint with any InstanceId)."""
    if world.hyperpod.node(CLUSTER, instance_id) is None:
        world.hyperpod.add_node(CLUSTER, GROUP, instance_id)
    at = BASE + timedelta(seconds=seconds)
    world.clock.current = max(world.clock.current, at)
    report = forged_event(
        [instance_id],
        ambiguous=False,
        role="culprit",
        at=at,
        report_id=f"r-{instance_id}-{seconds}",
    )
    (result,) = intake.store_report(parse_report_event(report), world.deps)["incidents"]
    alarm_for(world, instance_id, seconds=seconds, event_id=event_id)
    return result


def instance(n: int) -> str:
    return f"i-0e{n:015x}"


def nodes(world: World, count: int) -> None:
    for n in range(count):
        if world.hyperpod.node(CLUSTER, instance(n)) is None:
            world.hyperpod.add_node(CLUSTER, GROUP, instance(n))


def held_notices(world: World) -> list:
    kinds = ("held", "storm_hold")
    return [p for p in world.notifier.published if p.attributes.get("kind") in kinds]


# -- the blast-radius limit ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("node_count", "expected"),
    [
        (1, 1),  # a one-node cluster still allows its one
        (2, 1),  # N - 1
        (3, 1),  # 10 % of 3 rounds up to 1
        (10, 1),
        (11, 2),
        (20, 2),
        (128, 3),  # the absolute limit
        (None, 3),  # unknown size: the absolute limit
    ],
)
def test_the_open_limit_rounds_up_stays_below_the_node_count_and_caps_at_the_absolute(
    node_count, expected
):
    assert guard.open_limit(node_count, settings()) == expected


def test_the_open_limit_never_exceeds_n_minus_one_however_generous_the_share():
    generous = settings(guard_max_open_nodes=100, guard_max_open_percent=100)

    assert guard.open_limit(5, generous) == 4


def test_beyond_the_guard_a_new_incident_is_held_and_notified(world):
    nodes(world, 20)  # 21 nodes: at most 3 open, the storm threshold raised out of the way
    world.settings = settings(storm_threshold=50)
    opened = [alarm_for(world, instance(n))["action"] for n in range(3)]

    fourth = alarm_for(world, instance(3))

    assert opened == ["opened"] * 3
    assert fourth["action"] == "held"
    incident = world.incident(fourth["incident_id"])
    assert (incident.state, incident.hold.kind) == (S.HELD, "guard")
    assert "blast-radius guard" in incident.reason
    assert world.audit.actions(fourth["incident_id"]) == ["incident_held", "held_notified"]
    (notice,) = held_notices(world)
    assert "held (guard)" in notice.subject


def test_a_held_incident_starts_nothing_and_takes_no_lock(world):
    nodes(world, 20)
    world.settings = settings(storm_threshold=50)
    for n in range(3):
        alarm_for(world, instance(n))

    held = alarm_for(world, instance(3))

    assert held["incident_id"] not in world.workflow.executions
    assert world.store.open_incident_id(CLUSTER, instance(3)) is None


def test_closing_an_incident_gives_its_guard_slot_back(world):
    nodes(world, 20)
    world.settings = settings(storm_threshold=50)
    first, *_ = [alarm_for(world, instance(n))["incident_id"] for n in range(3)]
    closing.close_incident(CloseRequest(first, Outcome.FAILED, None), world.deps)

    result = alarm_for(world, instance(3))

    assert result["action"] == "opened"


# -- the pause switch ---------------------------------------------------------------------------


def test_when_paused_a_new_incident_is_held_and_notified(world):
    world.switch.value = "true"

    result = alarm_for(world, instance(1))

    assert result["action"] == "held"
    incident = world.incident(result["incident_id"])
    assert incident.hold.kind == "paused"
    assert world.workflow.executions == {}
    (notice,) = held_notices(world)
    assert "held (paused)" in notice.subject


@pytest.mark.parametrize("value", ["TRUE", "yes", "", "paused"])
def test_a_pause_switch_value_other_than_false_counts_as_paused(world, value):
    world.switch.value = value

    assert guard.pause_blocker(world.deps) is not None


def test_an_unreadable_pause_switch_counts_as_paused_and_says_why(world):
    world.switch.error = DependencyFailed("AccessDenied")

    blocker = guard.pause_blocker(world.deps)

    assert blocker is not None
    assert "could not be read" in blocker.reason


def test_without_a_configured_switch_nothing_is_paused(world):
    world.switch.value = None

    assert guard.pause_blocker(world.deps) is None


def test_pausing_holds_an_open_incident_before_its_health_check_starts(world):
    incident_id = world.opened()
    world.switch.value = "true"

    result = health_check.start_health_check(IncidentRef(incident_id), world.deps)

    assert result["held"] is True
    assert world.hyperpod.calls_to("StartClusterHealthCheck") == []
    closed = closing.close_incident(CloseRequest(incident_id, Outcome.HELD, None), world.deps)
    assert closed["state"] == "held"


def test_pausing_holds_an_approved_incident_before_the_replacement(world):
    incident_id = world.decided("approve")
    world.switch.value = "true"

    result = recovery.replace_node(IncidentRef(incident_id), world.deps)

    assert result == {"status": "held"}
    assert world.hyperpod.calls_to("BatchReplaceClusterNodes") == []


# -- the storm hold -----------------------------------------------------------------------------


def test_a_storm_of_distinct_instances_holds_the_cluster_with_one_notification(world):
    nodes(world, 128)

    results = [fault_on(world, instance(n), seconds=n % 60)["action"] for n in range(100)]

    assert results[:3] == ["opened"] * 3
    assert set(results[3:]) == {"held"}
    (notice,) = held_notices(world)
    assert notice.attributes["kind"] == "storm_hold"
    assert "storm" in notice.subject
    assert '"decision": "reset"' in notice.message
    hold = world.store.active_hold(CLUSTER)
    assert f'sdc reset {hold.hold_id} -m "<why>"' in notice.message


def test_the_storm_hold_is_audited_under_its_own_id_with_the_flagged_instances(world):
    nodes(world, 8)
    for n in range(4):
        fault_on(world, instance(n))

    hold = world.store.active_hold(CLUSTER)

    assert hold is not None and hold.hold_id.startswith(f"hold-{CLUSTER}-storm-")
    entries = world.audit.entries(hold.hold_id)
    assert [e.action for e in entries] == ["storm_hold_started", "storm_notified"]
    assert entries[0].details["instances"] == sorted(instance(n) for n in range(4))


def test_flags_outside_the_window_make_no_storm(world):
    nodes(world, 8)
    world.settings = settings(guard_max_open_nodes=10, guard_max_open_percent=100)
    window = world.settings.storm_window_seconds

    results = [fault_on(world, instance(n), seconds=n * (window + 1)) for n in range(5)]

    assert [r["action"] for r in results] == ["opened"] * 5
    assert world.store.active_hold(CLUSTER) is None


def test_a_storm_holds_open_incidents_at_their_next_acting_step(world):
    nodes(world, 8)
    first = fault_on(world, instance(0))["incident_id"]
    for n in range(1, 4):
        fault_on(world, instance(n))

    result = health_check.start_health_check(IncidentRef(first), world.deps)

    assert result["held"] is True
    assert world.incident(first).hold.kind == "storm"


def test_a_storm_during_the_health_check_holds_the_incident_before_any_approval_card(world):
    nodes(world, 8)
    first = fault_on(world, instance(0))["incident_id"]
    ref = IncidentRef(first)
    assert health_check.start_health_check(ref, world.deps)["held"] is False
    for n in range(1, 4):
        fault_on(world, instance(n))  # the storm starts while the health check runs

    polls = []
    while not polls or polls[-1]["in_progress"]:
        polls.append(health_check.check_health(ref, world.deps))

    assert [p["held"] for p in polls] == [False] * (len(polls) - 1) + [True]
    assert world.incident(first).hold.kind == "storm"
    assert world.audit.actions(first)[-1] == "held"
    assert not [p for p in world.notifier.published if p.attributes["kind"] == "approval_request"]


def test_without_a_hold_the_last_health_poll_lets_the_approval_go_ahead(world):
    nodes(world, 8)
    ref = IncidentRef(fault_on(world, instance(0))["incident_id"])
    health_check.start_health_check(ref, world.deps)

    polls = []
    while not polls or polls[-1]["in_progress"]:
        polls.append(health_check.check_health(ref, world.deps))

    assert not any(p["held"] for p in polls)


def test_closing_a_storm_held_incident_sends_no_notice_of_its_own(world):
    nodes(world, 8)
    first = fault_on(world, instance(0))["incident_id"]
    for n in range(1, 4):
        fault_on(world, instance(n))
    health_check.start_health_check(IncidentRef(first), world.deps)
    before = len(world.notifier.published)

    closing.close_incident(CloseRequest(first, Outcome.HELD, None), world.deps)

    assert len(world.notifier.published) == before


def test_a_failed_storm_notification_is_sent_by_the_next_alarm(world):
    nodes(world, 8)
    for n in range(3):
        fault_on(world, instance(n))
    world.notifier.fail_next = DependencyFailed("SNS down")
    fault_on(world, instance(3))  # starts the hold, its notice fails

    fault_on(world, instance(4))

    storm_notices = [
        p for p in world.notifier.published if p.attributes.get("kind") == "storm_hold"
    ]
    assert len(storm_notices) == 1
    hold = world.store.active_hold(CLUSTER)
    assert "notification_failed" in world.audit.actions(hold.hold_id)


# -- reset ----------------------------------------------------------------------------------------


def storm(world: World) -> str:
    nodes(world, 8)
    for n in range(4):
        fault_on(world, instance(n))
    hold = world.store.active_hold(CLUSTER)
    assert hold is not None
    return hold.hold_id


def test_a_reset_through_the_approval_path_lifts_the_hold_audited_and_notified(world):
    hold_id = storm(world)

    result = approval.decide(world.decision(hold_id, "reset", "recipe fixed"), world.deps)

    assert result == {"incident_id": hold_id, "decision": "reset", "accepted": True}
    assert world.store.active_hold(CLUSTER) is None
    entry = world.audit.entries(hold_id)[-2]
    assert (entry.action, entry.details["comment"]) == ("storm_hold_reset", "recipe fixed")
    assert entry.actor.startswith("approver:")
    assert world.notifier.published[-1].attributes["kind"] == "storm_hold_reset"


def test_a_reset_whose_notice_fails_still_lifts_the_hold_and_says_so_in_the_audit(world):
    hold_id = storm(world)
    world.notifier.fail_next = DependencyFailed("SNS down")

    result = approval.decide(world.decision(hold_id, "reset", "recipe fixed"), world.deps)

    assert result["accepted"] is True
    assert world.store.active_hold(CLUSTER) is None
    last = world.audit.entries(hold_id)[-1]
    assert (last.action, last.details["kind"]) == ("notification_failed", "storm_hold_reset")


def test_after_a_reset_earlier_flags_no_longer_count_and_a_new_alarm_acts(world):
    hold_id = storm(world)
    world.clock.current = BASE + timedelta(seconds=30)
    approval.decide(world.decision(hold_id, "reset"), world.deps)
    for incident_id in list(world.store.slots[CLUSTER]):
        world.store.release_slot(CLUSTER, incident_id)

    result = fault_on(world, instance(5), seconds=60)

    assert result["action"] == "opened"


def test_a_second_reset_is_refused_and_audited(world):
    hold_id = storm(world)
    approval.decide(world.decision(hold_id, "reset"), world.deps)

    with pytest.raises(DecisionRefused, match="already reset"):
        approval.decide(world.decision(hold_id, "reset"), world.deps)

    assert world.audit.actions(hold_id)[-1] == "decision_refused"


def test_approving_a_storm_hold_is_refused_only_reset_lifts_it(world):
    hold_id = storm(world)

    with pytest.raises(DecisionRefused, match="only decision 'reset'"):
        approval.decide(world.decision(hold_id, "approve"), world.deps)

    assert world.store.active_hold(CLUSTER) is not None


def test_resetting_an_incident_is_refused(world):
    incident_id = world.awaiting_approval()

    with pytest.raises(DecisionRefused, match="not a storm hold"):
        approval.decide(world.decision(incident_id, "reset"), world.deps)

    assert world.audit.actions(incident_id)[-1] == "decision_refused"


def test_resetting_an_unknown_hold_is_refused_under_the_approval_execution(world):
    with pytest.raises(DecisionRefused, match="no storm hold"):
        approval.decide(
            world.decision("hold-ml-cluster-1-storm-20990101T000000", "reset"), world.deps
        )
