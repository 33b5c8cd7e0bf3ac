"""The lifecycle event: every incident state change, published to EventBridge so that other
tools (PagerDuty, Opsgenie, a ticket system, a custom rule) plug in with one rule.

    source       sdc.remediation
    detail-type  SDC Incident State Change
    detail       lambdas/schemas/sdc_incident_state_change.v1.json

The detail never carries the task token (nor anything else from the incident record that is
not listed in the schema). `sequence` is the incident record's version after the change:
EventBridge does not promise order, a consumer orders one incident's events by it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

LIFECYCLE_SOURCE: Final = "sdc.remediation"
LIFECYCLE_DETAIL_TYPE: Final = "SDC Incident State Change"
LIFECYCLE_SCHEMA_VERSION: Final = "1"
SCHEMA_FILE: Final = "lambdas/schemas/sdc_incident_state_change.v1.json"


@dataclass(frozen=True, slots=True)
class IncidentStateChange:
    incident_id: str
    cluster_name: str
    instance_id: str
    old_state: str | None
    """None when the incident was created (in `new_state`: opened, held or skipped)."""
    new_state: str
    terminal: bool
    changed_at: str
    sequence: int
    scope: str = "node"
    instance_ids: tuple[str, ...] = ()
    recommendation: dict[str, Any] | None = None
    """The decision table's advice and its reasons, from the incident's evidence."""
    decision: str | None = None
    reason: str | None = None
    links: dict[str, str | None] = field(default_factory=dict)
    """`show` (the CLI command), `execution` and `approval` (console pages), when known."""

    def to_detail(self) -> dict[str, Any]:
        return {
            "schema_version": LIFECYCLE_SCHEMA_VERSION,
            "incident_id": self.incident_id,
            "cluster_name": self.cluster_name,
            "instance_id": self.instance_id,
            "instance_ids": list(self.instance_ids),
            "scope": self.scope,
            "old_state": self.old_state,
            "new_state": self.new_state,
            "terminal": self.terminal,
            "changed_at": self.changed_at,
            "sequence": self.sequence,
            "recommendation": self.recommendation,
            "decision": self.decision,
            "reason": self.reason,
            "links": dict(self.links),
        }
