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
from typing import TYPE_CHECKING, Any, Final

from sdc_remediation.lambdas.models.console import console_link
from sdc_remediation.lambdas.models.resume_point import ResumePoint

if TYPE_CHECKING:
    from sdc_remediation.lambdas.models.incident import Incident

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
    """The incident's stored recommendation (`Incident.recommendation.to_event()`): the advice,
    its tier and reasons, the history and unconfirmed instances it was judged on. None until
    the approval request judges the evidence."""
    decision: str | None = None
    reason: str | None = None
    approval_deadline: dict[str, str] | None = None
    """When the last approval request expires (`ApprovalDeadline.to_event()`: `expires_at` in
    UTC, the approvers' `time_zone`, `expires_at_local`); None before any approval request."""
    links: dict[str, str | None] = field(default_factory=dict)
    """`show` (the CLI command), `execution` and `approval` (console pages), when known."""
    resume: dict[str, Any] | None = None
    """The checkpoint to resume from, the rollback and the exposure window, as the stored
    reports place them (`ResumePoint.to_event()`); None while no report carries one."""

    @classmethod
    def of(
        cls, incident: Incident, old_state: str | None, approval_arn: str | None
    ) -> IncidentStateChange:
        """The event of `incident` having just moved from `old_state` (None: just created),
        built from the record as saved: nothing is judged or looked up again."""
        return cls(
            incident_id=incident.incident_id,
            cluster_name=incident.cluster_name,
            instance_id=incident.instance_id,
            old_state=old_state,
            new_state=incident.state.value,
            terminal=incident.state.terminal,
            changed_at=incident.updated_at,
            sequence=incident.version,
            scope=str(incident.scope),
            instance_ids=tuple(incident.instance_ids),
            recommendation=(
                incident.recommendation.to_event() if incident.recommendation else None
            ),
            decision=incident.decision.decision if incident.decision else None,
            reason=incident.reason,
            approval_deadline=(
                incident.approval_deadline.to_event() if incident.approval_deadline else None
            ),
            links={
                "show": f"sdc show {incident.incident_id}",
                "execution": console_link(incident.execution_arn),
                "approval": console_link(approval_arn),
            },
            resume=point.to_event() if (point := ResumePoint.of(incident.reports)) else None,
        )

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
            "approval_deadline": self.approval_deadline,
            "links": dict(self.links),
            "resume": self.resume,
        }
