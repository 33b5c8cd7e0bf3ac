from __future__ import annotations

import copy

import pytest

from sdc_remediation.lambdas.logic import intake
from sdc_remediation.lambdas.logic.core import ids
from sdc_remediation.lambdas.models.errors import MalformedEvent, SettingsError, Throttled
from sdc_remediation.lambdas.models.events import parse_contributor_event
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.report import parse_report_event
from tests.conftest import load_fixture
from tests.unit.world import CLUSTER, GROUP, INSTANCE, World, alarm_event, settings

FIXTURE_EVENT_ID = "3f1c2a9e-7b41-4d0c-9a55-0c8e2f6b1d20"


def open_(world: World, event=None):
    return intake.open_incident(parse_contributor_event(event or alarm_event()), world.deps)


def redelivered(event_id: str, **detail_changes):
    event = alarm_event(**detail_changes)
    event["id"] = event_id
    return event


# -- open incident ------------------------------------------------------------------------------


def test_alarm_opens_an_incident_in_state_opened_mapped_to_its_instance_group(world):
    result = open_(world)

    incident = world.incident(result["incident_id"])
    assert result["action"] == "opened"
    assert incident.state is IncidentState.OPENED
    assert incident.instance_group == GROUP
    assert incident.metrics == ["sdc_replay_mismatch"]


def test_opening_starts_one_execution_named_after_the_incident(world):
    result = open_(world)

    assert list(world.workflow.executions) == [result["incident_id"]]
    assert world.workflow.executions[result["incident_id"]] == {
        "incident_id": result["incident_id"],
        "cluster_name": CLUSTER,
        "instance_id": INSTANCE,
    }
    assert world.incident(result["incident_id"]).execution_arn.endswith(result["incident_id"])


def test_opening_is_audited_in_order_with_the_hyperpod_request_ids(world):
    incident_id = open_(world)["incident_id"]

    entries = world.audit.entries(incident_id)
    assert [e.action for e in entries] == ["incident_opened", "execution_started"]
    assert entries[0].request_ids  # DescribeCluster and DescribeClusterNode
    assert entries[0].details["node_status"] == "Running"


def test_the_same_event_delivered_three_times_makes_one_incident_and_one_execution(world):
    results = [open_(world) for _ in range(3)]

    assert [r["action"] for r in results] == ["opened", "attached", "attached"]
    assert len({r["incident_id"] for r in results}) == 1
    assert len(world.workflow.executions) == 1
    assert len(world.store.incidents) == 1


def test_a_redelivered_event_is_not_attached_twice_as_evidence(world):
    incident_id = open_(world)["incident_id"]

    open_(world)

    assert len(world.incident(incident_id).evidence) == 1


def test_a_second_metric_for_the_same_instance_attaches_to_the_open_incident(world):
    incident_id = open_(world)["incident_id"]
    second = redelivered("another-event", alarmName="sdc-divergent-tensors")

    result = open_(world, second)

    assert result == {"incident_id": incident_id, "action": "attached"}
    assert world.incident(incident_id).metrics == ["sdc_replay_mismatch", "sdc_divergent_tensors"]
    assert world.audit.actions(incident_id)[-1] == "evidence_attached"
    assert len(world.workflow.executions) == 1


def test_ok_state_events_are_ignored_and_audited_under_the_event(world):
    result = open_(world, load_fixture("events", "contributor_ok"))

    assert result == {"incident_id": None, "action": "ignored"}
    assert world.store.incidents == {}
    ok_event_id = load_fixture("events", "contributor_ok")["id"]
    assert world.audit.actions(ids.event_subject(ok_event_id)) == ["event_ignored"]


def test_clusters_outside_allowed_clusters_are_ignored_and_audited(world):
    world.settings = settings(allowed_clusters=frozenset({"other-cluster"}))

    result = open_(world)

    assert result["action"] == "ignored"
    assert world.hyperpod.calls == []
    entry = world.audit.entries(ids.event_subject(FIXTURE_EVENT_ID))[0]
    assert "ALLOWED_CLUSTERS" in entry.details["reason"]


