"""One held incident per instance, whichever channel comes first.

A held incident is closed at birth and takes no open lock; its held lock makes the other channel
(the alarm after the report, or the report after the alarm) and redeliveries attach to it
instead of recording a second held incident with a second notice. A report naming a storm's
worth of nodes flags them all before it opens any, so they are held under one storm hold.
"""

from __future__ import annotations

import copy
from datetime import timedelta

from sdc_remediation.lambdas.logic import approval, intake
from sdc_remediation.lambdas.models.errors import DependencyFailed
from sdc_remediation.lambdas.models.events import parse_contributor_event
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.report import parse_report_event
from tests.conftest import load_fixture
from tests.unit.reports import NODES, REPORT_TIME, report_event
from tests.unit.world import CLUSTER, GROUP, INSTANCE, World, room_for_a_job

S = IncidentState


def four_nodes(world: World) -> World:
    for node in NODES:
        world.hyperpod.add_node(CLUSTER, GROUP, node)
    return world


def store(world: World, alarm: str | dict):
    return intake.store_report(parse_report_event(report_event(alarm)), world.deps)


def alarm_on(world: World, instance_id: str, event_id: str | None = None, state_at: str = ""):
    event = copy.deepcopy(load_fixture("events", "contributor_alarm"))
    event["id"] = event_id or f"alarm-{instance_id}"
    event["detail"]["alarmContributor"]["attributes"]["InstanceId"] = instance_id
    if state_at:
        event["detail"]["state"]["timestamp"] = state_at
    return intake.open_incident(parse_contributor_event(event), world.deps)


def culprits_on_every_node() -> dict:
    """Ranks 5, 13, 21, 29: one culprit on each of the rank map's four nodes."""
    alarm = copy.deepcopy(load_fixture("alarms", "replay_culprit"))
    alarm["culprits"] = [5, 13, 21, 29]
    alarm["mismatched_pairs"] = [[5, 13], [13, 21], [21, 29], [29, 5]]
    return alarm


def notices(world: World, kind: str) -> list:
    return [p for p in world.notifier.published if p.attributes.get("kind") == kind]


def held_incidents(world: World) -> list:
    return [i for i in world.store.incidents.values() if i.state is S.HELD]


def test_a_report_naming_a_culprit_on_every_node_is_one_storm_hold(world):
    four_nodes(world)

    result = store(world, culprits_on_every_node())

    assert [r["action"] for r in result["incidents"]] == ["held"] * 4
    assert world.workflow.executions == {}
    assert {i.hold.kind for i in held_incidents(world)} == {"storm"}
    assert len(notices(world, "storm_hold")) == 1
    assert notices(world, "held") == []


def test_the_alarms_after_a_storm_held_report_attach_to_its_held_incidents(world):
    four_nodes(world)
    by_instance = {
        world.incident(r["incident_id"]).instance_id: r["incident_id"]
        for r in store(world, culprits_on_every_node())["incidents"]
    }

    results = {node: alarm_on(world, node) for node in NODES}

    assert {n: r["incident_id"] for n, r in results.items()} == by_instance
    assert {r["action"] for r in results.values()} == {"held"}
    assert len(world.store.incidents) == 4
    assert len(world.notifier.published) == 1
    for node, incident_id in by_instance.items():
        incident = world.incident(incident_id)
        assert "sdc_replay_mismatch" in incident.metrics, node
        assert world.audit.actions(incident_id)[-1] == "evidence_attached"


def test_a_guard_held_report_and_its_alarm_make_one_held_incident_and_one_notice(world):
    four_nodes(world)  # 5 nodes with the world's own: at most 1 open
    opened = alarm_on(world, NODES[0])
    assert opened["action"] == "opened"

    (held,) = store(world, "replay_culprit")["incidents"]  # rank 13: NODES[1]
    after = alarm_on(world, NODES[1])

    assert held["action"] == "held"
    assert after == {"incident_id": held["incident_id"], "action": "held"}
    assert len(held_incidents(world)) == 1
    assert len(notices(world, "held")) == 1
    assert world.audit.actions(held["incident_id"]) == [
        "incident_held",
        "held_notified",
        "evidence_attached",
    ]


def test_the_report_after_a_guard_held_alarm_attaches_to_it(world):
    four_nodes(world)
    alarm_on(world, NODES[0])
    held = alarm_on(world, NODES[1])
    assert held["action"] == "held"

    (after,) = store(world, "replay_culprit")["incidents"]

    assert after == {"incident_id": held["incident_id"], "action": "held"}
    assert len(held_incidents(world)) == 1
    assert len(notices(world, "held")) == 1
    incident = world.incident(held["incident_id"])
    assert any(e["kind"] == "report" for e in incident.evidence)


