"""What the logic needs from the outside world, as Protocols.

Adapters (boto3) and fakes (tests, the local drill) implement these; `Deps` bundles one of each
for a logic call. Nothing here imports boto3.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from sdc_remediation.lambdas.models.approvals import Principal
from sdc_remediation.lambdas.models.audit import AnchorRecord, AuditEntry
from sdc_remediation.lambdas.models.errors import (
    IdentityRefused,
    KubernetesNotConfigured,
    SlurmNotConfigured,
    TelemetryNotConfigured,
)
from sdc_remediation.lambdas.models.guard import ClusterHold, GuardState, PastIncident
from sdc_remediation.lambdas.models.hyperpod import BatchResult, ClusterInfo, EventPage, NodeInfo
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.kubernetes import KubeNode, NodeChange, Taint
from sdc_remediation.lambdas.models.lifecycle_event import IncidentStateChange
from sdc_remediation.lambdas.models.notices import ChatNotification
from sdc_remediation.lambdas.models.report import SdcReport
from sdc_remediation.lambdas.models.settings import Settings, TelemetryWorkspace
from sdc_remediation.lambdas.models.slurm import DrainChange, SlurmNodeState
from sdc_remediation.lambdas.models.writes import (
    ClaimHeldResult,
    ClaimLockResult,
    CreateHeldResult,
    CreateHoldResult,
    CreateResult,
)


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

    def instance_with_host(self, cluster_name: str, host: str) -> str | None:
        """The instance whose `PrivateDnsHostname`'s first label is `host` (a Slurm node's
        name, `ip-10-1-2-3`), from ListClusterNodes (at most MAX_LISTED_PAGES pages); None when
        no node of the cluster has it. Raises ClusterNotFound."""
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

    def list_nodes(self, cluster_name: str) -> list[NodeInfo]:
        """ListClusterNodes, every page: each node's instance id, group, status and host name.
        Raises ClusterNotFound."""
        ...

    def start_health_checks(
        self,
        cluster_name: str,
        groups: Mapping[str, Sequence[str]],
        checks: Sequence[str],
    ) -> str | None:
        """One StartClusterHealthCheck with one configuration per instance group (group →
        its instance ids; 1 to 99 groups); returns the AWS request id."""
        ...

    def cluster_events(
        self, cluster_name: str, instance_id: str, after: datetime, before: datetime
    ) -> EventPage:
        """HyperPod's events for the instance between `after` and `before`, oldest first, at
        most `MAX_EVENTS` (the newest); warnings and errors described (their failure
        message). Raises an AwsError; `ValidationException` where the cluster keeps no events
        (node provisioning mode not `Continuous`)."""
        ...

    def reboot_nodes(self, cluster_name: str, instance_ids: Sequence[str]) -> BatchResult:
        """BatchRebootClusterNodes: a 200 answer may still list nodes in `failed`."""
        ...

    def replace_nodes(self, cluster_name: str, instance_ids: Sequence[str]) -> BatchResult:
        """BatchReplaceClusterNodes; per-node refusals come back in `failed`, not as errors."""
        ...


class IncidentStore(Protocol):
    def create(self, incident: Incident, *, slot_limit: int | None = None) -> CreateResult:
        """Write a new incident, atomically with the open lock of its (cluster, instance) when
        `incident.holds_lock`, and with a slot of its cluster's blast-radius guard when
        `slot_limit` is given (taken only while fewer than `slot_limit` are taken; an incident
        holds one slot at most). Nothing is written unless it returns Created; a refusal says
        IncidentExists first, then LockHeld(holder), then GuardFull(open ids). Raises ValueError
        for a `slot_limit` below 1."""
        ...

    def create_held(
        self, incident: Incident, *, until: int, now: int, replacing: str | None = None
    ) -> CreateHeldResult:
        """Write a held incident; for a node-scope one, atomically with the held lock of its
        (cluster, instance), valid until `until` (epoch seconds), taken only when no other held
        lock is valid at `now` or the valid one is `replacing`'s. Refused: IncidentExists
        first, then HeldBy(holder); nothing is written."""
        ...

    def claim_held(
        self, cluster_name: str, instance_id: str, incident_id: str, *, until: int, now: int
    ) -> ClaimHeldResult:
        """Take the held lock of (cluster, instance) for `incident_id` (Claimed) unless another
        incident's is valid at `now` (HeldBy that one, whose window stays as it was)."""
        ...

    def held_incident_id(self, cluster_name: str, instance_id: str, now: int) -> str | None:
        """The held incident whose held lock on (cluster, instance) is valid at `now`, if any."""
        ...

    def claim_lock(self, cluster_name: str, instance_id: str, incident_id: str) -> ClaimLockResult:
        """Take the open lock of (cluster, instance) for `incident_id` (Claimed, again or now)
        unless another incident holds it (LockHeld by that one)."""
        ...

    def get(self, incident_id: str) -> Incident | None: ...

    def in_state(self, state: IncidentState) -> list[Incident]:
        """The incidents in `state`, oldest first. Eventually consistent: a change made a moment
        ago may not show yet."""
        ...

    def save(self, incident: Incident) -> None:
        """Conditional on `incident.version`; bumps it. Raises ConditionFailed when stale."""
        ...

    def open_incident_id(self, cluster_name: str, instance_id: str) -> str | None:
        """The id of the incident holding the open lock, if any."""
        ...

    def release_lock(self, cluster_name: str, instance_id: str, incident_id: str) -> None:
        """Delete the lock if (and only if) this incident holds it; idempotent."""
        ...

    def redeem_proof(
        self, proof_id: str, approval_execution_arn: str, expires_at: int
    ) -> str | None:
        """Record that identity proof `proof_id` was redeemed by `approval_execution_arn` (kept
        until `expires_at`, epoch seconds). None when written now or before by the same
        execution (a retry); else the approval execution that redeemed it first."""
        ...

    def keep_task_token(self, incident_id: str, task_token: str) -> None:
        """Keep the task token of the incident's waiting approval, replacing an earlier one,
        apart from the incident: never in its record, its listings or what approvers may read
        (the record keeps its digest, `Incident.task_token_sha256`)."""
        ...

    def task_token(self, incident_id: str) -> str | None:
        """The task token kept for the incident, if any."""
        ...

    def forget_task_token(self, incident_id: str) -> None:
        """Delete the incident's task token; idempotent."""
        ...


