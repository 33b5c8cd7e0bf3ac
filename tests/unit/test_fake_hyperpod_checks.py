"""The fake HyperPod's deep health checks as the idle sweep uses them: one call for several
instance groups, a chosen check failing on a chosen node (and only that check), the node's
status message naming it, the watchers told when a check starts and ends, and ListClusterNodes
looking without progressing anything."""

from __future__ import annotations

import pytest

from sdc_remediation.infra.local.fake_hyperpod import FakeHyperPod
from sdc_remediation.lambdas.models.errors import DependencyFailed
from sdc_remediation.lambdas.models.hyperpod import HealthCheck, NodeStatus

CLUSTER = "ml-cluster-1"


def cluster() -> FakeHyperPod:
    hyperpod = FakeHyperPod(health_check_polls=1)
    hyperpod.add_cluster(CLUSTER, instance_groups=["a", "b"])
    hyperpod.add_node(CLUSTER, "a", "i-01")
    hyperpod.add_node(CLUSTER, "a", "i-02")
    hyperpod.add_node(CLUSTER, "b", "i-03")
    return hyperpod


def test_one_call_checks_the_nodes_of_several_groups():
    hyperpod = cluster()

    hyperpod.start_health_checks(
        CLUSTER, {"a": ["i-01", "i-02"], "b": ["i-03"]}, ["InstanceConnectivity"]
    )

    (call,) = hyperpod.calls_to("StartClusterHealthCheck")
    assert [c["InstanceGroupName"] for c in call["DeepHealthCheckConfigurations"]] == ["a", "b"]
    assert {n.status for n in hyperpod.clusters[CLUSTER].nodes.values()} == {
        NodeStatus.DEEP_HEALTH_CHECK_IN_PROGRESS.value
    }


def test_a_node_fails_the_check_it_is_set_to_fail_and_its_message_names_it():
    hyperpod = cluster()
    hyperpod.fail_check(CLUSTER, "i-01", HealthCheck.INSTANCE_CONNECTIVITY)
    hyperpod.start_health_checks(CLUSTER, {"a": ["i-01", "i-02"]}, ["InstanceConnectivity"])

    hyperpod.advance(2)

    failed, passed = (
        hyperpod.describe_node(CLUSTER, "i-01"),
        hyperpod.describe_node(CLUSTER, "i-02"),
    )
    assert failed.status == NodeStatus.FAILURE and "InstanceConnectivity" in (failed.message or "")
    assert passed.status == NodeStatus.RUNNING


def test_a_node_set_to_fail_connectivity_passes_a_stress_check():
    hyperpod = cluster()
    hyperpod.fail_check(CLUSTER, "i-01", HealthCheck.INSTANCE_CONNECTIVITY)
    hyperpod.start_health_checks(CLUSTER, {"a": ["i-01"]}, ["InstanceStress"])

    hyperpod.advance(2)

    assert hyperpod.describe_node(CLUSTER, "i-01").status == NodeStatus.RUNNING


def test_watchers_are_told_when_a_check_starts_and_ends():
    hyperpod = cluster()
    told: list[tuple[str, bool]] = []
    hyperpod.check_watchers.append(
        lambda _, node, running: told.append((node.instance_id, running))
    )

    hyperpod.start_health_checks(CLUSTER, {"b": ["i-03"]}, ["InstanceConnectivity"])
    hyperpod.advance(2)

    assert told == [("i-03", True), ("i-03", False)]


def test_listing_nodes_progresses_nothing():
    hyperpod = cluster()
    hyperpod.start_health_checks(CLUSTER, {"b": ["i-03"]}, ["InstanceConnectivity"])

    for _ in range(5):
        listed = {n.instance_id: n.status for n in hyperpod.list_nodes(CLUSTER)}

    assert listed["i-03"] == NodeStatus.DEEP_HEALTH_CHECK_IN_PROGRESS


def test_a_node_that_is_not_running_refuses_the_whole_call():
    hyperpod = cluster()
    hyperpod.start_health_checks(CLUSTER, {"b": ["i-03"]}, ["InstanceConnectivity"])

    with pytest.raises(DependencyFailed, match="not Running"):
        hyperpod.start_health_checks(CLUSTER, {"a": ["i-01"], "b": ["i-03"]}, ["InstanceStress"])

    assert hyperpod.describe_node(CLUSTER, "i-01").status == NodeStatus.RUNNING
