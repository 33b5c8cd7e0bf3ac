"""What the stores' conditional writes answer: done, or refused for a reason the caller expects.

A refusal is an answer, not a failure: a redelivered event finds its incident, a second alarm
finds the open lock, a full guard holds the incident. Each store method returns the union of
the answers it can give and its callers `match` on it; only what no caller plans for (an AWS
error, a stale optimistic-lock save) is raised.
"""

from __future__ import annotations

from dataclasses import dataclass

from sdc_remediation.lambdas.models.guard import GuardState


@dataclass(frozen=True, slots=True)
class Created:
    """Everything the call asked for was written."""


@dataclass(frozen=True, slots=True)
class Claimed:
    """The lock is the claimant's: taken now, or held by it already."""


@dataclass(frozen=True, slots=True)
class IncidentExists:
    """An incident with this id was created before (a redelivered event): nothing written."""

    incident_id: str


@dataclass(frozen=True, slots=True)
class LockHeld:
    """Another incident holds the open lock of this (cluster, instance): nothing written."""

    holder: str


@dataclass(frozen=True, slots=True)
class HeldBy:
    """A held incident speaks for this (cluster, instance) within its hold window: nothing
    written."""

    holder: str


@dataclass(frozen=True, slots=True)
class GuardFull:
    """The cluster's blast-radius guard has too few free slots: `slots` (one per node an open
    incident acts on) are taken of the `limit` there are. Nothing written."""

    slots: tuple[str, ...]
    limit: int

    @property
    def open_ids(self) -> tuple[str, ...]:
        """The incidents holding the slots."""
        return GuardState(self.slots).open_ids


@dataclass(frozen=True, slots=True)
class HoldExists:
    """The cluster already has an active storm hold (`holder`), or this hold id was used
    before: nothing written."""

    holder: str


CreateResult = Created | IncidentExists | LockHeld | GuardFull
"""`IncidentStore.create`."""

CreateHeldResult = Created | IncidentExists | HeldBy
"""`IncidentStore.create_held`."""

ClaimLockResult = Claimed | LockHeld
"""`IncidentStore.claim_lock`."""

ClaimHeldResult = Claimed | HeldBy
"""`IncidentStore.claim_held`."""

CreateHoldResult = Created | HoldExists
"""`GuardStore.create_hold`."""
