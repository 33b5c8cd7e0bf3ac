"""SageMaker HyperPod through boto3 (the `sagemaker` client; needs botocore ≥ 1.44 for
StartClusterHealthCheck and BatchReplaceClusterNodes, which the function asset ships)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sdc_remediation.lambdas.adapters._aws import (
    ClientFactory,
    LazyClient,
    aws_call,
    client_factory,
    request_id,
)
from sdc_remediation.lambdas.models.errors import AwsError, ClusterNotFound, NodeNotFound
from sdc_remediation.lambdas.models.hyperpod import (
    MAX_LISTED_PAGES,
    BatchFailure,
    BatchResult,
    ClusterInfo,
    EventPage,
    NodeInfo,
    NodeRecovery,
    NodeStatus,
    Orchestrator,
    collect_events,
)
from sdc_remediation.lambdas.models.slurm import slurm_node_name

# DescribeCluster and DescribeClusterNode answer ResourceNotFound for an unknown cluster and an
# unknown (or replaced) node respectively.
_CLUSTER_ERRORS: Mapping[str, type[AwsError]] = {"ResourceNotFound": ClusterNotFound}
_NODE_ERRORS: Mapping[str, type[AwsError]] = {"ResourceNotFound": NodeNotFound}


class SageMakerHyperPod:
    def __init__(self, factory: ClientFactory | None = None) -> None:
        self._client = LazyClient(factory or client_factory("sagemaker"))

    @property
    def client(self) -> Any:
        return self._client.get()

    def describe_cluster(self, cluster_name: str) -> ClusterInfo:
        with aws_call("DescribeCluster", _CLUSTER_ERRORS):
            response = self.client.describe_cluster(ClusterName=cluster_name)
        return ClusterInfo(
            name=response.get("ClusterName", cluster_name),
            arn=response.get("ClusterArn"),
            status=response.get("ClusterStatus"),
            node_recovery=_node_recovery(response.get("NodeRecovery")),
            instance_groups=tuple(
                g["InstanceGroupName"] for g in response.get("InstanceGroups", [])
            ),
            request_id=request_id(response),
            node_count=sum(
                int(g.get("CurrentCount") or 0) for g in response.get("InstanceGroups", [])
            )
            or None,
            eks_cluster_arn=((response.get("Orchestrator") or {}).get("Eks") or {}).get(
                "ClusterArn"
            ),
            orchestrator=_orchestrator(response.get("Orchestrator") or {}),
        )

    def describe_node(self, cluster_name: str, instance_id: str) -> NodeInfo:
        with aws_call("DescribeClusterNode", _NODE_ERRORS):
            response = self.client.describe_cluster_node(
                ClusterName=cluster_name, NodeId=instance_id
            )
        return _node(cluster_name, response)

    def describe_node_by_logical_id(self, cluster_name: str, logical_id: str) -> NodeInfo:
        with aws_call("DescribeClusterNode", _NODE_ERRORS):
            response = self.client.describe_cluster_node(
                ClusterName=cluster_name, NodeLogicalId=logical_id
            )
        return _node(cluster_name, response)

    def instance_with_host(self, cluster_name: str, host: str) -> str | None:
        for summary, _ in self._summaries(cluster_name, max_pages=MAX_LISTED_PAGES):
            hostname = summary.get("PrivateDnsHostname")
            if hostname and slurm_node_name(hostname) == host:
                return str(summary["InstanceId"])
        return None

    def _summaries(
        self, cluster_name: str, *, max_pages: int | None = None
    ) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        """ListClusterNodes' node summaries, page after page (at most `max_pages`), each with
        the response it came in."""
        token: str | None = None
        pages = 0
        while max_pages is None or pages < max_pages:
            params: dict[str, Any] = {"ClusterName": cluster_name, "MaxResults": 100}
            if token:
                params["NextToken"] = token
            with aws_call("ListClusterNodes", _CLUSTER_ERRORS):
                response = self.client.list_cluster_nodes(**params)
            pages += 1
            for summary in response.get("ClusterNodeSummaries", []):
                yield summary, response
            token = response.get("NextToken")
            if not token:
                return

    def start_health_check(
        self,
        cluster_name: str,
        instance_group: str,
        instance_ids: Sequence[str],
        checks: Sequence[str],
    ) -> str | None:
        return self.start_health_checks(cluster_name, {instance_group: instance_ids}, checks)

    def list_nodes(self, cluster_name: str) -> list[NodeInfo]:
        """ListClusterNodes, every page (each summary as DescribeClusterNode's details)."""
        return [
            _node(
                cluster_name,
                {"NodeDetails": summary, "ResponseMetadata": response.get("ResponseMetadata")},
            )
            for summary, response in self._summaries(cluster_name)
        ]

    def start_health_checks(
        self,
        cluster_name: str,
        groups: Mapping[str, Sequence[str]],
        checks: Sequence[str],
    ) -> str | None:
        with aws_call("StartClusterHealthCheck", _CLUSTER_ERRORS):
            response = self.client.start_cluster_health_check(
                ClusterName=cluster_name,
                DeepHealthCheckConfigurations=[
                    {
                        "InstanceGroupName": group,
                        "InstanceIds": list(instance_ids),
                        "DeepHealthChecks": list(checks),
                    }
                    for group, instance_ids in sorted(groups.items())
                ],
            )
        return request_id(response)

    def replace_nodes(self, cluster_name: str, instance_ids: Sequence[str]) -> BatchResult:
        """A 200 answer may still refuse nodes: they come back in `failed`, never dropped."""
        with aws_call("BatchReplaceClusterNodes", _CLUSTER_ERRORS):
            response = self.client.batch_replace_cluster_nodes(
                ClusterName=cluster_name, NodeIds=list(instance_ids)
            )
        return _batch_result(response)

    def reboot_nodes(self, cluster_name: str, instance_ids: Sequence[str]) -> BatchResult:
        """BatchRebootClusterNodes (a graceful EC2 reboot: same instance id and volumes); the
        answer has the replacement's shape and codes."""
        with aws_call("BatchRebootClusterNodes", _CLUSTER_ERRORS):
            response = self.client.batch_reboot_cluster_nodes(
                ClusterName=cluster_name, NodeIds=list(instance_ids)
            )
        return _batch_result(response)

    def cluster_events(
        self, cluster_name: str, instance_id: str, after: datetime, before: datetime
    ) -> EventPage:
        """ListClusterEvents for the node; DescribeClusterEvent for the warnings and errors
        among them (one that cannot be described keeps its summary)."""

        def describe(event_id: str) -> Mapping[str, Any] | None:
            try:
                with aws_call("DescribeClusterEvent", _CLUSTER_ERRORS):
                    answer = self.client.describe_cluster_event(
                        ClusterName=cluster_name, EventId=event_id
                    )
            except AwsError:
                return None
            return answer.get("EventDetails")

        with aws_call("ListClusterEvents", _CLUSTER_ERRORS):
            return collect_events(
                cluster_name, instance_id, after, before, self.client.list_cluster_events, describe
            )


def _batch_result(response: Mapping[str, Any]) -> BatchResult:
    return BatchResult(
        successful=tuple(response.get("Successful", [])),
        failed=tuple(
            BatchFailure(
                node_id=f.get("NodeId", ""),
                code=f.get("ErrorCode", ""),
                message=f.get("Message"),
            )
            for f in response.get("Failed", [])
        ),
        request_id=request_id(response),
    )


def _node(cluster_name: str, response: Mapping[str, Any]) -> NodeInfo:
    details = response.get("NodeDetails", {})
    status = details.get("InstanceStatus", {})
    return NodeInfo(
        cluster_name=cluster_name,
        instance_id=details.get("InstanceId", ""),
        instance_group=details.get("InstanceGroupName"),
        status=NodeStatus(status.get("Status", "")),
        message=status.get("Message"),
        logical_id=details.get("NodeLogicalId"),
        instance_type=details.get("InstanceType"),
        request_id=request_id(response),
        hostname=details.get("PrivateDnsHostname"),
    )


def _orchestrator(orchestrator: Mapping[str, Any]) -> Orchestrator | None:
    """The one key of DescribeCluster's `Orchestrator` (Eks or Slurm); None when it names none."""
    for member in (Orchestrator.EKS, Orchestrator.SLURM):
        if member.value in orchestrator:
            return member
    return None


if TYPE_CHECKING:
    from sdc_remediation.lambdas.logic.ports import HyperPod

    _port: HyperPod = SageMakerHyperPod()


def _node_recovery(value: str | None) -> NodeRecovery | None:
    return NodeRecovery(value) if value else None