def test_an_empty_allowed_clusters_list_allows_none(world):
    world.settings = settings(allowed_clusters=frozenset())

    assert open_(world)["action"] == "ignored"


def test_an_instance_hyperpod_does_not_know_is_closed_as_skipped_with_the_reason(world):
    event = alarm_event()
    event["detail"]["alarmContributor"]["attributes"]["InstanceId"] = "i-0123456789abcdef0"

    result = open_(world, event)

    incident = world.incident(result["incident_id"])
    assert result["action"] == "skipped"
    assert incident.state is IncidentState.SKIPPED
    assert incident.closed_at is not None
    entry = world.audit.entries(result["incident_id"])[0]
    assert entry.action == "incident_skipped"
    assert "not a node of cluster" in entry.details["reason"]
    assert world.workflow.executions == {}


def test_a_skipped_instance_takes_no_lock(world):
    event = alarm_event()
    event["detail"]["alarmContributor"]["attributes"]["InstanceId"] = "i-0123456789abcdef0"

    open_(world, event)

    assert world.store.locks == {}


def test_a_redelivered_skipped_event_answers_skipped_again(world):
    event = alarm_event()
    event["detail"]["alarmContributor"]["attributes"]["InstanceId"] = "i-0123456789abcdef0"
    first = open_(world, event)

    again = open_(world, copy.deepcopy(event))

    assert again == first
    assert len(world.audit.entries(first["incident_id"])) == 1


def test_an_unknown_cluster_is_skipped(world):
    world.settings = settings(allowed_clusters=frozenset({"ghost"}))
    event = alarm_event()
    event["detail"]["alarmContributor"]["attributes"]["ClusterName"] = "ghost"

    assert open_(world, event)["action"] == "skipped"


def test_the_latest_stored_report_is_attached_as_evidence(world):
    world.store_fixture_report()

    incident_id = open_(world)["incident_id"]

    reports = [e for e in world.incident(incident_id).evidence if e["kind"] == "report"]
    assert [r["report_id"] for r in reports] == ["r-5f3c9a1e2b7d4c60"]
    assert reports[0]["ranks"] == [13]
    assert world.audit.entries(incident_id)[0].details["report_id"] == "r-5f3c9a1e2b7d4c60"


def test_a_throttled_hyperpod_call_is_audited_under_the_event_and_raised(world):
    world.hyperpod.fail_next("DescribeClusterNode", Throttled("slow down", request_id="req-9"))

    with pytest.raises(Throttled):
        open_(world)

    entry = world.audit.entries(ids.event_subject(FIXTURE_EVENT_ID))[0]
    assert entry.action == "open_failed"
    assert entry.request_ids == ["req-9"]
    assert world.store.incidents == {}


def test_a_failed_start_keeps_the_incident_open_and_visible_and_a_retry_starts_it(world):
    world.workflow.fail_next_start = Throttled("sfn throttled", request_id="sfn-x")

    with pytest.raises(Throttled):
        open_(world)
    incident_id = next(iter(world.store.incidents))
    assert world.incident(incident_id).error.details["type"] == "Throttled"
    assert world.audit.actions(incident_id)[-1] == "execution_start_failed"

    retry = open_(world)

    assert retry == {"incident_id": incident_id, "action": "attached"}
    assert list(world.workflow.executions) == [incident_id]
    assert world.incident(incident_id).error is None


def test_without_a_state_machine_arn_nothing_is_opened(world):
    world.settings = settings(state_machine_arn=None)

    with pytest.raises(SettingsError):
        open_(world)

    assert world.store.incidents == {}


def test_after_an_incident_closes_a_new_alarm_opens_a_new_incident(world):
    first = open_(world)["incident_id"]
    world.store.release_lock(CLUSTER, INSTANCE, first)
    world.store.release_slot(CLUSTER, first)
    later = redelivered("later-event")
    later["detail"]["state"]["timestamp"] = "2026-11-30T10:00:00.000+0000"

    result = open_(world, later)

    assert result["action"] == "opened"
    assert result["incident_id"] != first


# -- store report -------------------------------------------------------------------------------


def report_event():
    return copy.deepcopy(load_fixture("events", "sdc_report"))


