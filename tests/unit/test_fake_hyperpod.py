"""The project's fake HyperPod behaves the way the pipeline relies on (module docstring)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from sdc_remediation.infra.local.fake_hyperpod import ActionTimes, FakeHyperPod
from sdc_remediation.lambdas.models.errors import (
    ClusterNotFound,
    DependencyFailed,
    NodeNotFound,
    Throttled,
)
from sdc_remediation.lambdas.models.hyperpod import NodeRecovery

CLUSTER = "c1"


@pytest.fixture
def hp() -> FakeHyperPod:
    fake = FakeHyperPod(health_check_polls=1, replacement_polls=1)
    fake.add_cluster(CLUSTER, instance_groups=["workers"])
    return fake


def test_describe_cluster_reports_groups_and_node_recovery(hp):
    hp.add_cluster("auto", node_recovery=NodeRecovery.AUTOMATIC, instance_groups=["a", "b"])

    info = hp.describe_cluster("auto")

    assert info.node_recovery == "Automatic"
    assert info.instance_groups == ("a", "b")
    assert info.request_id


def test_unknown_cluster_is_cluster_not_found(hp):
    with pytest.raises(ClusterNotFound):
        hp.describe_cluster("nope")


def test_unknown_node_is_node_not_found(hp):
    with pytest.raises(NodeNotFound):
        hp.describe_node(CLUSTER, "i-0123456789abcdef0")


def test_a_passing_health_check_goes_in_progress_then_running(hp):
    node = hp.add_node(CLUSTER)
    hp.start_health_check(CLUSTER, "workers", [node], ["InstanceStress"])

    statuses = [hp.describe_node(CLUSTER, node).status for _ in range(3)]

    assert statuses == ["DeepHealthCheckInProgress", "Running", "Running"]


def test_a_failing_health_check_ends_in_failure_without_node_recovery(hp):
    node = hp.add_node(CLUSTER, health_check_passes=False)
    hp.start_health_check(CLUSTER, "workers", [node], ["InstanceStress"])

    hp.advance(2)

    assert hp.describe_node(CLUSTER, node).status == "Failure"


def test_a_failing_health_check_with_automatic_recovery_replaces_the_node(hp):
    hp.clusters[CLUSTER].node_recovery = NodeRecovery.AUTOMATIC
    node = hp.add_node(CLUSTER, health_check_passes=False)
    hp.start_health_check(CLUSTER, "workers", [node], ["InstanceStress"])

    hp.advance(4)

    with pytest.raises(NodeNotFound):
        hp.describe_node(CLUSTER, node)
    assert node in hp.replaced_by


def test_health_check_of_a_node_outside_the_group_is_refused(hp):
    node = hp.add_node(CLUSTER, "other")

    with pytest.raises(DependencyFailed, match="not in group"):
        hp.start_health_check(CLUSTER, "workers", [node], ["InstanceStress"])


def test_health_check_with_an_unknown_check_is_refused(hp):
    node = hp.add_node(CLUSTER)

    with pytest.raises(DependencyFailed, match="DeepHealthChecks"):
        hp.start_health_check(CLUSTER, "workers", [node], ["GpuBurn"])


def test_a_replacement_gives_a_new_instance_id_with_the_same_logical_id_after_the_polls(hp):
    node = hp.add_node(CLUSTER)
    logical_id = hp.describe_node(CLUSTER, node).logical_id
    assert logical_id is not None
    hp.replace_nodes(CLUSTER, [node])

    assert hp.describe_node(CLUSTER, node).status == "ShuttingDown"
    with pytest.raises(NodeNotFound):
        hp.describe_node(CLUSTER, node)
    new = hp.describe_node_by_logical_id(CLUSTER, logical_id)
    assert new.instance_id == hp.replaced_by[node] != node
    assert (new.status, new.instance_group) == ("Running", "workers")


def test_replacing_an_unknown_node_reports_instance_id_not_found(hp):
    result = hp.replace_nodes(CLUSTER, ["i-0123456789abcdef0"])

    assert result.successful == ()
    assert result.failed[0].code == "InstanceIdNotFound"


def test_replacing_a_node_being_replaced_reports_instance_id_in_use(hp):
    node = hp.add_node(CLUSTER)
    hp.replace_nodes(CLUSTER, [node])

    assert hp.replace_nodes(CLUSTER, [node]).failed[0].code == "InstanceIdInUse"


def test_replacing_a_node_during_its_health_check_reports_invalid_instance_status(hp):
    node = hp.add_node(CLUSTER)
    hp.start_health_check(CLUSTER, "workers", [node], ["InstanceStress"])

    assert hp.replace_nodes(CLUSTER, [node]).failed[0].code == "InvalidInstanceStatus"


@pytest.mark.parametrize(
    "code",
    ["InstanceIdNotFound", "InvalidInstanceStatus", "InstanceIdInUse", "InternalServerError"],
)
def test_every_documented_failed_code_can_be_injected_once(hp, code):
    node = hp.add_node(CLUSTER)
    hp.inject_replace_failure(node, code)

    first = hp.replace_nodes(CLUSTER, [node])
    second = hp.replace_nodes(CLUSTER, [node])

    assert [f.code for f in first.failed] == [code]
    assert second.successful == (node,)


def test_only_documented_failed_codes_can_be_injected(hp):
    with pytest.raises(ValueError):
        hp.inject_replace_failure("i-0123456789abcdef0", "Nope")


def test_more_than_25_nodes_per_replace_call_is_refused(hp):
    with pytest.raises(DependencyFailed, match="25"):
        hp.replace_nodes(CLUSTER, [f"i-{n:017x}" for n in range(26)])


def test_a_queued_error_is_raised_by_the_next_call_only(hp):
    node = hp.add_node(CLUSTER)
    hp.fail_next("DescribeClusterNode", Throttled("slow down"))

    with pytest.raises(Throttled):
        hp.describe_node(CLUSTER, node)
    assert hp.describe_node(CLUSTER, node).status == "Running"


def test_the_call_log_uses_aws_operation_and_parameter_names(hp):
    node = hp.add_node(CLUSTER)

    hp.replace_nodes(CLUSTER, [node])

    assert hp.calls_to("BatchReplaceClusterNodes") == [{"ClusterName": CLUSTER, "NodeIds": [node]}]


def test_generated_instance_ids_look_like_ec2_ids(hp):
    from trainer_emitter.contract import is_instance_id

    assert is_instance_id(hp.add_node(CLUSTER))


def test_a_fake_that_keeps_time_ends_a_check_and_a_replacement_when_their_seconds_have_passed():
    clock = [datetime(2026, 1, 5, tzinfo=UTC)]
    fake = FakeHyperPod(
        now=lambda: clock[0],
        takes=ActionTimes(health_check=1800, replacement=600, reboot=300),
    )
    fake.add_cluster(CLUSTER, instance_groups=["workers"])
    node = fake.add_node(CLUSTER)
    fake.start_health_check(CLUSTER, "workers", [node], ["InstanceStress"])

    looked_at_often = [fake.describe_node(CLUSTER, node).status for _ in range(5)]
    clock[0] += timedelta(seconds=1799)
    before = fake.describe_node(CLUSTER, node).status
    clock[0] += timedelta(seconds=1)
    after = fake.describe_node(CLUSTER, node).status
    fake.replace_nodes(CLUSTER, [node])
    clock[0] += timedelta(seconds=600)
    fake.advance()

    assert looked_at_often == ["DeepHealthCheckInProgress"] * 5
    assert (before, after) == ("DeepHealthCheckInProgress", "Running")
    assert node in fake.replaced_by
