"""Who approved: the principal AWS established for an approval, and the approvals an incident
has collected while more are required (`sdc_remediation.lambdas.logic.approval`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from sdc_remediation.lambdas.models._record import read_record, record_of
from sdc_remediation.lambdas.models.payloads import Decision

BINDING_HEADER: Final = "x-sdc-approval"
"""The signed header that binds an identity proof to one decision (as `x-k8s-aws-id` binds an
EKS token to one cluster): STS ignores it, but its signature covers it, so the proof is
accepted for this value only."""


class PrincipalSource(StrEnum):
    """How the approver's principal was established."""

    IDENTITY_PROOF = "identity_proof"
    """A presigned `sts:GetCallerIdentity` request the approver signed and `decide` redeemed:
    STS itself named the caller."""
    EXECUTION_ONLY = "execution_only"
    """No proof came with the approval (a console approval): what is proven is only that a
    principal allowed `states:StartExecution` on the approval state machine started it; the
    principal itself is in CloudTrail's StartExecution event, not established here."""


class AnswerState(StrEnum):
    """Where the answer to the waiting remediation task stands (`DecisionRecord.delivery`,
    written ahead): the values are the records' and the audit's, unchanged."""

    PENDING = "pending"
    """Claimed and audited as accepted; SendTaskSuccess not yet known to have landed."""
    DELIVERED = "delivered"
    """SendTaskSuccess answered (or a retry found the earlier answer had landed)."""


@dataclass(frozen=True, slots=True)
class Principal:
    source: PrincipalSource
    arn: str | None = None
    """`arn:aws:iam::<account>:user/<name>` or `arn:aws:sts::<account>:assumed-role/<role>/
    <session>`, as STS named it; None when unverified."""
    account: str | None = None
    user_id: str | None = None
    proof_id: str | None = None
    """The digest of the redeemed proof's signature (`sdc_remediation.lambdas.adapters.identity.proof_id`): a
    proof is redeemed by one approval execution only."""
    human: str | None = None
    """The person behind the principal, when AWS names one (`sdc_remediation.lambdas.logic.safety.approvers`):
    approvals count distinct humans, not principals."""

    @property
    def verified(self) -> bool:
        return self.source is PrincipalSource.IDENTITY_PROOF and bool(self.arn)

    @property
    def session_name(self) -> str | None:
        """The session name of an assumed role (the part after the role name)."""
        if self.arn and ":assumed-role/" in self.arn:
            return self.arn.rsplit("/", 1)[-1]
        return None

    @property
    def iam_arn(self) -> str | None:
        """The IAM principal behind the caller: an assumed-role session's role
        (`arn:aws:iam::<account>:role/<role>`, without its path, which STS does not name), or
        the caller's own ARN."""
        if self.arn and ":assumed-role/" in self.arn:
            head, _, rest = self.arn.partition(":assumed-role/")
            role = rest.split("/", 1)[0]
            return head.replace(":sts:", ":iam:", 1) + f":role/{role}"
        return self.arn

    @property
    def role_name(self) -> str | None:
        """The role of an assumed-role session (without its path)."""
        if self.arn and ":assumed-role/" in self.arn:
            return self.arn.partition(":assumed-role/")[2].split("/", 1)[0]
        return None

    @property
    def partition(self) -> str | None:
        return self.arn.split(":")[1] if self.arn and self.arn.count(":") >= 5 else None

    def label(self) -> str:
        return self.arn if self.verified and self.arn else "unverified (console approval)"

    def to_record(self) -> dict[str, Any]:
        """Its fields, and `verified` and `session_name` derived from them for whoever reads the
        record without this class (not read back)."""
        return {**record_of(self), "verified": self.verified, "session_name": self.session_name}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Principal:
        return read_record(cls, record)


@dataclass(frozen=True, slots=True)
class ApprovalRecord:
    """One approval counted towards `approvals_required`."""

    decision: Decision
    principal: Principal
    approval_execution_arn: str
    at: str
    comment: str | None = None
    required: int = 1
    """How many distinct approvals the deployment required when this one was recorded."""
    round: int = 0
    """The approval request it was given in (`Incident.approval_round`; 0 before any, as for a
    proceed, and on a storm hold): it counts only with approvals of the same round."""

    def to_record(self) -> dict[str, Any]:
        return record_of(self)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> ApprovalRecord:
        return read_record(cls, record)


def in_round(records: Iterable[dict[str, Any]], round_: int) -> list[ApprovalRecord]:
    """The recorded approvals given in approval round `round_` (`Incident.approval_round`)."""
    approvals = (ApprovalRecord.from_record(record) for record in records)
    return [a for a in approvals if a.round == round_]
