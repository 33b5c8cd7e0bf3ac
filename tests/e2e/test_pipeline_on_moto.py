"""End to end on moto: the synthesized stack, the deployed rule patterns and state machine
definitions, the real handlers in-process, a fake HyperPod. One behaviour per test.

The outcomes the drill's scenarios reach end to end (approved and replaced, rejected, expired,
delivered three times, replaced by HyperPod itself) are asserted in tests/e2e/test_drill.py;
these are the behaviours no scenario shows."""

from __future__ import annotations

import json

import pytest

from sdc_remediation.infra.local.run import LocalRun, default_cluster
from sdc_remediation.infra.stack.template import state_machine_definitions
from tests.conftest import load_fixture

pytestmark = [pytest.mark.slow, pytest.mark.synth]

CULPRIT_INSTANCE = "i-0bb00000000000002"


def in_order(steps: list[tuple[str, str]], expected: list[tuple[str, str]]) -> bool:
    """True when `expected` appears in `steps` in this order (other entries may sit between)."""
    remaining = iter(steps)
    return all(step in remaining for step in expected)


def contributor_event_for(instance_id: str) -> dict:
    event = load_fixture("events", "contributor_alarm")
    event["detail"]["alarmContributor"]["attributes"] = {
        "ClusterName": "ml-cluster-1",
        "InstanceId": instance_id,
    }
    return event


def open_from_fixture(run: LocalRun, instance_id: str = CULPRIT_INSTANCE) -> str:
    (delivery,) = run.put_event(contributor_event_for(instance_id))
    assert delivery.ok, delivery.response
    return str(delivery.response["incident_id"])


def trail(run: LocalRun, incident_id: str) -> list[tuple[str, str]]:
    return [(entry.actor.split(":")[0], entry.action) for entry in run.audit(incident_id)]


def opened_by_the_report(run: LocalRun) -> str:
    (report,) = [d for d in run.deliveries if "incidents" in (d.response or {})]
    (opened,) = report.response["incidents"]
    assert opened["action"] == "opened", report.response
    return str(opened["incident_id"])


def test_the_suspect_node_is_cordoned_while_approval_waits_and_uncordoned_on_reject():
    with LocalRun.open() as run:
        incident_id = open_from_fixture(run)
        run.wait_for(incident_id, "awaiting_approval")
        card = run.wait_for_notification("approve")["message"]
        (name,) = [
            n for n, node in run.kube_api.nodes.items()
            if node["spec"]["providerID"].endswith(CULPRIT_INSTANCE)
        ]  # fmt: skip
        during = run.kube_api.spec(name)

        run.decide(incident_id, "reject", "not the GPU")
        incident = run.wait_for(incident_id, "rejected")

        taint = f"sdc.remediation/incident={incident_id}:NoSchedule"
        assert during["unschedulable"] is True
        assert [f"{t['key']}={t['value']}:{t['effect']}" for t in during["taints"]] == [taint]
        assert f"cordoned and tainted {taint} on node {name}" in card
        assert "unschedulable" not in run.kube_api.spec(name)  # false: left out, as a server does
        assert not run.kube_api.spec(name).get("taints")
        assert incident.isolation.state == "released"
        assert in_order(
            trail(run, incident_id),
            [("isolate_node", "node_isolated"), ("close_incident", "node_released")],
        )


def test_a_second_decision_is_refused_and_audited():
    with LocalRun.open() as run:
        incident_id = open_from_fixture(run)
        run.wait_for(incident_id, "awaiting_approval")
        run.decide(incident_id, "reject", "not now")
        run.wait_for(incident_id, "rejected")

        second = run.decide(incident_id, "approve", "changed my mind")

        assert second["status"] == "FAILED"
        assert trail(run, incident_id)[-1][1].startswith("decision_refused")


def test_a_malformed_event_goes_to_the_dead_letter_queue_and_the_audit_log():
    with LocalRun.open() as run:
        event = load_fixture("events", "contributor_alarm")
        del event["detail"]["alarmContributor"]["attributes"]["InstanceId"]

        (delivery,) = run.put_event(event)

        assert not delivery.ok and delivery.dead_lettered
        sqs = run.session.client("sqs")
        (queue,) = [
            q
            for q in run.stack.queues.values()
            if q["arn"] == run.stack.function_by_handler("open_incident").dead_letter_arn
        ]
        (message,) = sqs.receive_message(QueueUrl=queue["url"], MessageAttributeNames=["All"])[
            "Messages"
        ]
        assert json.loads(message["Body"])["id"] == event["id"]
        assert "InstanceId" in message["MessageAttributes"]["ERROR_MESSAGE"]["StringValue"]
        assert run.audit(f"event#{event['id']}"), "the refusal is in the audit log"


def test_the_definitions_that_run_are_byte_identical_to_the_synthesized_template():
    with LocalRun.open() as run:
        arns = {logical: fn.arn for logical, fn in run.stack.functions.items()}
        arns |= {logical: sm.arn for logical, sm in run.stack.state_machines.items()}
        expected = state_machine_definitions(run.stack.template, arns, region="us-west-2")
        client = run.session.client("stepfunctions")

        running = {
            logical: client.describe_state_machine(stateMachineArn=sm.arn)["definition"]
            for logical, sm in run.stack.state_machines.items()
        }

        assert running == expected


def test_a_report_naming_a_culprit_opens_the_incident_with_no_alarm_at_all():
    with LocalRun.open() as run:
        run.emitter(load_fixture("alarms", "rank_map")).report(
            load_fixture("alarms", "replay_culprit")
        )

        incident = run.wait_for(opened_by_the_report(run), "awaiting_approval")

        assert incident.instance_id == CULPRIT_INSTANCE
        assert not any(
            d.response.get("action") for d in run.deliveries if "action" in (d.response or {})
        )


def test_pausing_during_the_health_check_holds_the_incident_and_no_approval_card_goes_out():
    hyperpod = default_cluster()
    hyperpod.health_check_polls = 3  # a few polls: time to flip the switch mid-check
    with LocalRun.open(hyperpod=hyperpod) as run:
        incident_id = open_from_fixture(run)
        run.wait_for(incident_id, "health_check")
        run.session.client("ssm").put_parameter(
            Name=run.deps.settings.pause_parameter, Value="true", Type="String", Overwrite=True
        )

        incident = run.wait_for(incident_id, "held")

        assert incident.hold.kind == "paused"
        actions = [action for _, action in trail(run, incident_id)]
        assert "health_check_started" in actions
        assert "approval_requested" not in actions
        assert not [
            n for n in run.notifications() if n["attributes"].get("kind") == "approval_request"
        ]