class ReportStore(Protocol):
    def put_report(
        self, report: SdcReport, instance_id: str, expires_at: int, *, pointing: bool
    ) -> bool:
        """Store the report under (cluster, instance), those `pointing` at the instance (the
        intake's word: `intake.keep`) apart from the others; False when it was already
        stored."""
        ...

    def recent_reports(self, cluster_name: str, instance_id: str, limit: int) -> list[SdcReport]:
        """The reports stored under the instance: at most `limit` put as pointing at it,
        received last first, then at most `limit` of the others, received last first (so
        however many of these come, they never push those out of reach)."""
        ...

    def stored_report(
        self, cluster_name: str, instance_id: str, received_at: str, report_id: str
    ) -> SdcReport | None:
        """The report `report_id` as stored under the instance (its first copy); None when
        there is none (or it expired). However many reports came for the instance since, and
        whenever the copy the caller's evidence names was received (`received_at`: a
        redelivery received later was not stored again), it is still found."""
        ...


class GuardStore(Protocol):
    """Cluster-wide safety state: guard slots, storm flags, storm holds."""

    def guard_state(self, cluster_name: str) -> GuardState: ...

    def release_slot(self, cluster_name: str, incident_id: str) -> None:
        """Give the incident's guard slot back; idempotent."""
        ...

    def flag_instance(
        self, cluster_name: str, instance_id: str, at: int, expires_at: int, *, trusted: bool
    ) -> None:
        """Note that `instance_id` was flagged at `at` (epoch seconds); one flag per instance,
        the last one noted. A `trusted` flag (a source no training pod can speak for) also
        notes its time apart, which a later untrusted flag leaves as it is."""
        ...

    def flagged_instances(
        self, cluster_name: str, since: int, *, trusted_only: bool = False
    ) -> set[str]:
        """The distinct instances flagged at or after `since` (`trusted_only`: by a trusted
        flag)."""
        ...

    def create_hold(self, hold: ClusterHold) -> CreateHoldResult:
        """Record the hold and make it the cluster's active one; HoldExists(the active hold, or
        this one when its id was used before) writes nothing."""
        ...

    def active_hold(self, cluster_name: str) -> ClusterHold | None: ...

    def get_hold(self, hold_id: str) -> ClusterHold | None: ...

    def save_hold(self, hold: ClusterHold) -> None:
        """Conditional on `hold.version`; bumps it. Raises ConditionFailed when stale."""
        ...

    def lift_hold(self, hold: ClusterHold, reset_at: int) -> None:
        """Save the lifted hold (conditional on its version), end it as the cluster's active
        hold and note `reset_at` as the guard's storm_reset_at, atomically."""
        ...

    def tally(self, cluster_name: str, counter: str, expires_at: int) -> int:
        """Add one to the cluster's `counter` (a name that includes its window, such as
        `opened#<minute>`) and return its new value, atomically: of N concurrent calls on a
        new counter, each gets a distinct value in 1..N. The counter goes after `expires_at`
        (epoch seconds)."""
        ...


