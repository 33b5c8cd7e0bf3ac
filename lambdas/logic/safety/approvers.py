"""Who may decide, and who counts as whom: the human behind a verified principal, the account an
approver must belong to, and the tally of approvals that counts humans, not principals.

The human. STS's GetCallerIdentity (what an identity proof redeems) names the principal, not the
person: two sessions of one role (`assumed-role/sdc-approver/oncall-1`, `.../oncall-1-second`)
are two principals and may be one person. `sts:SourceIdentity`, which persists through role
chaining, is not in GetCallerIdentity's answer, and a header the approver signs would be the
approver's own claim (STS checks the signature, not the value). So the human is taken only from
names AWS itself vouches for:
- an IAM user: its user name;
- an IAM Identity Center session (a role named `AWSReservedSSO_*`, which only Identity Center can
  assume): its session name, which Identity Center sets to the user's name;
- a session of a role listed in `HUMAN_SESSION_ROLES`: its session name. Listing a role is the
  deployment's statement that the role's trust policy makes the session name the human's (for
  example, it requires `sts:SourceIdentity` and a `sts:RoleSessionName` equal to it, or to
  `${aws:username}`): `decide` cannot read a trust policy's intent, so it trusts that listing.
Anything else (another role's session, root, a federated user) names no human: it may decide
alone, never as one of several required approvals.

Names compare case-insensitively and without their account: one person with sessions in two
accounts, or with an Identity Center user and an IAM user of one name, counts once. Two
different people of one name would count once too: the safe direction for a two-person rule.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sdc_remediation.lambdas.models.approvals import ApprovalRecord, Principal, in_round
from sdc_remediation.lambdas.models.payloads import Decision
from sdc_remediation.lambdas.models.settings import Settings

IDENTITY_CENTER_ROLE_PREFIX = "AWSReservedSSO_"
"""IAM Identity Center's roles in each account; their sessions are named by the user."""


def human_of(principal: Principal, human_session_roles: Sequence[str] = ()) -> str | None:
    """The person behind a verified principal, or None when AWS names none (module doc)."""
    if not principal.verified or not principal.arn:
        return None
    resource = principal.arn.split(":", 5)[-1]
    if resource.startswith("user/") and ":iam::" in principal.arn:
        return resource.rsplit("/", 1)[-1].lower() or None
    role, session = principal.role_name, principal.session_name
    if not role or not session:
        return None
    if role.startswith(IDENTITY_CENTER_ROLE_PREFIX):
        return session.lower()
    if principal.iam_arn and any(
        fnmatch.fnmatchcase(principal.iam_arn, pattern) for pattern in human_session_roles
    ):
        return session.lower()
    return None


def refusal(principal: Principal, settings: Settings) -> str | None:
    """Why a verified principal may not decide, or None. Approvers are pinned to the
    deployment's own account (and partition): a principal of another is accepted only when an
    `APPROVERS` pattern names its account by number; a wildcard account admits none."""
    names = [n for n in (principal.arn, principal.iam_arn) if n]
    own = (settings.approval_state_machine_arn or "").split(":")
    own_partition, own_account = (own[1], own[4]) if len(own) > 4 else ("", "")
    if (principal.partition, principal.account) != (own_partition, own_account):
        if not any(
            _names_account(pattern, principal) and _matches(names, pattern)
            for pattern in settings.approvers
        ):
            return (
                f"{principal.arn} belongs to another account ({principal.account}) than this "
                f"deployment's ({own_account}): approvers of another account must be listed in "
                "APPROVERS (sdc:approvers) by their account number"
            )
        return None
    if settings.approvers and not any(_matches(names, p) for p in settings.approvers):
        return (
            f"{principal.arn} is not an allowed approver (APPROVERS: "
            f"{', '.join(settings.approvers)})"
        )
    return None


def _names_account(pattern: str, principal: Principal) -> bool:
    parts = pattern.split(":")
    return len(parts) > 4 and (parts[1], parts[4]) == (principal.partition, principal.account)


def _matches(names: Iterable[str], pattern: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for name in names)


class Count(StrEnum):
    """What one more approval does to a decision that needs several."""

    REPEATED = "repeated"
    """The same human approved this decision already: nothing changes."""
    RECORDED = "recorded"
    """Counted; more are needed."""
    DECIDED = "decided"
    """Enough distinct humans agree: the decision is taken."""


@dataclass(frozen=True, slots=True)
class Tally:
    count: Count
    approvals: list[ApprovalRecord]
    """The agreeing approvals after this one (this one included unless repeated)."""


def agreeing(
    records: Iterable[dict[str, Any]], decision: Decision, round_: int = 0
) -> list[ApprovalRecord]:
    """The approvals of `decision` recorded in round `round_`, one per human; an approval that
    names no human (recorded before humans were counted) counts for none, nor does one given
    in another round."""
    found: dict[str, ApprovalRecord] = {}
    for approval in in_round(records, round_):
        human = approval.principal.human
        if approval.decision == decision.value and human:
            found.setdefault(human, approval)
    return list(found.values())


def tally(records: Iterable[dict[str, Any]], approval: ApprovalRecord, required: int) -> Tally:
    """One more approval against the recorded ones of its round, `required` distinct humans
    needed."""
    if required <= 1:
        return Tally(Count.DECIDED, [approval])
    before = agreeing(records, approval.decision, approval.round)
    if any(a.principal.human == approval.principal.human for a in before):
        return Tally(Count.REPEATED, before)
    after = [*before, approval]
    return Tally(Count.DECIDED if len(after) >= required else Count.RECORDED, after)
