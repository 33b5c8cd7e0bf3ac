"""One audit log entry, and the actions the pipeline writes (`AuditAction`). The hash chain
itself lives in `sdc_remediation.lambdas.logic.core.audit`."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sdc_remediation.lambdas.models._record import read_record, record_of


class AuditAction(StrEnum):
    """Every action the pipeline writes to the audit log, by stage. The values are what the
    log holds (and what `sdc show`, the dashboards and the drill read back)."""

    # an event or report arrives
    EVENT_IGNORED = "event_ignored"
    EVENT_REFUSED = "event_refused"
    REPORT_IGNORED = "report_ignored"
    REPORT_STORED = "report_stored"
    EVIDENCE_ATTACHED = "evidence_attached"
    HISTORY_NOT_RECORDED = "history_not_recorded"
    # an incident opens, or does not
    INCIDENT_OPENED = "incident_opened"
    INCIDENT_SKIPPED = "incident_skipped"
    JOB_INCIDENT_SKIPPED = "job_incident_skipped"
    OPEN_FAILED = "open_failed"
    PROCEEDED = "proceeded"
    EXECUTION_STARTED = "execution_started"
    EXECUTION_START_FAILED = "execution_start_failed"
    # holds: the pause switch, a mute rule, the storm guard
    HELD = "held"
    INCIDENT_HELD = "incident_held"
    HELD_NOTIFIED = "held_notified"
    STORM_HOLD_STARTED = "storm_hold_started"
    STORM_NOTIFIED = "storm_notified"
    STORM_HOLD_WIDENED = "storm_hold_widened"
    STORM_HOLD_RESET = "storm_hold_reset"
    RESET_NOTIFIED = "reset_notified"
    # the node kept out of scheduling, and let back in
    NODE_ISOLATED = "node_isolated"
    NODE_NOT_ISOLATED = "node_not_isolated"
    ISOLATION_SKIPPED = "isolation_skipped"
    ISOLATION_INCOMPLETE = "isolation_incomplete"
    NODE_RELEASED = "node_released"
    NODE_RELEASE_SKIPPED = "node_release_skipped"
    NODE_RELEASE_FAILED = "node_release_failed"
    # the deep health check
    HEALTH_CHECK_STARTED = "health_check_started"
    HEALTH_CHECK_NOT_STARTED = "health_check_not_started"
    HEALTH_CHECK_STATUS = "health_check_status"
    # the approver's card and decision
    RECOMMENDED = "recommended"
    """The evidence was judged (at the approval request, or again when later evidence
    attached and the advice changed): the recommendation every reader words."""
    APPROVAL_REQUESTED = "approval_requested"
    CARD_DELIVERED = "card_delivered"
    APPROVAL_RECORDED = "approval_recorded"
    APPROVAL_REPEATED = "approval_repeated"
    DECISION_ACCEPTED = "decision_accepted"
    DECISION_DELIVERED = "decision_delivered"
    DECISION_DELIVERY_UNKNOWN = "decision_delivery_unknown"
    DECISION_REFUSED = "decision_refused"
    # the replacement
    REPLACEMENT_REQUESTED = "replacement_requested"
    REPLACEMENT_IN_PROGRESS = "replacement_in_progress"
    REPLACEMENT_RETRY = "replacement_retry"
    REPLACEMENT_WOULD_REPLACE = "replacement_would_replace"
    REPLACEMENT_BY_HYPERPOD = "replacement_by_hyperpod"
    REPLACEMENT_STATUS = "replacement_status"
    REPLACEMENT_DONE = "replacement_done"
    # the reboot
    REBOOT_REQUESTED = "reboot_requested"
    REBOOT_IN_PROGRESS = "reboot_in_progress"
    REBOOT_RETRY = "reboot_retry"
    REBOOT_WOULD_REBOOT = "reboot_would_reboot"
    REBOOT_STATUS = "reboot_status"
    REBOOT_NODE_GONE = "reboot_node_gone"
    REBOOT_DONE = "reboot_done"
    # either recovery
    NODE_GONE = "node_gone"
    NODE_LABEL_FAILED = "node_label_failed"
    # closing, and what finds incidents left behind
    INCIDENT_CLOSED = "incident_closed"
    CLOSED_UNDECIDED = "closed_undecided"
    """The incident closed with no decision on its approval request (the task token was
    answered outside decide): its node stays isolated, and a person is alarmed."""
    CLOSED_NOTIFIED = "closed_notified"
    RECOVERY_UNKNOWN = "recovery_unknown"
    RECONCILED = "reconciled"
    RECONCILE_NEEDS_PERSON = "reconcile_needs_person"
    # any step
    STEP_ERROR_RETRYABLE = "step_error_retryable"
    STEP_FAILED = "step_failed"
    NOTIFICATION_FAILED = "notification_failed"
    LIFECYCLE_EVENT_FAILED = "lifecycle_event_failed"
    # idle sweeps
    IDLE_SWEEP = "idle_sweep"
    """One run of a cluster's idle sweep (under `sweep#<cluster>`): the nodes it checked, why
    each other node was not checked, the results it took, the checks still running."""


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One entry as stored. `action` is an `AuditAction` value when the pipeline wrote it; it
    stays text here, as read back from the log."""

    incident_id: str
    seq: int
    at: str
    actor: str
    action: str
    details: dict[str, Any]
    request_ids: list[str] = field(default_factory=list)
    prev_hash: str = ""
    hash: str = ""

    def body(self) -> dict[str, Any]:
        """Every field but `hash`: what the hash is computed over."""
        return {
            "incident_id": self.incident_id,
            "seq": self.seq,
            "at": self.at,
            "actor": self.actor,
            "action": self.action,
            "details": self.details,
            "request_ids": list(self.request_ids),
            "prev_hash": self.prev_hash,
        }

    def to_record(self) -> dict[str, Any]:
        return {**self.body(), "hash": self.hash}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> AuditEntry:
        return read_record(cls, record)


@dataclass(frozen=True, slots=True)
class AnchorRecord:
    """What the anchor holds of one entry: enough to tell that the entry is still the one that
    was written, and that no entry after it was dropped."""

    subject: str
    seq: int
    hash: str
    action: str

    def to_record(self) -> dict[str, Any]:
        return record_of(self)

    @classmethod
    def of(cls, entry: AuditEntry) -> AnchorRecord:
        return cls(entry.incident_id, entry.seq, entry.hash, entry.action)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> AnchorRecord:
        return read_record(cls, record)
