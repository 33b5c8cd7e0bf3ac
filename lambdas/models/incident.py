"""The incident record: one suspected node, from the first alarm to its closing."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class IncidentState(StrEnum):
    OPENED = "opened"
    HEALTH_CHECK = "health_check"
    AWAITING_APPROVAL = "awaiting_approval"
    REPLACING = "replacing"
    REPLACED = "replaced"
    REJECTED = "rejected"
    EXPIRED = "expired"
    FAILED = "failed"
    SKIPPED = "skipped"

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
    }
)


@dataclass
class Incident:
    """Plain JSON-able fields only, so the record round-trips through DynamoDB unchanged.

    `evidence` holds alarm and report summaries (see `lambdas.logic.evidence`); `health_check`,
    `decision`, `replacement` and `error` are small objects written by the step that owns them.
    `version` is the optimistic lock: every save is conditional on it.
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
    version: int = 0

    @property
    def holds_lock(self) -> bool:
        """Skipped incidents never take the (cluster, instance) lock."""
        return self.state is not IncidentState.SKIPPED

    def to_record(self) -> dict[str, Any]:
        record = dataclasses.asdict(self)
        record["state"] = self.state.value
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Incident:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in record.items() if k in known}
        values["state"] = IncidentState(values["state"])
        return cls(**values)