class HistoryStore(Protocol):
    """Lookups return the newest closings first (equal `closed_at`: the higher incident id
    first), at most `sdc_remediation.lambdas.models.guard.PAST_INCIDENTS_LIMIT` of them."""

    def record_past(self, past: PastIncident) -> None:
        """Keep the closed incident under its instance id and each of its GPU UUIDs, as one
        entry per (closed_at, incident_id): recording it again is idempotent, recording it with
        another `closed_at` adds an entry (readers dedupe by incident id)."""
        ...

    def past_for_instance(self, instance_id: str) -> list[PastIncident]: ...

    def past_for_gpu(self, gpu_uuid: str) -> list[PastIncident]: ...


class PauseSwitch(Protocol):
    def read(self) -> str | None:
        """The switch's raw value; None when no switch is configured. Raises when it cannot
        be read (the logic then counts as paused: nothing acts on an unknown switch)."""
        ...


class NoPauseSwitch:
    """No switch configured (PAUSE_PARAMETER unset): never paused."""

    def read(self) -> str | None:
        return None


class KubernetesNodes(Protocol):
    """The nodes of an EKS cluster's Kubernetes API. Every method raises a KubernetesError
    (unreachable, unauthorized, not found, conflict) rather than anything transport-specific."""

    def find_node(self, eks_cluster: str, instance_id: str) -> KubeNode:
        """The node whose spec.providerID names `instance_id` exactly. Raises KubernetesNotFound."""
        ...

    def find_node_named(self, eks_cluster: str, name: str) -> KubeNode:
        """The node called `name`, read from the same node list `find_node` reads (its
        instance id is its providerID's). Raises KubernetesNotFound."""
        ...

    def cordon(self, eks_cluster: str, node_name: str, taint: Taint) -> NodeChange:
        """spec.unschedulable true and `taint` added, keeping every other taint (conditional on
        the node's resourceVersion; a conflict re-reads and retries)."""
        ...

    def uncordon(
        self, eks_cluster: str, node_name: str, taint: Taint, *, clear_unschedulable: bool
    ) -> NodeChange:
        """Remove `taint` (only it) and, when `clear_unschedulable`, set unschedulable false."""
        ...

    def label(self, eks_cluster: str, node_name: str, key: str, value: str) -> str:
        """Set one label on the node (a merge patch: every other label is kept); returns the
        node's resourceVersion after it."""
        ...

    def pod_nodes(self, eks_cluster: str, label_selector: str) -> set[str]:
        """The names of the nodes the pods matching `label_selector` (`key=value`, any
        namespace) are scheduled on."""
        ...

    def list_nodes(self, eks_cluster: str) -> list[KubeNode]:
        """Every node of the cluster (every page of the node list)."""
        ...

    def workload_nodes(self, eks_cluster: str) -> set[str]:
        """The names of the nodes any workload pod is scheduled on (any namespace; not a
        DaemonSet's pod, a static pod or one that ended: `is_workload_pod`)."""
        ...


