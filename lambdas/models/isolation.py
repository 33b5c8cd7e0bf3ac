"""What isolating the suspect node did (`Incident.isolation`), written by
`lambdas.logic.isolation`, per instance under `nodes`.

Stored as the step writes it: a node's record says what its state needs (a pending node only
what the write-ahead knows; an isolated one what the cordon changed; one not isolated the
Kubernetes answer's cause and status); the incident's record gains `taint`, `cause`, `reason`
and `at` when isolation settles, and `released_at` when the closing releases it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lambdas.models._record import read_record, record_of

ISOLATED = "isolated"
NOT_ISOLATED = "not_isolated"
PENDING = "pending"
RELEASED = "released"
RELEASE_FAILED = "release_failed"
KEPT = "kept"
GONE = "gone"


@dataclass(frozen=True, slots=True)
class IsolatedNode:
    state: str
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
    cause: str | None = None
    status: int | None = None
    """The Kubernetes API's HTTP status when it refused (not isolated)."""

    def to_record(self) -> dict[str, Any]:
        """What its state needs (the module docstring): the cordon's keys once it is known
        whether the cordon is ours, the outcome's once not pending, `status` when refused."""
        unwritten = set()
        if self.cordoned_by_us is None:
            unwritten |= {"cordoned_by_us", "taint_added", "found_taint"}
        if self.state == PENDING:
            unwritten |= {"reason", "cause"}
        if self.state != NOT_ISOLATED:
            unwritten.add("status")
        return record_of(self, omit_none=("was_unschedulable", "resource_version"), skip=unwritten)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> IsolatedNode:
        return read_record(cls, record)


@dataclass(frozen=True, slots=True)
class IsolationRecord:
    state: str
    """isolated, not_isolated, pending, released, release_failed or kept."""
    eks_cluster: str | None = None
    nodes: dict[str, IsolatedNode] = field(default_factory=dict)
    taint: str | None = None
    """`sdc.remediation/incident=<incident id>:NoSchedule`."""
    cause: str | None = None
    """Why not isolated: off, not_eks, hyperpod, held, a Kubernetes error's cause, ..."""
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
        return record_of(self, omit_none=("taint", "released_at"), skip=unwritten)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> IsolationRecord:
        return read_record(cls, record)
