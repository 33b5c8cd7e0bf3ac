"""What an idle sweep is asked to do, what it found about each node, and what it records.

A sweep (`sdc_remediation.lambdas.logic.sweep`) runs HyperPod's deep health checks on idle nodes between jobs.
Its request comes from its cluster's schedule (the stack writes it from `sdc:idleSweep`); its
record is one audit entry per run under the cluster's sweep subject, which the next run reads
back for the checks still running.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from sdc_remediation.lambdas.models._record import read_record, record_of
from sdc_remediation.lambdas.models.errors import MalformedEvent
from sdc_remediation.lambdas.models.hyperpod import HealthCheck

SWEEP_CHECKS: Final = (HealthCheck.INSTANCE_STRESS, HealthCheck.INSTANCE_CONNECTIVITY)
"""The deep health checks a sweep may run: a node's own stress test and the cluster-level NCCL
and EFA tests. (`MultiNodeTrainingValidation` trains a model across nodes: not a probe.)"""
DEFAULT_SWEEP_CHECKS: Final = (HealthCheck.INSTANCE_CONNECTIVITY,)
"""Fabric faults show only between nodes and under load: the connectivity check finds what the
in-training checks cannot, in minutes; InstanceStress (DCGM level 4) takes tens of minutes."""
DEFAULT_BATCH_SIZE: Final = 4
"""Nodes checked per run: small enough that a job waiting for capacity loses little."""
DEFAULT_MAX_SHARE_PERCENT: Final = 25
"""At most this share of the idle nodes is under a sweep's check at once."""
DEFAULT_MIN_IDLE_NODES: Final = 2
"""The floor: at least this many idle nodes stay free of checks, for the next job to start on."""
MAX_CONFIGURATIONS: Final = 99
"""StartClusterHealthCheck takes 1 to 99 `DeepHealthCheckConfigurations`."""
MAX_BATCH_SIZE: Final = 100


def sweep_subject(cluster_name: str) -> str:
    """The audit subject of a cluster's sweeps: one chain, one entry per run (the last one
    carries the checks still running)."""
    return f"sweep#{cluster_name}"


class SkipReason(StrEnum):
    """Why a node of the cluster was not checked by a sweep (the audit names one per node)."""

    BUSY = "busy"
    """A job runs on it (EKS: a pod of a job; Slurm: allocated, mixed or completing)."""
    CORDONED = "cordoned"
    """Someone keeps it out of scheduling: cordoned or tainted (EKS), drained or down (Slurm)."""
    RESERVED = "reserved"
    """Slurm: in a reservation (a maintenance one while HyperPod checks it)."""
    IN_INCIDENT = "in_incident"
    """An open incident speaks for it."""
    NOT_RUNNING = "not_running"
    """HyperPod does not say Running (a check, a reboot or a replacement runs)."""
    CHECK_RUNNING = "check_running"
    """A check this sweep started earlier still runs."""
    UNKNOWN_TO_ORCHESTRATOR = "unknown_to_orchestrator"
    """Kubernetes (by providerID) or the Slurm controller (by host name) has no such node."""
    FLOOR = "floor"
    """Checking it would leave fewer idle nodes free than the floor."""
    SHARE = "share"
    """Checking it would put more than the bounded share of the idle nodes under a check."""
    BATCH = "batch"
    """The run's batch is full."""
    GUARD = "guard"
    """The blast-radius guard has no room: open incidents and checks count nodes together."""
    TURNED_BUSY = "turned_busy"
    """Chosen, but no longer idle when looked at again just before the call: not checked."""


@dataclass(frozen=True, slots=True)
class SweepRequest:
    """One run of a cluster's sweep, as its schedule asks for it."""

    cluster_name: str
    checks: tuple[HealthCheck, ...] = DEFAULT_SWEEP_CHECKS
    batch_size: int = DEFAULT_BATCH_SIZE
    max_share_percent: int = DEFAULT_MAX_SHARE_PERCENT
    min_idle_nodes: int = DEFAULT_MIN_IDLE_NODES

    def to_input(self) -> dict[str, Any]:
        """The schedule's input (what `parse_sweep_request` reads back)."""
        return {
            "cluster_name": self.cluster_name,
            "checks": [str(c) for c in self.checks],
            "batch_size": self.batch_size,
            "max_share_percent": self.max_share_percent,
            "min_idle_nodes": self.min_idle_nodes,
        }