def test_after_the_hold_window_a_new_trigger_is_judged_afresh(world):
    four_nodes(world)
    world.switch.value = "true"
    first = alarm_on(world, NODES[1], "alarm-1")
    assert first["action"] == "held"
    world.clock.current += timedelta(seconds=world.settings.storm_window_seconds + 1)
    world.switch.value = "false"

    later = alarm_on(world, NODES[1], "alarm-2", "2026-11-30T09:00:00.000+0000")

    assert later["action"] == "opened"
    assert later["incident_id"] != first["incident_id"]


def test_an_alarm_on_a_node_of_a_held_job_incident_is_held_as_its_own_incident(world):
    four_nodes(world)
    world.switch.value = "true"
    (job,) = store(world, "weights_no_majority")["incidents"]
    assert job["action"] == "held"

    result = alarm_on(world, NODES[1])

    assert result["action"] == "held"
    assert result["incident_id"] != job["incident_id"]
    assert world.incident(result["incident_id"]).instance_id == NODES[1]


def test_once_the_hold_ends_an_alarm_on_a_node_of_the_held_job_incident_opens_its_own(world):
    four_nodes(world)
    world.settings = room_for_a_job()
    world.switch.value = "true"
    (job,) = store(world, "weights_no_majority")["incidents"]
    world.switch.value = "false"

    result = alarm_on(world, NODES[1])

    assert result["action"] == "opened"
    assert world.incident(result["incident_id"]).instance_id == NODES[1]
    assert world.incident(job["incident_id"]).state is IncidentState.HELD


def test_an_alarm_in_the_same_second_as_the_held_report_still_attaches_its_evidence(world):
    four_nodes(world)
    alarm_on(world, NODES[0])
    (held,) = store(world, "replay_culprit")["incidents"]  # emitted 08:14:31

    after = alarm_on(world, NODES[1], state_at="2026-11-30T08:14:31.700+0000")

    assert after == {"incident_id": held["incident_id"], "action": "held"}
    assert "sdc_replay_mismatch" in world.incident(held["incident_id"]).metrics
    assert world.audit.actions(held["incident_id"])[-1] == "evidence_attached"


def test_a_held_notice_that_failed_is_sent_by_the_next_event_for_the_instance(world):
    four_nodes(world)
    alarm_on(world, NODES[0])
    world.notifier.fail_next = DependencyFailed("SNS down")
    (held,) = store(world, "replay_culprit")["incidents"]
    assert notices(world, "held") == []

    alarm_on(world, NODES[1])

    assert len(notices(world, "held")) == 1
    assert world.incident(held["incident_id"]).close_notified


def reset_storm(world: World) -> None:
    hold = world.store.active_hold(CLUSTER)
    assert hold is not None
    approval.decide(world.decision(hold.hold_id, "reset", "recipe fixed"), world.deps)


def later_report(world: World, alarm: str | dict, minutes: int = 5):
    event = report_event(alarm, at=REPORT_TIME + timedelta(minutes=minutes))
    return intake.store_report(parse_report_event(event), world.deps)


def test_after_a_storm_reset_a_held_node_that_fails_again_is_judged_afresh(world):
    four_nodes(world)
    held = {r["incident_id"] for r in store(world, culprits_on_every_node())["incidents"]}
    reset_storm(world)

    (again,) = later_report(world, "replay_culprit")["incidents"]  # NODES[1], in the window

    assert again["action"] == "opened"
    assert again["incident_id"] not in held
    assert list(world.workflow.executions) == [again["incident_id"]]


def test_after_unpausing_a_held_node_that_fails_again_is_judged_afresh(world):
    four_nodes(world)
    world.switch.value = "true"
    first = alarm_on(world, NODES[1], "alarm-1")
    world.switch.value = "false"

    later = alarm_on(world, NODES[1], "alarm-2", "2026-11-30T08:20:00.000+0000")

    assert later["action"] == "opened"
    assert later["incident_id"] != first["incident_id"]


def test_a_new_hold_takes_the_held_lock_over_from_a_reset_storm_with_its_own_notice(world):
    four_nodes(world)
    storm_held = {r["incident_id"] for r in store(world, culprits_on_every_node())["incidents"]}
    reset_storm(world)
    assert alarm_on(world, INSTANCE)["action"] == "opened"  # takes the cluster's one slot

    (again,) = later_report(world, "replay_culprit")["incidents"]

    assert again["action"] == "held"
    assert again["incident_id"] not in storm_held
    assert world.incident(again["incident_id"]).hold.kind == "guard"
    assert len(notices(world, "held")) == 1
    now = int(world.clock.current.timestamp())
    assert world.store.held_incident_id(CLUSTER, NODES[1], now) == again["incident_id"]
