"""Which path carries out an approved reboot or replacement: the HyperPod API (default), or on a
cluster that opts in, HyperPod's own recovery through the node health label; the audit records
the path and why."""

from __future__ import annotations

import pytest

from sdc_remediation.lambdas.logic import recovery
from sdc_remediation.lambdas.models.errors import KubernetesUnauthorized
from sdc_remediation.lambdas.models.hyperpod import NodeRecovery
from sdc_remediation.lambdas.models.kubernetes import NODE_HEALTH_LABEL
from sdc_remediation.lambdas.models.payloads import IncidentRef
from sdc_remediation.lambdas.models.settings import IsolationConfig, Settings
from tests.unit.world import CLUSTER, EKS, NODE, World, settings

LABELLED = {CLUSTER: IsolationConfig(isolate=True, eks_cluster=EKS, recovery="node_label")}


def labelled_world(node_recovery: str = NodeRecovery.AUTOMATIC.value) -> World:
    world = World(eks_cluster=EKS, settings=settings(node_isolation=LABELLED))
    world.hyperpod.clusters[CLUSTER].node_recovery = node_recovery
    return world


def decided(world: World, decision: str) -> str:
    """Opened, isolated, health-checked, asked and decided: the path isolation finds the node on."""
    return world.decided(decision, isolated=True)


def last_request(world: World, incident_id: str, action: str) -> dict:
    (entry,) = [e for e in world.audit.entries(incident_id) if e.action == action]
    return entry.details


def test_an_opted_in_automatic_cluster_gets_its_reboot_through_the_node_health_label():
    world = labelled_world()
    incident_id = decided(world, "reboot")

    assert recovery.reboot_node(IncidentRef(incident_id), world.deps) == {"status": "requested"}

    assert world.hyperpod.calls_to("BatchRebootClusterNodes") == []
    labels = world.kube.node(EKS, NODE)["labels"]
    assert labels == {NODE_HEALTH_LABEL: "UnschedulablePendingReboot"}
    details = last_request(world, incident_id, "reboot_requested")
    assert details["path"] == "node_label"
    assert details["label"] == f"{NODE_HEALTH_LABEL}=UnschedulablePendingReboot"
    assert world.incident(incident_id).reboot.path == "node_label"


def test_an_opted_in_automatic_cluster_gets_its_replacement_through_the_node_health_label():
    world = labelled_world()
    incident_id = decided(world, "approve")

    assert recovery.replace_node(IncidentRef(incident_id), world.deps) == {"status": "requested"}

    assert world.hyperpod.calls_to("BatchReplaceClusterNodes") == []
    assert world.kube.node(EKS, NODE)["labels"] == {
        NODE_HEALTH_LABEL: "UnschedulablePendingReplacement"
    }
    assert last_request(world, incident_id, "replacement_requested")["path"] == "node_label"


def test_without_automatic_node_recovery_the_label_would_be_ignored_so_the_api_acts():
    world = labelled_world(NodeRecovery.NONE.value)
    incident_id = decided(world, "reboot")

    recovery.reboot_node(IncidentRef(incident_id), world.deps)

    assert len(world.hyperpod.calls_to("BatchRebootClusterNodes")) == 1
    assert "labels" not in world.kube.node(EKS, NODE)
    details = last_request(world, incident_id, "reboot_requested")
    assert details["path"] == "api"
    assert "not Automatic" in details["path_reason"]


def test_a_refused_label_is_audited_and_the_api_carries_the_decision_out():
    world = labelled_world()
    incident_id = decided(world, "reboot")
    world.kube.fail_next("label", KubernetesUnauthorized("nodes is forbidden", status=403))

    recovery.reboot_node(IncidentRef(incident_id), world.deps)

    assert len(world.hyperpod.calls_to("BatchRebootClusterNodes")) == 1
    actions = world.audit.actions(incident_id)
    assert actions[-2:] == ["node_label_failed", "reboot_requested"]
    assert last_request(world, incident_id, "reboot_requested")["path"] == "api"


def test_the_default_path_is_the_api_and_the_audit_says_so(world):
    incident_id = world.decided("reboot")

    recovery.reboot_node(IncidentRef(incident_id), world.deps)

    details = last_request(world, incident_id, "reboot_requested")
    assert (details["path"], len(world.hyperpod.calls_to("BatchRebootClusterNodes"))) == ("api", 1)


def test_node_isolation_settings_carry_the_recovery_path_and_refuse_an_unknown_one():
    base = {"INCIDENTS_TABLE": "i", "AUDIT_TABLE": "a", "TOPIC_ARN": "arn:aws:sns:x:1:t"}
    good = '{"c1": {"isolate": true, "eks_cluster": "e1", "recovery": "node_label"}}'

    loaded: Settings = Settings.from_env({**base, "NODE_ISOLATION": good})

    assert loaded.isolation_for("c1").recovery == "node_label"
    with pytest.raises(Exception, match="recovery 'labels'"):
        Settings.from_env(
            {**base, "NODE_ISOLATION": '{"c1": {"isolate": true, "recovery": "labels"}}'}
        )
