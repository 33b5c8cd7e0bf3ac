"""At-least-once delivery and alarm storms: the same contributor ten times is one incident; a
hundred instances flagged in a minute on a 128-node cluster replace nothing and notify once."""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from infra.local.run import LocalRun, default_cluster
from lambdas.handlers import close_incident, open_incident, start_health_check
from tests.conftest import load_fixture
from tests.faults.figures import record
from tests.integration.conftest import CLUSTER, GROUP, Aws, invoke

STORM_START = datetime(2026, 11, 30, 8, 15, 0, tzinfo=UTC)
METRIC_ALARMS = ("sdc-replay-mismatch", "sdc-nonfinite-grad", "sdc-divergent-tensors")


def contributor(instance_id: str, *, second: int = 0, alarm: str = METRIC_ALARMS[0]) -> dict:
    event = copy.deepcopy(load_fixture("events", "contributor_alarm"))
    event["id"] = str(uuid.uuid4())
    event["detail"]["alarmName"] = alarm
    event["detail"]["alarmContributor"]["attributes"] = {
        "ClusterName": CLUSTER,
        "InstanceId": instance_id,
    }
    at = STORM_START + timedelta(seconds=second)
    event["detail"]["state"]["timestamp"] = at.strftime("%Y-%m-%dT%H:%M:%S.000+0000")
    return event


def node(n: int) -> str:
    return f"i-0f{n:015x}"


def kinds(messages: list[dict[str, Any]]) -> list[str]:
    return [m["MessageAttributes"]["kind"]["Value"] for m in messages]


# -- duplicates -----------------------------------------------------------------------------------


def test_the_same_contributor_event_ten_times_is_one_incident_and_one_execution(aws):
    event = load_fixture("events", "contributor_alarm")

    results = [invoke(open_incident, event) for _ in range(10)]

    assert [r["action"] for r in results] == ["opened"] + ["attached"] * 9
    assert len(aws.items("INCIDENT#")) == 1
    assert len(aws.executions()) == 1
    record("duplicates", "same event x10 → 1 incident")


def test_ten_events_for_the_same_contributor_attach_to_one_incident(aws):
    instance_id = load_fixture("events", "contributor_alarm")["detail"]["alarmContributor"][
        "attributes"
    ]["InstanceId"]
    events = [contributor(instance_id, second=n, alarm=METRIC_ALARMS[n % 3]) for n in range(10)]

    results = [invoke(open_incident, e) for e in events]

    assert len({r["incident_id"] for r in results}) == 1
    incident = aws.incident(results[0]["incident_id"])
    assert len(incident.evidence) == 10
    assert sorted(incident.metrics) == sorted(m.replace("-", "_") for m in METRIC_ALARMS)
    assert len(aws.executions()) == 1
    record("duplicates", "10 events, one contributor → 1 incident")


# -- a storm on a 128-node cluster ----------------------------------------------------------------


@pytest.fixture
def big_cluster(aws: Aws) -> Aws:
    for n in range(127):  # plus the fixture's own node: 128
        aws.hyperpod.add_node(CLUSTER, GROUP, node(n))
    return aws


def test_a_storm_of_100_instances_in_a_minute_replaces_nothing_and_notifies_once(big_cluster):
    aws = big_cluster
    results = [
        invoke(open_incident, contributor(node(n), second=(n * 60) // 100)) for n in range(100)
    ]
    opened = [r["incident_id"] for r in results if r["action"] == "opened"]

    for incident_id in opened:  # what their executions do next
        step = invoke(start_health_check, {"incident_id": incident_id})
        assert step["held"] is True
        invoke(close_incident, {"incident_id": incident_id, "outcome": "held", "error": None})

    actions = [r["action"] for r in results]
    assert actions.count("held") == 100 - len(opened)
    assert aws.hyperpod.calls_to("BatchReplaceClusterNodes") == []
    assert aws.hyperpod.calls_to("StartClusterHealthCheck") == []
    notices = kinds(aws.messages())
    assert notices == ["storm_hold"]
    assert all(aws.incident(i).state == "held" for i in opened)
    figure = "storm, 100 instances / 128 nodes (handlers)"
    record(figure, "opened, then held at their health check", len(opened))
    record(figure, "held at once", actions.count("held"))
    record(figure, "replacements requested", 0)
    record(figure, "held notifications", len(notices))


@pytest.mark.slow
def test_through_the_deployed_stack_a_storm_replaces_nothing_and_notifies_once():
    hyperpod = default_cluster([node(n) for n in range(128)])
    with LocalRun.open(hyperpod=hyperpod) as run:
        results = []
        for n in range(100):
            (delivery,) = run.put_event(contributor(node(n), second=(n * 60) // 100))
            assert delivery.ok, delivery.response
            results.append(delivery.response)
        opened = [r["incident_id"] for r in results if r["action"] == "opened"]

        finals = [run.wait_for(i, "held", "awaiting_approval", timeout=60) for i in opened]
        hold_notice = run.wait_for_notification("storm")

        assert run.hyperpod.calls_to("BatchReplaceClusterNodes") == []
        held_notices = [
            n for n in run.inbox if n["attributes"].get("kind") in ("held", "storm_hold")
        ]
        assert held_notices == [hold_notice]
        assert [r["action"] for r in results].count("held") == 100 - len(opened)
        assert {f.state.value for f in finals} <= {"held", "awaiting_approval"}
        figure = "storm, 100 instances / 128 nodes (state machine)"
        record(figure, "replacements requested", 0)
        record(figure, "held notifications", len(held_notices))
