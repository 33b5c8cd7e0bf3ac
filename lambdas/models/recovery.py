"""The approver's decision (`Incident.decision`) and what carried it out: the replacement
(`Incident.replacement`) or the reboot (`Incident.reboot`), written by `sdc_remediation.lambdas.logic.approval`,
`sdc_remediation.lambdas.logic.recovery.engine` and `sdc_remediation.lambdas.logic.recovery` (`reboot_node`,
`replace_node`).

Stored as the steps write them: a key a step has not written yet is absent, except the ones
each request writes even when it has no value (`path`, `requested_at`; the replacement's
`new_instance_id` once it is done; the reboot's opening keys once it started).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Final

from sdc_remediation.lambdas.models._record import read_record, record_of
from sdc_remediation.lambdas.models.approvals import AnswerState
from sdc_remediation.lambdas.models.hyperpod import NodeStatus
from sdc_remediation.lambdas.models.payloads import Decision, RecoveryStatus

MAX_REBOOTS: Final = 1
"""Reboots per incident: after one, the approver chooses between replacing and rejecting."""


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    decision: Decision
    comment: str | None = None
    approval_execution_arn: str | None = None
    """The approval execution that delivered it."""
    at: str | None = None
    principal: dict[str, Any] | None = None
    """Who decided (`sdc_remediation.lambdas.models.approvals.Principal` as a record): the principal of the
    approval that completed the decision."""
    approvals: list[dict[str, Any]] | None = None
    """Every approval counted (`ApprovalRecord`s as records) when more than one was required."""
    delivery: AnswerState | None = None
    """Pending (written ahead of SendTaskSuccess) or
    delivered; None on records written before delivery was tracked."""

    @property
    def who(self) -> str:
        """The approver in words: the verified principal, else the approval execution."""
        principal = self.principal or {}
        if principal.get("verified") and principal.get("arn"):
            return str(principal["arn"])
        return f"unverified, execution {self.approval_execution_arn}"

    def to_record(self) -> dict[str, Any]:
        """The four keys every decision has had, then the ones it knows of its approver and
        delivery (absent on records written before they were kept)."""
        return record_of(self, omit_none=("principal", "approvals", "delivery"))

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> DecisionRecord:
        return read_record(cls, record)


@dataclass(frozen=True, slots=True)
class Recovery:
    """What a reboot and a replacement both record about their request."""

    pending: bool | None = None
    """Written ahead (True) before the batch call is sent; False once its answer is recorded."""
    sent_at: str | None = None
    path: str | None = None
    """`api` or `node_label` (`sdc_remediation.lambdas.logic.recovery.path`)."""
    status: RecoveryStatus | None = None
    """The last request's `RecoveryStatus`, then `done`."""
    attempts: int | None = None
    dry_run: bool | None = None
    requested_by_us: bool | None = None
    requested_at: str | None = None
    last: dict[str, Any] | None = None
    """The last request's audit details."""
    node_status: NodeStatus | None = None
    done_at: str | None = None

    @property
    def done(self) -> bool:
        return self.status == RecoveryStatus.DONE

    @property
    def asked(self) -> bool:
        """Whether this pipeline asked for it (or may have: an attempt whose answer was never
        recorded)."""
        return bool(self.requested_by_us or self.pending)

    @property
    def answered(self) -> bool:
        """Whether a request's answer (or why none was sent) was recorded."""
        return self.attempts is not None

    def _record(
        self, *, always: Collection[str] = (), never: Collection[str] = ()
    ) -> dict[str, Any]:
        """The keys its state writes: `_ANSWER`'s once a request's answer was recorded (even
        None), `_KNOWN`'s once known (not None), the subclass's own fields always (even None);
        the subclass's state adds keys it writes `always` and takes away those it `never`
        writes."""
        unanswered = set() if self.answered else _ANSWER - set(always)
        return record_of(self, omit_none=_KNOWN, skip=unanswered | set(never))


_ANSWER: Final = frozenset({"path", "status", "attempts", "requested_at"})
"""Written (even when None) once a request's answer was recorded, absent before."""
_KNOWN: Final = {
    "pending",
    "sent_at",
    "dry_run",
    "requested_by_us",
    "last",
    "node_status",
    "done_at",
}
"""Written once known."""


@dataclass(frozen=True, slots=True)
class ReplacementRecord(Recovery):
    new_instance_id: str | None = None
    """Recorded when it is done: the instance HyperPod put in the node's place, if named."""

    def to_record(self) -> dict[str, Any]:
        """A done replacement writes its status and `new_instance_id` (even None)."""
        if self.done:
            return self._record(always={"status"})
        return self._record(never={"new_instance_id"})

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> ReplacementRecord:
        return read_record(cls, record)


@dataclass(frozen=True, slots=True)
class RebootRecord(Recovery):
    decision: DecisionRecord | None = None
    """The reboot decision, kept here when the approval asks again after the reboot."""
    count: int | None = None
    """Which reboot of the incident this is (`MAX_REBOOTS`)."""
    polls: int = 0
    seen_down: bool = False
    """A poll saw the node in a status other than Running since the request."""

    @property
    def started(self) -> bool:
        return self.count is not None

    def to_record(self) -> dict[str, Any]:
        """A started reboot writes its decision, count, path, status, polls and seen_down
        (even None)."""
        if self.started:
            return self._record(always={"path", "status"})
        return self._record(never={"decision", "count", "polls", "seen_down"})

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> RebootRecord:
        return read_record(cls, record)
