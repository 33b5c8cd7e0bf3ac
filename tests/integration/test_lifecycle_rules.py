"""The lifecycle events through EventBridge on moto: the adapter puts each state change on the
default bus, and the example rules of docs/operate.md ("Incident lifecycle events"), deployed as
written, route exactly the events they say they route."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from sdc_remediation.infra.local.memory import RecordingLifecycleEvents
from sdc_remediation.lambdas.adapters.events import EventBridgeLifecycleEvents
from sdc_remediation.lambdas.logic import closing, recovery
from sdc_remediation.lambdas.models.errors import DependencyFailed
from sdc_remediation.lambdas.models.lifecycle_event import (
    LIFECYCLE_DETAIL_TYPE,
    LIFECYCLE_SOURCE,
    SCHEMA_FILE,
    IncidentStateChange,
)
from sdc_remediation.lambdas.models.payloads import CloseRequest, IncidentRef, Outcome
from tests.integration.conftest import SESSION
from tests.unit.world import World

ROOT = Path(__file__).resolve().parents[2]
RULES = ("pagerduty", "opsgenie", "ticket")


def documented_patterns() -> dict[str, dict]:
    """The example rules' patterns, in the order docs/operate.md shows them."""
    text = (ROOT / "docs" / "operate.md").read_text()
    section = text.split("## Incident lifecycle events", 1)[1].split("\n## ", 1)[0]
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", section, re.S)]
    assert len(blocks) == len(RULES), "one example rule each for PagerDuty, Opsgenie, tickets"
    return dict(zip(RULES, blocks, strict=True))


class ToEventBridge(RecordingLifecycleEvents):
    """Records each change and puts it through the adapter."""

    def __init__(self, adapter: EventBridgeLifecycleEvents) -> None:
        super().__init__()
        self.adapter = adapter

    def publish(self, change: IncidentStateChange) -> str | None:
        super().publish(change)
        return self.adapter.publish(change)


@pytest.fixture
def routed(aws_env):
    """Each documented rule on the default bus, with an SQS queue as its target."""
    events, sqs = SESSION.client("events"), SESSION.client("sqs")
    queues = {}
    for name, pattern in documented_patterns().items():
        url = sqs.create_queue(QueueName=f"rule-{name}")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        events.put_rule(Name=f"sdc-{name}", EventPattern=json.dumps(pattern))
        events.put_targets(Rule=f"sdc-{name}", Targets=[{"Id": "queue", "Arn": arn}])
        queues[name] = url
    return queues


def received(url: str) -> list[dict]:
    sqs = SESSION.client("sqs")
    found = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        for message in batch:
            found.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return found


def replaced_on_eventbridge() -> str:
    world = World()
    world.lifecycle = ToEventBridge(
        EventBridgeLifecycleEvents("default", lambda: SESSION.client("events"))
    )
    incident_id = world.decided("approve")
    ref = IncidentRef(incident_id)
    recovery.replace_node(ref, world.deps)
    while not recovery.check_replacement(ref, world.deps)["done"]:
        pass
    closing.close_incident(CloseRequest(incident_id, Outcome.REPLACED, None), world.deps)
    return incident_id


def test_an_incidents_life_reaches_eventbridge_as_schema_valid_events_in_order(routed):
    incident_id = replaced_on_eventbridge()

    everything = received(routed["opsgenie"])

    schema = json.loads((ROOT / SCHEMA_FILE).read_text())
    for event in everything:
        assert (event["source"], event["detail-type"]) == (LIFECYCLE_SOURCE, LIFECYCLE_DETAIL_TYPE)
        jsonschema.Draft202012Validator(schema).validate(event["detail"])
    ordered = sorted((e["detail"] for e in everything), key=lambda d: d["sequence"])
    assert [d["incident_id"] for d in ordered] == [incident_id] * 5
    assert [d["new_state"] for d in ordered] == [
        "opened",
        "health_check",
        "awaiting_approval",
        "replacing",
        "replaced",
    ]


def test_the_pagerduty_rule_pages_only_when_a_human_must_decide(routed):
    replaced_on_eventbridge()

    paged = received(routed["pagerduty"])

    assert [e["detail"]["new_state"] for e in paged] == ["awaiting_approval"]


def test_the_ticket_rule_opens_a_ticket_only_for_the_replaced_node(routed):
    incident_id = replaced_on_eventbridge()

    tickets = received(routed["ticket"])

    assert [(e["detail"]["incident_id"], e["detail"]["new_state"]) for e in tickets] == [
        (incident_id, "replaced")
    ]


def test_an_event_the_bus_does_not_accept_is_a_dependency_failure(aws_env):
    adapter = EventBridgeLifecycleEvents("no-such-bus", lambda: SESSION.client("events"))
    change = IncidentStateChange(
        "sdc-1",
        "c",
        "i-0abc1234def567890",
        None,
        "opened",
        False,
        "2026-11-30T08:15:04+00:00",
        1,
        links={"show": "sdc show sdc-1"},
    )

    with pytest.raises(DependencyFailed):
        adapter.publish(change)
