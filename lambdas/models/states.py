"""The incident's states (docs/pipeline.md, "Incident states"): a module of its own, so that the
records an incident holds, and the payloads that name a state, can say `IncidentState` too."""

from __future__ import annotations

from enum import StrEnum


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
