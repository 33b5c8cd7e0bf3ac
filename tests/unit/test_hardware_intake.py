"""Hardware alerts in: each alert of the workspace's alert manager is a claim like a report's.
Its node is acted on only when HyperPod knows the instance as a node of the notification's
cluster (and Kubernetes, where configured, finds it by providerID under the alert's node name);
it opens or joins the one incident per (cluster, instance) through the same opening as an
alarm; a resolved alert is recorded and closes nothing; a malformed one is refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sdc_remediation.lambdas.logic import intake
from sdc_remediation.lambdas.logic.evidence.recommendation import recommend
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.errors import MalformedEvent
from sdc_remediation.lambdas.models.evidence import TriggerSource, evidence_of
from sdc_remediation.lambdas.models.hardware_alert import MESSAGE_VERSION, parse_alert_notification
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.recommendation import Advice
from sdc_remediation.lambdas.models.settings import IsolationConfig
from tests.unit.world import CLUSTER, EKS, INSTANCE, World, settings
from tests.unit.world import NODE as KUBE_NODE
from trainer_emitter.contract import Check

NODE = f"hyperpod-{INSTANCE}"
OTHER_CLUSTER = "ml-cluster-2"
OTHER_INSTANCE = "i-0fedcba9876543210"


def alert(
    *,
    status: str = "firing",
    rule: str = "hardware_throttling",
    severity: str = "warning",
    node: str = NODE,
    cluster: str = CLUSTER,
    fingerprint: str = "5c1e0a9b2d3f4e51",
    **labels: str,
) -> dict[str, Any]:
    return {
        "status": status,
        "labels": {
            "alertname": "GpuHardwareThrottling",
            "cluster": cluster,
            "node": node,
            "gpu": "3",
            "gpu_uuid": "GPU-f3f3f3f3-5a1e-4c1d-9e7b-000000000003",
            "rule": rule,
            "severity": severity,
            **labels,
        },
        "annotations": {"summary": "The hardware held the GPU's clocks down."},
        "startsAt": "2026-12-05T11:02:00Z",
        "fingerprint": fingerprint,
    }


def sns_event(*alerts: dict[str, Any], cluster: str = CLUSTER, message_id: str = "m-1") -> Any:
    message = {"version": MESSAGE_VERSION, "status": "firing", "alerts": list(alerts)}
    return {
        "Records": [
            {
                "EventSource": "aws:sns",
                "Sns": {
                    "MessageId": message_id,
                    "TopicArn": "arn:aws:sns:us-west-2:111122223333:HardwareAlertTopic",
                    "Subject": "SDC hardware alert: firing (1)",
                    "Message": json.dumps(message),
                    "MessageAttributes": {"cluster": {"Type": "String", "Value": cluster}},
                },
            }
        ]
    }


def deliver(world: World, event: Any) -> list[Any]:
    return intake.hardware_alerts(parse_alert_notification(event), world.deps)


def test_a_firing_alert_opens_the_nodes_incident_with_the_alert_as_evidence(world):
    (result,) = deliver(world, sns_event(alert()))

    incident = world.incident(result["incident_id"])
    assert result["action"] == "opened"
    assert (incident.cluster_name, incident.instance_id) == (CLUSTER, INSTANCE)
    assert incident.state is IncidentState.OPENED
    (item,) = [e for e in incident.evidence if e["kind"] == TriggerSource.HARDWARE]
    assert (item["rule"], item["status"], item["node_name"]) == (
        "hardware_throttling",
        "firing",
        NODE,
    )
    assert list(world.workflow.executions) == [result["incident_id"]]
    assert len(incident.guard_slots) == 1


def test_more_alerts_for_the_node_join_its_one_incident(world):
    (first,) = deliver(world, sns_event(alert()))
    (second,) = deliver(
        world,
        sns_event(alert(rule="row_remap_failure", fingerprint="77aa"), message_id="m-2"),
    )

    assert second == {"incident_id": first["incident_id"], "action": "attached"}
    rules = [e["rule"] for e in world.incident(first["incident_id"]).evidence]
    assert rules == ["hardware_throttling", "row_remap_failure"]
    assert len(world.workflow.executions) == 1


def test_a_resolved_alert_is_recorded_on_the_open_incident_and_closes_nothing(world):
    (opened,) = deliver(world, sns_event(alert()))

    (result,) = deliver(world, sns_event(alert(status="resolved"), message_id="m-2"))

    incident = world.incident(opened["incident_id"])
    assert result["action"] == "attached"
    assert incident.state is IncidentState.OPENED
    assert [e["status"] for e in incident.evidence] == ["firing", "resolved"]


def test_a_resolved_alert_without_an_incident_is_audited_and_opens_none(world):
    assert deliver(world, sns_event(alert(status="resolved"))) == []

    assert world.store.open_incident_id(CLUSTER, INSTANCE) is None
    (entry,) = world.audit.entries("event#sns-m-1")
    assert entry.action == AuditAction.EVENT_IGNORED
    assert "closes no incident" in entry.details["reason"]


def test_a_forged_alert_naming_a_node_of_another_cluster_acts_on_nothing(world):
    world.hyperpod.add_cluster(OTHER_CLUSTER, instance_groups=["workers"])
    world.hyperpod.add_node(OTHER_CLUSTER, "workers", OTHER_INSTANCE)
    world.settings = settings(allowed_clusters=frozenset({CLUSTER, OTHER_CLUSTER}))

    (result,) = deliver(world, sns_event(alert(node=f"hyperpod-{OTHER_INSTANCE}")))

    assert result["action"] == "skipped"
    assert world.workflow.executions == {}
    assert world.store.open_incident_id(CLUSTER, OTHER_INSTANCE) is None
    assert world.store.open_incident_id(OTHER_CLUSTER, OTHER_INSTANCE) is None
    assert world.incident(result["incident_id"]).state is IncidentState.SKIPPED


def test_an_alert_whose_label_names_another_cluster_than_its_workspace_is_refused(world):
    with pytest.raises(MalformedEvent, match=r"labels\.cluster"):
        deliver(world, sns_event(alert(cluster=OTHER_CLUSTER)))

    (entry,) = world.audit.entries("event#sns-m-1")
    assert entry.action == AuditAction.EVENT_REFUSED
    assert world.workflow.executions == {}


def test_kubernetes_naming_the_instances_node_otherwise_keeps_the_alert_from_acting():
    world = World(
        eks_cluster=EKS,
        settings=settings(node_isolation={CLUSTER: IsolationConfig(isolate=True, eks_cluster=EKS)}),
    )

    (result,) = deliver(world, sns_event(alert()))

    # the world's Kubernetes finds INSTANCE by providerID as ip-10-1-17-42…, not hyperpod-…
    assert result["action"] == "skipped"
    assert world.workflow.executions == {}
    assert "Kubernetes does not confirm the hardware" in json.dumps(
        [e.details for e in world.audit.entries(result["incident_id"])]
    )


def isolating_world() -> World:
    return World(
        eks_cluster=EKS,
        settings=settings(node_isolation={CLUSTER: IsolationConfig(isolate=True, eks_cluster=EKS)}),
    )


def test_a_node_named_otherwise_is_resolved_by_kubernetes_through_its_provider_id():
    world = isolating_world()

    (result,) = deliver(world, sns_event(alert(node=KUBE_NODE)))

    assert result["action"] == "opened"
    assert world.incident(result["incident_id"]).instance_id == INSTANCE
    assert ("find_node_named", EKS, KUBE_NODE) in world.kube.calls


def test_a_node_name_kubernetes_does_not_know_acts_on_nothing():
    world = isolating_world()

    assert deliver(world, sns_event(alert(node="ip-10-1-99-9.us-west-2.compute.internal"))) == []

    (entry,) = world.audit.entries("event#sns-m-1")
    assert entry.action == AuditAction.EVENT_IGNORED
    assert world.workflow.executions == {}


def test_an_alert_whose_node_name_holds_no_instance_is_audited_and_acts_on_nothing(world):
    assert deliver(world, sns_event(alert(node="ip-10-1-17-42.us-west-2.compute.internal"))) == []

    (entry,) = world.audit.entries("event#sns-m-1")
    assert entry.action == AuditAction.EVENT_IGNORED
    assert world.workflow.executions == {}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda e: e["Records"][0]["Sns"].update(Message="not json"), "Sns.Message"),
        (
            lambda e: e["Records"][0]["Sns"].update(MessageAttributes={}),
            "Sns.MessageAttributes.cluster",
        ),
        (
            lambda e: e["Records"][0]["Sns"].update(
                Message=json.dumps({"version": "other/1", "alerts": [alert()]})
            ),
            "Sns.Message.version",
        ),
        (
            lambda e: e["Records"][0]["Sns"].update(
                Message=json.dumps({"version": MESSAGE_VERSION, "alerts": [alert(rule="nope")]})
            ),
            "Sns.Message.alerts[0].labels",
        ),
        (
            lambda e: e["Records"][0]["Sns"].update(
                Message=json.dumps(
                    {"version": MESSAGE_VERSION, "alerts": [alert(node='x", "cluster": "y')]}
                )
            ),
            "Sns.Message.alerts[0].labels.node",
        ),
    ],
)
def test_a_malformed_notification_names_its_bad_field(change, field):
    event = sns_event(alert())
    change(event)

    with pytest.raises(MalformedEvent) as raised:
        parse_alert_notification(event)

    assert raised.value.field == field


# -- the decision table's hardware rows ----------------------------------------------------------


def hardware_item(rule: str = "hardware_throttling", severity: str = "warning", start: str = "t1"):
    return evidence_of(
        {
            "kind": "hardware",
            "key": f"hardware:{rule}:{start}",
            "node_name": "ip-10-1-69-242",
            "status": "firing",
            "rule": rule,
            "severity": severity,
            "starts_at": start,
        }
    )


def test_a_hardware_signal_alone_recommends_a_reboot_after_the_health_check():
    judged = recommend([], None, alerts=[hardware_item()])

    assert judged.advice is Advice.REBOOT
    assert "a hardware signal alone: reboot, replace on a repeat" in judged.reasons


@pytest.mark.parametrize("rule", ["row_remap_failure", "uncorrectable_ecc"])
def test_memory_that_cannot_repair_itself_recommends_a_replacement(rule):
    judged = recommend([], None, alerts=[hardware_item(rule, "critical")])

    assert judged.advice is Advice.REPLACE


def test_a_hardware_signal_that_fires_again_or_on_a_node_with_history_recommends_replacing():
    again = recommend([], None, alerts=[hardware_item(start="t1"), hardware_item(start="t2")])
    history = recommend(
        [], None, ["sdc-ml-cluster-1-i-0abc-20261101T000000"], alerts=[hardware_item()]
    )

    assert again.advice is Advice.REPLACE
    assert history.advice is Advice.REPLACE


def test_sdc_evidence_and_a_hardware_signal_on_the_node_is_one_tier_stronger_and_says_so():
    ambiguous = evidence_of(
        {"kind": "report", "key": "report:1", "check": Check.REDUCED_GRADIENT.value, "ranks": [3]}
    )

    alone = recommend([ambiguous], None)
    both = recommend([ambiguous], None, alerts=[hardware_item()])

    assert alone.advice is Advice.HEALTH_CHECK_ONLY
    assert both.advice is Advice.REBOOT
    assert any("SDC evidence and a hardware signal" in r for r in both.reasons)


def test_a_resolved_alert_is_no_signal(world):
    (opened,) = deliver(world, sns_event(alert()))
    deliver(world, sns_event(alert(status="resolved"), message_id="m-2"))

    incident = world.incident(opened["incident_id"])
    assert [e.status for e in incident.hardware] == ["firing"]