class NoKubernetes:
    """No Kubernetes access configured: every call says so."""

    def _refuse(self) -> KubernetesNotConfigured:
        return KubernetesNotConfigured("this deployment has no Kubernetes API access")

    def find_node(self, eks_cluster: str, instance_id: str) -> KubeNode:
        raise self._refuse()

    def find_node_named(self, eks_cluster: str, name: str) -> KubeNode:
        raise self._refuse()

    def cordon(self, eks_cluster: str, node_name: str, taint: Taint) -> NodeChange:
        raise self._refuse()

    def uncordon(
        self, eks_cluster: str, node_name: str, taint: Taint, *, clear_unschedulable: bool
    ) -> NodeChange:
        raise self._refuse()

    def label(self, eks_cluster: str, node_name: str, key: str, value: str) -> str:
        raise self._refuse()

    def pod_nodes(self, eks_cluster: str, label_selector: str) -> set[str]:
        raise self._refuse()

    def list_nodes(self, eks_cluster: str) -> list[KubeNode]:
        raise self._refuse()

    def workload_nodes(self, eks_cluster: str) -> set[str]:
        raise self._refuse()


class SlurmControllers(Protocol):
    """The Slurm controllers of HyperPod clusters orchestrated by Slurm, reached by a command
    run on the controller instance. Every method raises a SlurmError (unreachable, no such
    node, refused) rather than anything transport-specific; neither ever touches a node that
    carries a reason other than `reason`."""

    def drain(self, controller: str, node_name: str, reason: str) -> DrainChange:
        """`scontrol update state=drain reason=<reason>` on the controller instance
        `controller`, unless the node carries a reason already: ours (ALREADY_OURS) or someone
        else's (FOREIGN, left as it was)."""
        ...

    def resume(self, controller: str, node_name: str, reason: str) -> DrainChange:
        """`state=resume` only when the node's reason is exactly `reason` (RESUMED); a node
        with another reason is left as it is (FOREIGN), one with none is NOT_DRAINED."""
        ...

    def nodes(self, controller: str) -> list[SlurmNodeState]:
        """Every node as `scontrol -o show node` shows it on the controller (read only)."""
        ...


class NoSlurm:
    """No Slurm controller configured: every call says so."""

    def _refuse(self) -> SlurmNotConfigured:
        return SlurmNotConfigured("this deployment names no Slurm controller")

    def drain(self, controller: str, node_name: str, reason: str) -> DrainChange:
        raise self._refuse()

    def resume(self, controller: str, node_name: str, reason: str) -> DrainChange:
        raise self._refuse()

    def nodes(self, controller: str) -> list[SlurmNodeState]:
        raise self._refuse()


class PrometheusQueries(Protocol):
    """The Prometheus HTTP API of a cluster's Amazon Managed Service for Prometheus workspace
    (hardware telemetry). Raises a TelemetryError (unreachable, refused, slow, a bad answer),
    never anything transport-specific, and returns or raises within its time bound."""

    def query_range(
        self,
        workspace: TelemetryWorkspace,
        query: str,
        start: datetime,
        end: datetime,
        step_seconds: int,
    ) -> Mapping[str, Any]:
        """`/api/v1/query_range`: the answer's `data` (`{"resultType": "matrix", "result"}`)."""
        ...


class NoPrometheus:
    """No hardware telemetry configured: every query says so."""

    def query_range(
        self,
        workspace: TelemetryWorkspace,
        query: str,
        start: datetime,
        end: datetime,
        step_seconds: int,
    ) -> Mapping[str, Any]:
        raise TelemetryNotConfigured("this deployment queries no Prometheus workspace")


class AuditLog(Protocol):
    def last(self, incident_id: str) -> AuditEntry | None: ...

    def append(self, entry: AuditEntry) -> None:
        """Put only if `entry.seq` is free. Raises ConditionFailed otherwise."""
        ...

    def entries(self, incident_id: str) -> list[AuditEntry]:
        """All entries of one incident, in seq order."""
        ...

    def all_chains(self) -> dict[str, list[AuditEntry]]:
        """Every subject with its entries in seq order (a scan of the whole log)."""
        ...


class LifecycleEvents(Protocol):
    def publish(self, change: IncidentStateChange) -> str | None:
        """Put one `SDC Incident State Change` event; returns its event id. Raises an
        AwsError when the event was not accepted."""
        ...