def parse_sweep_request(event: Any) -> SweepRequest:
    """The schedule's input; MalformedEvent naming the field that is wrong."""
    if not isinstance(event, Mapping):
        raise MalformedEvent("event", "a sweep's input is an object")
    unknown = sorted(set(event) - set(SweepRequest.__dataclass_fields__))
    if unknown:
        raise MalformedEvent(unknown[0], "not a field of a sweep's input")
    cluster = event.get("cluster_name")
    if not isinstance(cluster, str) or not cluster or len(cluster) > 63:
        raise MalformedEvent("cluster_name", "a HyperPod cluster name is required")
    checks = event.get("checks", [str(c) for c in DEFAULT_SWEEP_CHECKS])
    allowed = {str(c) for c in SWEEP_CHECKS}
    if (
        not isinstance(checks, list)
        or not checks
        or any(c not in allowed for c in checks)
        or len(set(checks)) != len(checks)
    ):
        raise MalformedEvent("checks", f"distinct checks of {sorted(allowed)}")
    return SweepRequest(
        cluster_name=cluster,
        checks=tuple(HealthCheck(c) for c in checks),
        batch_size=_bounded(event, "batch_size", DEFAULT_BATCH_SIZE, 1, MAX_BATCH_SIZE),
        max_share_percent=_bounded(event, "max_share_percent", DEFAULT_MAX_SHARE_PERCENT, 1, 100),
        min_idle_nodes=_bounded(event, "min_idle_nodes", DEFAULT_MIN_IDLE_NODES, 0, 10_000),
    )


def _bounded(event: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = event.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise MalformedEvent(name, f"an integer in {low} .. {high}")
    return value


@dataclass(frozen=True, slots=True)
class NodeLook:
    """One node as the sweep saw it: HyperPod's word and its orchestrator's."""

    instance_id: str
    instance_group: str | None
    idle: bool
    """Free for a check: Running, no job, nobody's cordon or drain, no reservation."""
    why_not: SkipReason | None = None
    detail: str | None = None
    """What was seen (a Slurm state and reason, a taint, a HyperPod status)."""


@dataclass(frozen=True, slots=True)
class Pending:
    """A check a sweep started and has not read the result of yet."""

    instance_id: str
    instance_group: str | None
    started_at: str
    checks: tuple[str, ...]

    def to_record(self) -> dict[str, Any]:
        return record_of(self)

    @classmethod
    def from_record(cls, raw: Mapping[str, Any]) -> Pending:
        return read_record(cls, dict(raw))


@dataclass(frozen=True, slots=True)
class CheckResult:
    """A finished check as DescribeClusterNode gave it."""

    instance_id: str
    passed: bool
    status: str
    message: str | None
    checks: tuple[str, ...]
    started_at: str
    incident_id: str | None = None
    """The incident a failed check opened or joined (None: passed, or it could not open)."""
    action: str | None = None
    """What the intake did with the failed check (opened, attached, held, skipped)."""

    def to_record(self) -> dict[str, Any]:
        return record_of(self)


@dataclass(frozen=True, slots=True)
class SweepRecord:
    """One run, as its audit entry records it."""

    cluster_name: str
    checks: tuple[str, ...]
    checked: tuple[str, ...] = ()
    """The nodes whose check this run started."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Every other node of the cluster → why it was not checked (a `SkipReason`)."""
    details: dict[str, str] = field(default_factory=dict)
    """What was seen of a skipped node, where it says more than the reason."""
    idle: int = 0
    """Idle nodes found (before the choice)."""
    limit: int = 0
    """How many could be checked this run: batch, share, floor and guard together."""
    pending: tuple[dict[str, Any], ...] = ()
    """The checks still running after this run (`Pending` records): the next run reads them."""
    results: tuple[dict[str, Any], ...] = ()
    """The checks that finished since the last run (`CheckResult` records)."""
    held: str | None = None
    """Why nothing was started (the pause switch, a storm hold), if so."""
    automatic_recovery: bool = False
    """The cluster's NodeRecovery is Automatic: HyperPod reboots or replaces a node that fails
    a check by itself, before anyone decides."""
    request_ids: tuple[str, ...] = ()

    def to_record(self) -> dict[str, Any]:
        return record_of(self)
