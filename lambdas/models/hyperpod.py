"""What the pipeline knows about HyperPod: clusters, nodes, health checks, replacements, reboots.

Values are the ones botocore's SageMaker model documents (1.44): `ClusterInstanceStatus`,
`DeepHealthCheckType`, `BatchReplaceClusterNodesErrorCode`, `ClusterEventLevel`; event shapes
are `ClusterEventSummary` and `ClusterEventDetail`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

from sdc_remediation.lambdas.models._record import read_record, record_of


class AwsVocabulary(StrEnum):
    """A closed set of values as AWS documents them today. AWS may add values: an unknown one
    reads as itself (a pseudo-member, no member of the class), never as an error, so a record
    or an answer that carries it is kept as it is."""

    @classmethod
    def _missing_(cls, value: object) -> AwsVocabulary | None:
        if not isinstance(value, str):
            return None
        unknown = str.__new__(cls, value)
        unknown._name_ = value
        unknown._value_ = value
        return unknown


MAX_LISTED_PAGES = 20
"""The most ListClusterNodes pages (100 nodes each) read to find a node by its host name."""


class NodeStatus(AwsVocabulary):
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


class NodeRecovery(AwsVocabulary):
    AUTOMATIC = "Automatic"
    NONE = "None"


class Orchestrator(AwsVocabulary):
    """DescribeCluster's `Orchestrator`: which scheduler runs the cluster's nodes."""

    EKS = "Eks"
    SLURM = "Slurm"


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    name: str
    arn: str | None
    status: str | None
    node_recovery: NodeRecovery | None
    instance_groups: tuple[str, ...]
    request_id: str | None = None
    node_count: int | None = None
    """Nodes in the cluster (the instance groups' CurrentCount); None when HyperPod said none."""
    eks_cluster_arn: str | None = None
    """`Orchestrator.Eks.ClusterArn`: the EKS cluster that orchestrates it (None: not EKS)."""
    orchestrator: Orchestrator | None = None
    """`Orchestrator`'s one key: Eks or Slurm (None: DescribeCluster named neither)."""

    @property
    def eks_cluster_name(self) -> str | None:
        return self.eks_cluster_arn.rsplit("/", 1)[-1] if self.eks_cluster_arn else None


@dataclass(frozen=True, slots=True)
class NodeInfo:
    cluster_name: str
    instance_id: str
    instance_group: str | None
    status: NodeStatus
    message: str | None = None
    logical_id: str | None = None
    instance_type: str | None = None
    request_id: str | None = None
    hostname: str | None = None
    """`PrivateDnsHostname`: on a Slurm cluster, the node's Slurm name is its first label."""


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


class EventLevel(StrEnum):
    """`ListClusterEvents` → `Events[].EventLevel` (`ClusterEventLevel`)."""

    INFO = "Info"
    WARN = "Warn"
    ERROR = "Error"


MAX_EVENTS: Final = 20
"""Events of one instance a card carries (the newest of the window)."""
MAX_DESCRIBED: Final = 5
"""Warnings and errors described (`DescribeClusterEvent`) for their failure message."""
EVENT_TEXT_LIMIT: Final = 300
"""An event's description or failure message, as far as the card carries it."""


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """One of HyperPod's own events about a node (`ListClusterEvents`; `DescribeClusterEvent`
    adds the failure message of a warning or error)."""

    event_id: str
    at: str
    """`EventTime`, ISO 8601 in UTC."""
    resource_type: str
    level: str | None = None
    description: str | None = None
    instance_group: str | None = None
    instance_id: str | None = None
    operation_id: str | None = None
    failure: str | None = None
    """`EventDetails.EventMetadata.Instance.FailureMessage` (or the instance group's)."""

    def to_record(self) -> dict[str, Any]:
        return record_of(self)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ClusterEvent:
        return read_record(cls, record)


@dataclass(frozen=True, slots=True)
class EventPage:
    """What `cluster_events` found: at most `MAX_EVENTS`, oldest first; `more` when the window
    held more (the oldest were left out)."""

    events: tuple[ClusterEvent, ...]
    more: bool = False


def cluster_event(
    summary: Mapping[str, Any], detail: Mapping[str, Any] | None = None
) -> ClusterEvent:
    """An event from its AWS shapes: a `ClusterEventSummary` and, when described, the
    `ClusterEventDetail` of the same event."""
    metadata = (((detail or {}).get("EventDetails") or {}).get("EventMetadata")) or {}
    failure = next(
        (
            (metadata.get(part) or {}).get("FailureMessage")
            for part in ("Instance", "InstanceGroup", "InstanceGroupScaling", "Cluster")
            if (metadata.get(part) or {}).get("FailureMessage")
        ),
        None,
    )
    return ClusterEvent(
        event_id=str(summary["EventId"]),
        at=_iso(summary["EventTime"]),
        resource_type=str(summary.get("ResourceType", "")),
        level=summary.get("EventLevel"),
        description=_clip(summary.get("Description")),
        instance_group=summary.get("InstanceGroupName"),
        instance_id=summary.get("InstanceId"),
        operation_id=summary.get("OperationId"),
        failure=_clip(failure),
    )


def collect_events(
    cluster_name: str,
    instance_id: str,
    after: datetime,
    before: datetime,
    list_events: Callable[..., Mapping[str, Any]],
    describe: Callable[[str], Mapping[str, Any] | None],
) -> EventPage:
    """ListClusterEvents (`list_events`, called with the API's parameters) for the node, newest
    first, page by page until one more than the card carries; then `event_page`."""
    found: list[Mapping[str, Any]] = []
    token: str | None = None
    while len(found) <= MAX_EVENTS:
        answer = list_events(
            ClusterName=cluster_name,
            NodeId=instance_id,
            EventTimeAfter=after,
            EventTimeBefore=before,
            SortBy="EventTime",
            SortOrder="Descending",
            MaxResults=MAX_EVENTS + 1,
            **({"NextToken": token} if token else {}),
        )
        found.extend(answer.get("Events", []))
        token = answer.get("NextToken")
        if not token:
            break
    return event_page(found, describe, more=token is not None)


def event_page(
    newest_first: Sequence[Mapping[str, Any]],
    describe: Callable[[str], Mapping[str, Any] | None],
    *,
    more: bool = False,
) -> EventPage:
    """The page `cluster_events` answers, from `ClusterEventSummary`s newest first (as
    `ListClusterEvents` gives them with `SortOrder=Descending`): the newest `MAX_EVENTS`, the
    newest `MAX_DESCRIBED` warnings and errors described (`describe(event_id)`, a
    `DescribeClusterEvent` answer's `EventDetails`, or None), oldest first."""
    kept = list(newest_first[:MAX_EVENTS])
    loud = [
        s["EventId"] for s in kept if s.get("EventLevel") in (EventLevel.WARN, EventLevel.ERROR)
    ]
    details = {event_id: describe(event_id) for event_id in loud[:MAX_DESCRIBED]}
    return EventPage(
        tuple(cluster_event(s, details.get(s["EventId"])) for s in reversed(kept)),
        more=more or len(newest_first) > MAX_EVENTS,
    )


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    return datetime.fromisoformat(str(value)).astimezone(UTC).isoformat()


def _clip(text: Any) -> str | None:
    if not isinstance(text, str) or not text:
        return None
    flat = " ".join(text.split())
    return flat if len(flat) <= EVENT_TEXT_LIMIT else flat[: EVENT_TEXT_LIMIT - 1] + "…"


@dataclass(frozen=True, slots=True)
class HyperPodView:
    """HyperPod's own view of the node when the approval was requested: its events for the
    instance around the alarm and, where node isolation is on, the node's HyperPod labels.
    Stored on the incident, so the card and `sdc show` say what the approver saw."""

    queried_at: str
    window_start: str | None = None
    window_end: str | None = None
    events: tuple[ClusterEvent, ...] = ()
    more_events: bool = False
    """More events than the card carries were in the window (the newest are kept)."""
    events_error: str | None = None
    """Why the events could not be read (an error, or a cluster without continuous node
    provisioning, where HyperPod keeps no events)."""
    node_name: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    """The node's HyperPod labels (`sagemaker.amazonaws.com/...`), those it has."""
    labels_error: str | None = None

    def to_record(self) -> dict[str, Any]:
        return record_of(self)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> HyperPodView:
        return read_record(cls, record)
