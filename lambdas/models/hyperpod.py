"""What the pipeline knows about HyperPod: clusters, nodes, health checks, replacements, reboots.

Values are the ones botocore's SageMaker model documents (1.44): `ClusterInstanceStatus`,
`DeepHealthCheckType`, `BatchReplaceClusterNodesErrorCode`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class NodeStatus(StrEnum):
    """`DescribeClusterNode` → `NodeDetails.InstanceStatus.Status`."""

    RUNNING = "Running"
    FAILURE = "Failure"
    PENDING = "Pending"
    SHUTTING_DOWN = "ShuttingDown"
    SYSTEM_UPDATING = "SystemUpdating"
    DEEP_HEALTH_CHECK_IN_PROGRESS = "DeepHealthCheckInProgress"
    NOT_FOUND = "NotFound"


class HealthCheck(StrEnum):
    """`StartClusterHealthCheck` → `DeepHealthCheckConfigurations[].DeepHealthChecks[]`."""

    INSTANCE_STRESS = "InstanceStress"
    INSTANCE_CONNECTIVITY = "InstanceConnectivity"
    MULTI_NODE_TRAINING_VALIDATION = "MultiNodeTrainingValidation"


class BatchErrorCode(StrEnum):
    """`BatchReplaceClusterNodes` and `BatchRebootClusterNodes` → `Failed[].ErrorCode` (the
    two operations document the same four codes)."""

    INSTANCE_ID_NOT_FOUND = "InstanceIdNotFound"
    INVALID_INSTANCE_STATUS = "InvalidInstanceStatus"
    INSTANCE_ID_IN_USE = "InstanceIdInUse"
    INTERNAL_SERVER_ERROR = "InternalServerError"


class NodeRecovery(StrEnum):
    AUTOMATIC = "Automatic"
    NONE = "None"


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    name: str
    arn: str | None
    status: str | None
    node_recovery: str | None
    instance_groups: tuple[str, ...]
    request_id: str | None = None
    node_count: int | None = None
    """Nodes in the cluster (the instance groups' CurrentCount); None when HyperPod said none."""
    eks_cluster_arn: str | None = None
    """`Orchestrator.Eks.ClusterArn`: the EKS cluster that orchestrates it (None: not EKS)."""

    @property
    def eks_cluster_name(self) -> str | None:
        return self.eks_cluster_arn.rsplit("/", 1)[-1] if self.eks_cluster_arn else None


@dataclass(frozen=True, slots=True)
class NodeInfo:
    cluster_name: str
    instance_id: str
    instance_group: str | None
    status: str
    message: str | None = None
    logical_id: str | None = None
    instance_type: str | None = None
    request_id: str | None = None


@dataclass(frozen=True, slots=True)
class BatchFailure:
    node_id: str
    code: str
    message: str | None = None


@dataclass(frozen=True, slots=True)
class BatchResult:
    """The answer of BatchReplaceClusterNodes or BatchRebootClusterNodes: a 200 that may still
    list nodes in `failed`."""

    successful: tuple[str, ...]
    failed: tuple[BatchFailure, ...]
    request_id: str | None = None

    def failure_for(self, node_id: str) -> BatchFailure | None:
        return next((f for f in self.failed if f.node_id == node_id), None)