def store(world: World, event=None):
    return intake.store_report(parse_report_event(event or report_event()), world.deps)


def test_a_report_is_stored_under_each_instance_it_names(world):
    result = store(world)

    assert (result["report_id"], result["stored"]) == ("r-5f3c9a1e2b7d4c60", True)
    (stored,) = world.store.recent_reports(CLUSTER, INSTANCE, 5)
    assert stored.report_id == "r-5f3c9a1e2b7d4c60"


def test_a_redelivered_report_is_not_stored_twice(world):
    store(world)

    assert store(world)["stored"] is False


def test_a_report_for_an_instance_with_an_open_incident_attaches_to_it(world):
    incident_id = open_(world)["incident_id"]

    store(world)

    assert world.audit.actions(incident_id)[-1] == "evidence_attached"
    assert [e["kind"] for e in world.incident(incident_id).evidence] == ["alarm", "report"]


def test_a_report_from_a_cluster_outside_allowed_clusters_is_not_stored(world):
    event = report_event()
    event["detail"]["cluster_name"] = "other-cluster"

    assert store(world, event)["stored"] is False
    assert world.store.reports == {}
    assert world.audit.actions(ids.event_subject(event["id"])) == ["report_ignored"]


def test_a_report_naming_no_instance_is_not_stored_but_audited(world):
    event = report_event()
    event["detail"]["instances"] = []

    assert store(world, event)["stored"] is False
    entry = world.audit.entries(ids.event_subject(event["id"]))[0]
    assert entry.details["reason"] == "the report names no instance"


# -- malformed events ---------------------------------------------------------------------------


BAD_TIMES = [
    "9999-12-31T23:59:59-12:00",  # cannot be moved to UTC: OverflowError
    "0001-01-01T00:00:00+14:00",
    "1970-01-01T00:00:00Z",
    "2999-01-01T00:00:00Z",
    "2026-13-01T00:00:00Z",
]


@pytest.mark.parametrize("at", BAD_TIMES)
def test_a_report_whose_emitted_at_does_not_read_as_a_time_is_refused_naming_it(world, at):
    event = copy.deepcopy(load_fixture("events", "sdc_report"))
    event["detail"]["emitted_at"] = at
    with pytest.raises(MalformedEvent, match=r"detail\.emitted_at") as err:
        parse_report_event(event)

    intake.refuse(event, err.value, "store_report", world.deps)

    (entry,) = world.deps.audit.entries(ids.event_subject(event["id"]))
    assert (entry.action, entry.details["field"]) == ("event_refused", "detail.emitted_at")


@pytest.mark.parametrize("at", BAD_TIMES)
@pytest.mark.parametrize(
    "field",
    [
        "detail.state.timestamp",
        "detail.muteDetail.muteWindowStart",
        "detail.muteDetail.muteWindowEnd",
    ],
)
def test_an_alarm_whose_time_does_not_read_is_refused_naming_the_field(world, at, field):
    event = copy.deepcopy(load_fixture("events", "contributor_alarm_muted"))
    *parents, key = field.split(".")[1:]
    target = event["detail"]
    for parent in parents:
        target = target[parent]
    target[key] = at
    with pytest.raises(MalformedEvent) as err:
        parse_contributor_event(event)

    intake.refuse(event, err.value, "open_incident", world.deps)

    (entry,) = world.deps.audit.entries(ids.event_subject(event["id"]))
    assert (entry.action, entry.details["field"]) == ("event_refused", field)


def test_a_refused_event_is_audited_under_its_id_naming_the_field(world):
    event = alarm_event()
    del event["detail"]["alarmContributor"]["attributes"]["InstanceId"]
    with pytest.raises(MalformedEvent, match="InstanceId") as err:
        parse_contributor_event(event)

    intake.refuse(event, err.value, "open_incident", world.deps)

    (entry,) = world.deps.audit.entries(ids.event_subject(event["id"]))
    assert entry.action == "event_refused"
    assert entry.details["field"] == "detail.alarmContributor.attributes.InstanceId"
    assert entry.details["source"] == "aws.cloudwatch"
