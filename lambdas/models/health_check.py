"""The incident's deep health check (`Incident.health_check`), written by
`lambdas.logic.health_check`.

A node-level check records its instance's status; a job-level one records every involved
instance under `nodes`. After an approved reboot the first check is kept, summarised, under
`before_reboot`. Stored as the step writes it: the keys of the check itself appear once it was
recorded (`status` set); `requesting_at`, `polls`, `resumed`, `after_reboot` and
`before_reboot` only once a step wrote them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from lambdas.models._record import known_fields, present


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
        return dataclasses.asdict(self)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> NodeCheck:
        return cls(**known_fields(cls, record))


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
        record = dataclasses.asdict(self)
        record["checks"] = None if self.checks is None else list(self.checks)
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> CheckSummary:
        values = known_fields(cls, record)
        if values.get("checks") is not None:
            values["checks"] = tuple(values["checks"])
        return cls(**values)


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
        record: dict[str, Any] = {}
        if self.recorded:
            record |= {"started": self.started, "checks": list(self.checks)}
            if self.nodes is not None:
                record["nodes"] = {k: n.to_record() for k, n in self.nodes.items()}
            record |= {
                "status": self.status,
                "result": self.result,
                "reason": self.reason,
                "started_at": self.started_at,
                **present(resumed=self.resumed),
            }
        if self.after_reboot:
            record["after_reboot"] = True
        before = self.before_reboot.to_record() if self.before_reboot else None
        return record | present(
            before_reboot=before, polls=self.polls, requesting_at=self.requesting_at
        )

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> HealthCheckRecord:
        values = known_fields(cls, record)
        values["checks"] = tuple(values.get("checks") or ())
        values["started"] = bool(values.get("started"))
        values["after_reboot"] = bool(values.get("after_reboot"))
        if values.get("nodes") is not None:
            values["nodes"] = {k: NodeCheck.from_record(n) for k, n in values["nodes"].items()}
        if values.get("before_reboot"):
            values["before_reboot"] = CheckSummary.from_record(values["before_reboot"])
        else:
            values["before_reboot"] = None
        return cls(**values)
