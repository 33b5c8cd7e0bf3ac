"""What isolating the suspect node did (`Incident.isolation`), written by
`sdc_remediation.lambdas.logic.isolation`, per instance under `nodes`.

Stored as the step writes it: a node's record says what its state needs (a pending node only
what the write-ahead knows; an isolated one what the cordon changed; one not isolated the
Kubernetes answer's cause and status); the incident's record gains `taint`, `cause`, `reason`
and `at` when isolation settles, and `released_at` when the closing releases it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sdc_remediation.lambdas.models._record import read_record, record_of


class IsolationState(StrEnum):
    """Where a node's isolation (and the incident's, over its nodes) stands."""

    PENDING = "pending"
    """Written ahead of the cordon: what the node was is known, the patch may not have landed."""
    ISOLATED = "isolated"
    NOT_ISOLATED = "not_isolated"
    """Never cordoned: the `IsolationCause` says why (off, held, a Kubernetes refusal, ...)."""
    RELEASED = "released"
    RELEASE_FAILED = "release_failed"
    KEPT = "kept"
    """Not released on purpose: the node stays cordoned (its replacement or a later incident
    owns it, or it was cordoned before we came)."""
    GONE = "gone"
    """The node left the cluster before the release: nothing to lift."""


class IsolationCause(StrEnum):
    """Why a node (or an incident) is not isolated, or its release failed."""

    STATE = "state"
    """The incident had moved on before isolation ran."""
    OFF = "off"
    """`sdc:nodeIsolation` does not name the cluster."""
    HELD = "held"
    COURSE = "course"
    """The decision table's row for the evidence isolates nothing (a hang it calls ambiguous)."""
    NO_INSTANCE = "no_instance"
    HYPERPOD = "hyperpod"
    """DescribeCluster failed: the orchestrator could not be established."""
    NOT_EKS = "not_eks"
    MISMATCH = "mismatch"
    """The configured EKS cluster is not the one HyperPod names."""
    REFUSED = "refused"
    UNREACHABLE = "unreachable"
    UNAUTHORIZED = "unauthorized"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    NOT_CONFIGURED = "not_configured"
    """The Kubernetes answers above: `sdc_remediation.lambdas.models.errors.KubernetesError.cause` (and the
    Slurm controller's: `SlurmError.cause`)."""
    NO_CONTROLLER = "no_controller"
    """A cluster orchestrated by Slurm with no `slurm_controller` configured: nowhere to drain."""
    NO_HOSTNAME = "no_hostname"
    """HyperPod gave the instance no `PrivateDnsHostname`: its Slurm node name is unknown."""


@dataclass(frozen=True, slots=True)
class IsolatedNode:
    state: IsolationState
    node_name: str | None = None
    was_unschedulable: bool | None = None
    """Its `unschedulable` before our patch (written ahead of the patch)."""
    resource_version: str | None = None
    cordoned_by_us: bool | None = None
    """Set once isolated: whether our cordon is to be lifted on release."""
    taint_added: bool | None = None
    found_taint: str | None = None
    """Another incident's taint that holds the taint slot."""
    reason: str | None = None
    cause: IsolationCause | None = None
    status: int | None = None
    """The Kubernetes API's HTTP status when it refused (not isolated)."""
    found_drain: str | None = None
    """Slurm: the reason someone else's drain carried when we came (left as it was)."""

    def to_record(self) -> dict[str, Any]:
        """What its state needs (the module docstring): the cordon's keys once it is known
        whether the cordon is ours, the outcome's once not pending, `status` when refused."""
        unwritten = set()
        if self.cordoned_by_us is None:
            unwritten |= {"cordoned_by_us", "taint_added", "found_taint"}
        if self.state == IsolationState.PENDING:
            unwritten |= {"reason", "cause"}
        if self.state != IsolationState.NOT_ISOLATED:
            unwritten.add("status")
        return record_of(
            self,
            omit_none=("was_unschedulable", "resource_version", "found_drain"),
            skip=unwritten,
        )

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> IsolatedNode:
        return read_record(cls, record)


@dataclass(frozen=True, slots=True)
class IsolationRecord:
    state: IsolationState
    eks_cluster: str | None = None
    nodes: dict[str, IsolatedNode] = field(default_factory=dict)
    taint: str | None = None
    """`sdc.remediation/incident=<incident id>:NoSchedule`; on Slurm, the drain reason
    (`sdc-remediation incident <incident id>`)."""
    slurm_controller: str | None = None
    """On Slurm: the controller instance the drain ran on (its release runs there too)."""
    cause: str | None = None
    """Why not isolated: an `IsolationCause`, or several nodes' causes joined by commas."""
    reason: str | None = None
    at: str | None = None
    """When isolation settled (None while a node's isolation is pending)."""
    released_at: str | None = None

    @property
    def settled(self) -> bool:
        return self.at is not None

    def node(self, instance_id: str) -> IsolatedNode | None:
        return self.nodes.get(instance_id)

    def to_record(self) -> dict[str, Any]:
        """`cause`, `reason` and `at` once settled; `taint` and `released_at` once known."""
        unwritten = () if self.settled else ("cause", "reason", "at")
        return record_of(
            self, omit_none=("taint", "released_at", "slurm_controller"), skip=unwritten
        )

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> IsolationRecord:
        return read_record(cls, record)
