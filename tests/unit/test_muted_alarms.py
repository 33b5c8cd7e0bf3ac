"""CloudWatch alarm mute rules: EventBridge still delivers a muted alarm's state changes, with
`muteDetail`. The pipeline is one of the alarm's actions, so a muted alarm is treated as the
pause switch is: the incident is recorded as held, the mute rule named in the audit and the
notice; once the mute window is over, the next alarm is judged afresh."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from sdc_remediation.lambdas.logic import intake
from sdc_remediation.lambdas.models.events import parse_contributor_event
from sdc_remediation.lambdas.models.guard import HoldKind
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.report import parse_report_event
from tests.conftest import load_fixture
from tests.unit.reports import forged_event
from tests.unit.world import World, settings

RULE = "gpu-fleet-maintenance"
RULE_ARN = f"arn:aws:cloudwatch:us-west-2:111122223333:alarm-mute-rule:{RULE}"


def muted_alarm(event_id: str = "muted-1", **mute: str) -> dict[str, Any]:
    event = copy.deepcopy(load_fixture("events", "contributor_alarm_muted"))
    event["id"] = event_id
    event["detail"]["muteDetail"].update(mute)
    return event


def unmuted_alarm(event_id: str, at: datetime) -> dict[str, Any]:
    event = muted_alarm(event_id)
    del event["detail"]["muteDetail"]
    event["detail"]["state"]["timestamp"] = at.strftime("%Y-%m-%dT%H:%M:%S.000+0000")
    return event


def alarm(world: World, event: dict[str, Any]) -> dict[str, Any]:
    return dict(intake.open_incident(parse_contributor_event(event), world.deps))


def held_notices(world: World) -> list[Any]:
    return [p for p in world.notifier.published if p.attributes.get("kind") == "held"]


def test_a_muted_alarm_records_its_incident_as_held_and_starts_nothing(world):
    result = alarm(world, muted_alarm())

    assert result["action"] == "held"
    incident = world.incident(result["incident_id"])
    assert incident.state is IncidentState.HELD
    assert incident.hold.kind == HoldKind.MUTED
    assert world.workflow.executions == {}
    assert world.hyperpod.calls_to("StartClusterHealthCheck") == []
    assert world.store.open_incident_id(incident.cluster_name, incident.instance_id) is None


def test_the_audit_names_the_mute_rule_and_its_window(world):
    result = alarm(world, muted_alarm())

    (held,) = [e for e in world.audit.entries(result["incident_id"]) if e.action == "incident_held"]
    assert held.details["kind"] == "muted"
    assert held.details["mute_rule"] == RULE
    assert held.details["mute_rule_arn"] == RULE_ARN
    assert held.details["mute_window_start"] == "2026-11-30T08:00:00+00:00"
    assert held.details["mute_window_end"] == "2026-11-30T10:00:00+00:00"
    assert RULE in held.details["reason"]


def test_the_held_notice_names_the_mute_rule_and_how_to_end_it(world):
    alarm(world, muted_alarm())

    (notice,) = held_notices(world)
    assert "held (muted)" in notice.subject
    assert RULE_ARN in notice.message
    assert f"--alarm-mute-rule-name {RULE}" in notice.message
    assert "2026-11-30T10:00:00+00:00" in notice.message


def test_the_alarm_evidence_keeps_the_mute_rule(world):
    result = alarm(world, muted_alarm())

    (item,) = [e for e in world.incident(result["incident_id"]).evidence if e["kind"] == "alarm"]
    assert (item["mute_rule"], item["mute_rule_arn"]) == (RULE, RULE_ARN)


def test_a_redelivered_muted_alarm_joins_the_held_incident_without_a_second_notice(world):
    first = alarm(world, muted_alarm("muted-1"))

    again = alarm(world, muted_alarm("muted-1"))
    other_metric = alarm(world, muted_alarm("muted-2"))

    assert again == first == {**other_metric, "action": "held"}
    assert len(held_notices(world)) == 1


def test_within_the_mute_window_the_next_alarm_joins_the_held_incident(world):
    first = alarm(world, muted_alarm(muteWindowEnd="2026-11-30T08:20:00.000+0000"))
    world.clock.current = datetime(2026, 11, 30, 8, 18, tzinfo=UTC)

    later = alarm(world, unmuted_alarm("plain-1", datetime(2026, 11, 30, 8, 18, tzinfo=UTC)))

    assert later == first
    assert world.workflow.executions == {}


def test_after_the_mute_window_the_next_alarm_opens_an_incident_that_acts(world):
    first = alarm(world, muted_alarm(muteWindowEnd="2026-11-30T08:20:00.000+0000"))
    world.clock.current = datetime(2026, 11, 30, 8, 21, tzinfo=UTC)  # held lock still valid

    later = alarm(world, unmuted_alarm("plain-1", datetime(2026, 11, 30, 8, 21, tzinfo=UTC)))

    assert later["action"] == "opened"
    assert later["incident_id"] != first["incident_id"]
    assert later["incident_id"] in world.workflow.executions


def test_a_muted_alarm_for_a_node_with_an_open_incident_attaches_and_records_the_mute(world):
    opened = world.opened()  # an earlier, unmuted alarm (or the report) opened it

    result = alarm(world, muted_alarm())

    assert result == {"incident_id": opened, "action": "attached"}
    incident = world.incident(opened)
    assert incident.state is IncidentState.OPENED
    assert any(e.get("mute_rule") == RULE for e in incident.evidence)


def test_a_storm_hold_still_names_the_storm_not_the_mute(world):
    world.settings = settings(storm_threshold=2)
    for n in range(2):  # culprit reports on two nodes start the storm
        world.hyperpod.add_node("ml-cluster-1", "gpu-workers", f"i-0f{n:015x}")
        report = forged_event(
            [f"i-0f{n:015x}"], ambiguous=False, role="culprit", report_id=f"culprit-{n:04d}"
        )
        intake.store_report(parse_report_event(report), world.deps)

    result = alarm(world, muted_alarm())

    assert world.incident(result["incident_id"]).hold.kind == HoldKind.STORM


def test_a_muted_alarm_back_to_ok_is_ignored_as_any_ok(world):
    event = muted_alarm()
    event["detail"]["state"]["value"] = "OK"

    assert alarm(world, event) == {"incident_id": None, "action": "ignored"}