class NoLifecycleEvents:
    """No event bus configured (EVENT_BUS_NAME unset): state changes go nowhere else."""

    def publish(self, change: IncidentStateChange) -> str | None:
        return None


class Notifier(Protocol):
    def publish(
        self,
        subject: str,
        message: str,
        attributes: Mapping[str, str],
        chat: ChatNotification | None = None,
    ) -> str | None:
        """Returns the AWS request id. With `chat`: one message per protocol, `message` for
        e-mail and every other protocol, `chat` for `https` subscribers (chat channels)."""
        ...


@dataclass(frozen=True, slots=True)
class ExecutionStarted:
    arn: str
    request_id: str | None
    already_existed: bool = False


@dataclass(frozen=True, slots=True)
class ExecutionRecord:
    """Step Functions' own record of an execution (DescribeExecution)."""

    arn: str
    state_machine_arn: str
    status: str
    """RUNNING, SUCCEEDED, FAILED, TIMED_OUT, ABORTED, PENDING_REDRIVE."""
    input: Any
    """The execution's input, parsed; None when it is not JSON."""
    request_id: str | None = None


class Workflow(Protocol):
    def start_execution(self, name: str, payload: Mapping[str, Any]) -> ExecutionStarted:
        """Start the remediation state machine; the same name twice never makes two executions."""
        ...

    def send_task_success(self, task_token: str, output: Mapping[str, Any]) -> str | None:
        """Raises TaskNotWaiting when the token is unknown, used or timed out."""
        ...

    def describe_execution(self, execution_arn: str) -> ExecutionRecord:
        """DescribeExecution of any execution this role may see. Raises ExecutionNotFound when
        there is none by that ARN (or it is not visible)."""
        ...


class IdentityVerifier(Protocol):
    def redeem(self, proof: str, binding: str) -> Principal:
        """The principal that signed `proof` (a presigned sts:GetCallerIdentity request whose
        signed headers bind it to `binding`), as STS names it. Raises IdentityRefused."""
        ...


class NoIdentityVerifier:
    """No way to redeem identity proofs here: every proof is refused."""

    def redeem(self, proof: str, binding: str) -> Principal:
        raise IdentityRefused("this deployment cannot redeem identity proofs")


class AuditAnchor(Protocol):
    """Where every audit entry's hash is also written, out of reach of the writers' rewrites:
    append-only for the functions (they may add, never change or delete)."""

    enabled: bool
    """False: no anchor is configured (nothing to check a chain against)."""

    def anchor(self, entry: AuditEntry) -> None:
        """Append the entry's (subject, seq, hash)."""
        ...

    def records(self, subject: str | None = None) -> list[AnchorRecord]:
        """What was anchored: of one subject, or of all (None)."""
        ...


class NoAuditAnchor:
    """Not anchored: nothing is written, and nothing can be checked against an anchor."""

    enabled = False

    def anchor(self, entry: AuditEntry) -> None:
        return None

    def records(self, subject: str | None = None) -> list[AnchorRecord]:
        return []


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
    guard: GuardStore
    history: HistoryStore
    clock: Clock = field(default_factory=SystemClock)
    switch: PauseSwitch = field(default_factory=NoPauseSwitch)
    kubernetes: KubernetesNodes = field(default_factory=NoKubernetes)
    slurm: SlurmControllers = field(default_factory=NoSlurm)
    prometheus: PrometheusQueries = field(default_factory=NoPrometheus)
    lifecycle: LifecycleEvents = field(default_factory=NoLifecycleEvents)
    sleep: Callable[[float], None] = time.sleep
    """How a step waits between the attempts of a notice (tests pass one that does not)."""
    identity: IdentityVerifier = field(default_factory=NoIdentityVerifier)
    anchor: AuditAnchor = field(default_factory=NoAuditAnchor)


class OpenIncidents(Protocol):
    """The open incidents, read only: what the dashboard's page lists (through the incidents
    table's `by_state` index; never a task token's item)."""

    def open_incidents(self) -> list[Incident]: ...


@dataclass(frozen=True)
class PageDeps:
    """What the dashboard's page needs, and nothing that writes: the page's function is
    granted a read of the `by_state` index only."""

    settings: Settings
    incidents: OpenIncidents
    clock: Clock = field(default_factory=SystemClock)
