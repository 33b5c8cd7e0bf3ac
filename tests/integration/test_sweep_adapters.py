"""What an idle sweep reads and asks for, through the adapters: HyperPod's node list (every page)
and one StartClusterHealthCheck with a configuration per group (checked by botocore's Stubber
against the SageMaker model), the Kubernetes nodes and workload pods (the local API stand-in,
on moto's EKS), and the Slurm controller's node list (Debian's slurmctld through Run Command's
stand-in)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from botocore.stub import Stubber

from sdc_remediation.infra.local.kube_api import KubeApi
from sdc_remediation.infra.local.run_command import LocalRunCommand
from sdc_remediation.lambdas.adapters import kubernetes
from sdc_remediation.lambdas.adapters._aws import client_factory
from sdc_remediation.lambdas.adapters.eks_token import EksTokens, sts_factory
from sdc_remediation.lambdas.adapters.hyperpod import SageMakerHyperPod
from sdc_remediation.lambdas.adapters.kubernetes import EksKubernetesNodes
from sdc_remediation.lambdas.adapters.slurm import SsmSlurmControllers
from sdc_remediation.lambdas.models.hyperpod import NodeStatus
from tests.integration.conftest import REGION, SESSION, SLURM_NODES
from tests.unit.world import EKS

CLUSTER = "ml-cluster-1"
META = {"ResponseMetadata": {"RequestId": "req-9", "HTTPStatusCode": 200}}


def summary(instance_id: str, group: str, status: str = "Running") -> dict:
    return {
        "InstanceGroupName": group,
        "InstanceId": instance_id,
        "InstanceStatus": {"Status": status},
        "InstanceType": "ml.p5.48xlarge",
        "LaunchTime": "2026-12-01T00:00:00Z",
        "PrivateDnsHostname": f"ip-10-1-0-{instance_id[-1]}.us-west-2.compute.internal",
    }


@pytest.fixture
def sagemaker() -> Iterator[tuple[object, Stubber]]:
    client = SESSION.client("sagemaker", aws_access_key_id="testing", aws_secret_access_key="t")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def test_the_node_list_is_read_page_by_page_with_each_nodes_host_name(sagemaker):
    client, stubber = sagemaker
    first = {"ClusterNodeSummaries": [summary("i-01", "a")], "NextToken": "t1", **META}
    second = {"ClusterNodeSummaries": [summary("i-02", "b", "Pending")], **META}
    page = {"ClusterName": CLUSTER, "MaxResults": 100}  # the most a page holds
    stubber.add_response("list_cluster_nodes", first, page)
    stubber.add_response("list_cluster_nodes", second, {**page, "NextToken": "t1"})

    nodes = SageMakerHyperPod(lambda: client).list_nodes(CLUSTER)

    assert [(n.instance_id, n.instance_group, n.status) for n in nodes] == [
        ("i-01", "a", NodeStatus.RUNNING),
        ("i-02", "b", NodeStatus.PENDING),
    ]
    assert nodes[0].hostname == "ip-10-1-0-1.us-west-2.compute.internal"


def test_one_health_check_call_carries_a_configuration_per_group(sagemaker):
    client, stubber = sagemaker
    stubber.add_response(
        "start_cluster_health_check",
        {"ClusterArn": f"arn:aws:sagemaker:us-west-2:111122223333:cluster/{'a' * 12}", **META},
        {
            "ClusterName": CLUSTER,
            "DeepHealthCheckConfigurations": [
                {
                    "InstanceGroupName": "a",
                    "InstanceIds": ["i-01", "i-03"],
                    "DeepHealthChecks": ["InstanceConnectivity"],
                },
                {
                    "InstanceGroupName": "b",
                    "InstanceIds": ["i-02"],
                    "DeepHealthChecks": ["InstanceConnectivity"],
                },
            ],
        },
    )

    request_id = SageMakerHyperPod(lambda: client).start_health_checks(
        CLUSTER, {"b": ["i-02"], "a": ["i-01", "i-03"]}, ["InstanceConnectivity"]
    )

    assert request_id == "req-9"


def test_workload_pods_make_their_nodes_busy_and_daemonset_pods_do_not(eks_account, monkeypatch):
    from tests.integration.test_kubernetes_isolation import _caller

    monkeypatch.setattr(kubernetes, "LIST_PAGE", 2)
    api = KubeApi(EKS, REGION, _caller())
    for n in range(1, 5):
        api.add_node(f"node-{n}", f"i-0{n:016x}")
    api.add_pod("pretrain-0", "node-1", {"training.kubeflow.org/job-name": "pretrain"})
    api.add_pod("notebook", "node-2", {"app": "notebook"}, namespace="team-a")
    api.add_pod("dcgm-exporter-x", "node-3", {"app": "dcgm"}, namespace="kube-system")
    api.pods["kube-system/dcgm-exporter-x"]["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "dcgm-exporter", "uid": "u"}
    ]
    api.add_pod("done", "node-4", {"app": "batch"})
    api.pods["default/done"]["status"]["phase"] = "Succeeded"
    with api.serve() as url:
        adapter = EksKubernetesNodes(
            client_factory("eks", SESSION),
            EksTokens(sts_factory(SESSION)),
            endpoint_overrides={EKS: url},
        )
        busy = adapter.workload_nodes(EKS)
        nodes = adapter.list_nodes(EKS)

    assert busy == {"node-1", "node-2"}
    assert sorted(n.name for n in nodes) == ["node-1", "node-2", "node-3", "node-4"]


def test_the_controllers_node_list_shows_drains_and_reservations(slurm):
    controller = "i-0c0000000000000c1"
    slurm.drain(SLURM_NODES[0], "disk replacement")
    adapter = SsmSlurmControllers(
        lambda: LocalRunCommand({controller: slurm}), sleep=lambda _: None
    )

    nodes = {n.name: n for n in adapter.nodes(controller)}

    assert set(nodes) == set(SLURM_NODES)
    assert nodes[SLURM_NODES[0]].drained and nodes[SLURM_NODES[0]].reason == "disk replacement"
    assert not nodes[SLURM_NODES[1]].drained
