"""What the logic needs from the outside world, as Protocols.

Adapters (boto3) and fakes (tests, the local drill) implement these; `Deps` bundles one of each
for a logic call. Nothing here imports boto3.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from lambdas.models.audit import AuditEntry
from lambdas.models.events import SdcReport
from lambdas.models.hyperpod import ClusterInfo, NodeInfo, ReplaceResult
from lambdas.models.incident import Incident
from lambdas.models.settings import Settings


class HyperPod(Protocol):
    def describe_cluster(self, cluster_name: str) -> ClusterInfo:
        """Raises ClusterNotFound."""
        ...

    def describe_node(self, cluster_name: str, instance_id: str) -> NodeInfo:
        """Raises NodeNotFound (or ClusterNotFound)."""
        ...

    def describe_node_by_logical_id(self, cluster_name: str, logical_id: str) -> NodeInfo:
        """The node that now holds this logical id (a replacement keeps it). Raises NodeNotFound."""
        ...

    def start_health_check(
        self,
        cluster_name: str,
        instance_group: str,
        instance_ids: Sequence[str],
        checks: Sequence[str],
    ) -> str | None:
        """StartClusterHealthCheck; returns the AWS request id."""
        ...

    def replace_nodes(self, cluster_name: str, instance_ids: Sequence[str]) -> ReplaceResult:
        """BatchReplaceClusterNodes; per-node refusals come back in `failed`, not as errors."""
        ...


class IncidentStore(Protocol):
    def create(self, incident: Incident) -> None:
        """Write a new incident; unless it is skipped, also take the open lock of its
        (cluster, instance), atomically. Raises LockHeld(holder) or IncidentExists."""
        ...

    def get(self, incident_id: str) -> Incident | None: ...

    def save(self, incident: Incident) -> None:
        """Conditional on `incident.version`; bumps it. Raises ConditionFailed when stale."""
        ...

    def open_incident_id(self, cluster_name: str, instance_id: str) -> str | None:
        """The id of the incident holding the open lock, if any."""
        ...

    def release_lock(self, cluster_name: str, instance_id: str, incident_id: str) -> None:
        """Delete the lock if (and only if) this incident holds it; idempotent."""
        ...


class ReportStore(Protocol):
    def put_report(self, report: SdcReport, instance_id: str, expires_at: int) -> bool:
        """Store the report under (cluster, instance); False when it was already stored."""
        ...

    def latest_report(self, cluster_name: str, instance_id: str) -> SdcReport | None: ...


class AuditLog(Protocol):
    def last(self, incident_id: str) -> AuditEntry | None: ...

    def append(self, entry: AuditEntry) -> None:
        """Put only if `entry.seq` is free. Raises ConditionFailed otherwise."""
        ...

    def entries(self, incident_id: str) -> list[AuditEntry]:
        """All entries of one incident, in seq order."""
        ...


class Notifier(Protocol):
    def publish(self, subject: str, message: str, attributes: Mapping[str, str]) -> str | None:
        """Returns the AWS request id."""
        ...


@dataclass(frozen=True, slots=True)
class ExecutionStarted:
    arn: str
    request_id: str | None
    already_existed: bool = False


class Workflow(Protocol):
    def start_execution(self, name: str, payload: Mapping[str, Any]) -> ExecutionStarted:
        """Start the remediation state machine; the same name twice never makes two executions."""
        ...

    def send_task_success(self, task_token: str, output: Mapping[str, Any]) -> str | None:
        """Raises TaskNotWaiting when the token is unknown, used or timed out."""
        ...


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


@dataclass(frozen=True)
class Deps:
    settings: Settings
    hyperpod: HyperPod
    incidents: IncidentStore
    reports: ReportStore
    audit: AuditLog
    notifier: Notifier
    workflow: Workflow
    clock: Clock = field(default_factory=SystemClock)
