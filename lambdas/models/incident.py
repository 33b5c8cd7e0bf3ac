"""The incident record: one suspected node, from the first alarm to its closing."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from lambdas.models.telemetry import TelemetryRecord


class IncidentState(StrEnum):
    OPENED = "opened"
    HEALTH_CHECK = "health_check"
    AWAITING_APPROVAL = "awaiting_approval"
    REPLACING = "replacing"
    REBOOTING = "rebooting"
    """An approver chose a reboot: BatchRebootClusterNodes, then the node is awaited Running."""
    REPLACED = "replaced"
    REJECTED = "rejected"
    EXPIRED = "expired"
    FAILED = "failed"
    SKIPPED = "skipped"
    HELD = "held"
    """Recorded, nothing acted: paused, a muted alarm, the cluster's storm hold, or its
    blast-radius guard."""
    CHECKED = "checked"
    """A job-level (ambiguous) incident whose health checks ended: no replacement proposed."""
    REPLACED_BY_HYPERPOD = "replaced_by_hyperpod"
    """The node was gone (HyperPod's own NodeRecovery replaced it) before we replaced it."""
    REBOOTED = "rebooted"
    """Rebooted on an approver's decision, and the deep health check after the reboot passed:
    the node is released."""

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = frozenset(
    {
        IncidentState.REPLACED,
        IncidentState.REJECTED,
        IncidentState.EXPIRED,
        IncidentState.FAILED,
        IncidentState.SKIPPED,
        IncidentState.HELD,
        IncidentState.CHECKED,
        IncidentState.REPLACED_BY_HYPERPOD,
        IncidentState.REBOOTED,
    }
)


class Scope(StrEnum):
    NODE = "node"
    """One suspect instance (`instance_id`): health check, approval, replacement."""
    JOB = "job"
    """An ambiguous report: the involved instances (`instance_ids`) are health-checked, nothing
    is proposed for replacement."""


@dataclass
class Incident:
    """Plain JSON-able fields only, so the record round-trips through DynamoDB unchanged.

    `evidence` holds alarm and report summaries (see `lambdas.logic.evidence`); `health_check`,
    `decision`, `replacement` and `error` are small objects written by the step that owns them.
    `version` is the optimistic lock: every save is conditional on it.

    A job-scope incident has no single instance: `instance_id` is empty and `instance_ids` names
    the involved instances whose open locks it holds. `hold` says why an incident is (or is
    being) held: `{"kind": "paused" | "muted" | "storm" | "guard", "reason", "hold_id"}` (a
    muted hold adds `mute_rule`, `mute_rule_arn`, `mute_window_start`, `mute_window_end`).
    """

    incident_id: str
    cluster_name: str
    instance_id: str
    state: IncidentState
    created_at: str
    updated_at: str
    instance_group: str | None = None
    node_logical_id: str | None = None
    node_status: str | None = None
    node_recovery: str | None = None
    metrics: list[str] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    evidence_dropped: int = 0
    execution_arn: str | None = None
    health_check: dict[str, Any] | None = None
    task_token: str | None = None
    approval_requested_at: str | None = None
    decision: dict[str, Any] | None = None
    replacement: dict[str, Any] | None = None
    outcome: str | None = None
    reason: str | None = None
    error: dict[str, Any] | None = None
    closed_at: str | None = None
    close_notified: bool = False
    scope: str = Scope.NODE.value
    instance_ids: list[str] = field(default_factory=list)
    job_name: str | None = None
    hold: dict[str, Any] | None = None
    isolation: dict[str, Any] | None = None
    """Whether the suspect node is cordoned and tainted while the incident is open, and what
    was changed on it (`lambdas.logic.isolation`)."""
    reboot: dict[str, Any] | None = None
    """The reboot an approver chose (`lambdas.logic.reboot`): its decision, the request and
    its answer, the node's status until it was Running again, and the path that acted."""
    telemetry: TelemetryRecord | None = None
    """What the GPU's hardware counters showed when the approval was requested
    (`lambdas.logic.telemetry`)."""
    version: int = 0

    @property
    def holds_lock(self) -> bool:
        """Whether creating it takes the (cluster, instance) lock: node-scope incidents that are
        not born closed (skipped, held). Job-scope incidents claim their instances' locks one by
        one after they are created."""
        return self.scope == Scope.NODE and self.state not in (
            IncidentState.SKIPPED,
            IncidentState.HELD,
        )

    @property
    def is_job(self) -> bool:
        return self.scope == Scope.JOB

    @property
    def locked_instances(self) -> list[str]:
        """The instances whose open lock this incident may hold."""
        return list(self.instance_ids) if self.is_job else [self.instance_id]

    @property
    def target(self) -> str:
        """What the incident is about, for people: `i-…`, or `job <name> (N instances)`."""
        if self.is_job:
            return f"job {self.job_name or 'unknown'} ({len(self.instance_ids)} instances)"
        return self.instance_id

    def to_record(self) -> dict[str, Any]:
        record = dataclasses.asdict(self)
        record["state"] = self.state.value
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Incident:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in record.items() if k in known}
        values["state"] = IncidentState(values["state"])
        if isinstance(values.get("telemetry"), dict):
            values["telemetry"] = TelemetryRecord.from_record(values["telemetry"])
        return cls(**values)
