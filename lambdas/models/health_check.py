"""The incident's deep health check (`Incident.health_check`), written by
`sdc_remediation.lambdas.logic.health_check`.

A node-level check records its instance's status; a job-level one records every involved
instance under `nodes`. After an approved reboot the first check is kept, summarised, under
`before_reboot`. Stored as the step writes it: the keys of the check itself appear once it was
recorded (`status` set); `requesting_at`, `polls`, `resumed`, `after_reboot` and
`before_reboot` only once a step wrote them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sdc_remediation.lambdas.models._record import read_record, record_of


class HealthCheckResult(StrEnum):
    """How a deep health check ended (None while it runs)."""

    PASSED = "passed"
    """The node is Running again after the check."""
    FAILED = "failed"
    """Any other status after the check."""
    NODE_GONE = "node_gone"
    """HyperPod no longer lists the node (its own recovery may have replaced it)."""
    NOT_RUN = "not_run"
    """We did not start one."""
    DONE = "done"
    """Job level: every involved node's check ended (each node has its own result)."""


@dataclass(frozen=True, slots=True)
class NodeCheck:
    """One involved instance of a job-level check."""

    status: str
    group: str | None = None
    started: bool = False
    reason: str | None = None
    result: HealthCheckResult | None = None
    """None while its check runs; then node_gone, not_run, passed or failed."""

    def to_record(self) -> dict[str, Any]:
        return record_of(self)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> NodeCheck:
        return read_record(cls, record)


@dataclass(frozen=True, slots=True)
class CheckSummary:
    """The first check, kept when the check after a reboot starts."""

    started: bool | None = None
    checks: tuple[str, ...] | None = None
    status: str | None = None
    result: HealthCheckResult | None = None
    reason: str | None = None
    started_at: str | None = None

    def to_record(self) -> dict[str, Any]:
        return record_of(self)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> CheckSummary:
        return read_record(cls, record)


@dataclass(frozen=True, slots=True)
class HealthCheckRecord:
    started: bool = False
    checks: tuple[str, ...] = ()
    nodes: dict[str, NodeCheck] | None = None
    """Job level only: each involved instance."""
    status: str | None = None
    """The node's status (node level) or `2 running, 1 passed` (job level); None until the
    check is recorded."""
    result: HealthCheckResult | None = None
    """None while it runs; node level: node_gone, not_run, passed, failed; job level: done."""
    reason: str | None = None
    started_at: str | None = None
    resumed: bool | None = None
    """Node level: an earlier attempt's request had gone through before it died."""
    after_reboot: bool = False
    before_reboot: CheckSummary | None = None
    polls: int | None = None
    requesting_at: str | None = None
    """A StartClusterHealthCheck is about to be sent (written ahead)."""

    @property
    def recorded(self) -> bool:
        """Whether a check was recorded (not only the first check set aside after a reboot)."""
        return self.status is not None

    def summary(self) -> CheckSummary:
        return CheckSummary(
            self.started if self.recorded else None,
            self.checks if self.recorded else None,
            self.status,
            self.result,
            self.reason,
            self.started_at,
        )

    def to_record(self) -> dict[str, Any]:
        """The check's own keys once it was recorded (the module docstring), `after_reboot` only
        when true, the others once known (not None)."""
        unwritten = set() if self.recorded else set(_CHECK)
        if not self.after_reboot:
            unwritten.add("after_reboot")
        return record_of(self, omit_none=_ONCE_KNOWN, skip=unwritten)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> HealthCheckRecord:
        return read_record(cls, record)


_CHECK = ("started", "checks", "nodes", "status", "result", "reason", "started_at", "resumed")
"""The keys of the check itself: written once it was recorded (`nodes` and `resumed` only when
not None)."""
_ONCE_KNOWN = ("nodes", "resumed", "before_reboot", "polls", "requesting_at")
