"""The cluster-wide safety state: the blast-radius guard's open slots and the storm hold."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from sdc_remediation.lambdas.models._record import read_record, record_of
from sdc_remediation.lambdas.models.states import IncidentState


class HoldKind(StrEnum):
    """Why an incident is held (the `kind` of `Incident.hold`)."""

    PAUSED = "paused"
    """The pause switch (one SSM parameter) says paused, or cannot be read."""
    MUTED = "muted"
    """The contributor alarm arrived with `muteDetail`: an alarm mute rule mutes the alarm's
    actions, and the pipeline is one of them (treated as the pause switch is)."""
    STORM = "storm"
    """The cluster has an active storm hold: too many distinct instances flagged too fast."""
    GUARD = "guard"
    """The blast-radius guard is full: as many incidents are open as the cluster allows."""
    RATE = "rate"
    """The rate bound: reports and alerts opened as many incidents on the cluster (or for the
    job) this minute as it allows; held once its node was confirmed, one notice per cluster and
    minute, taken again once the minute is over."""
    NOTICE = "notice"
    """Notice only: the decision table's row for the evidence (a straggler without hardware
    corroboration, `policy.Row.STRAGGLER_ALONE`) isolates nothing, checks nothing and proposes
    nothing; the incident is recorded, audited and notified, and that is all."""


@dataclass(frozen=True, slots=True)
class HoldRecord:
    """Why an incident is (or is being) held (`Incident.hold`). A muted hold names the alarm
    mute rule and its window (`MuteDetail.to_json`)."""

    kind: HoldKind
    reason: str
    hold_id: str | None = None
    """The storm hold's id (storm holds only)."""
    mute_rule: str | None = None
    mute_rule_arn: str | None = None
    mute_window_start: str | None = None
    mute_window_end: str | None = None

    @property
    def muted_until(self) -> datetime | None:
        """When the mute window of a muted hold ends (None: not a muted hold, or unreadable)."""
        try:
            return datetime.fromisoformat(self.mute_window_end) if self.mute_window_end else None
        except ValueError:
            return None

    def to_record(self) -> dict[str, Any]:
        """`hold_id` always (None but for storm holds); the mute rule's keys on muted holds."""
        return record_of(self, omit_none=_MUTE_KEYS)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> HoldRecord:
        return read_record(cls, record)


_MUTE_KEYS = ("mute_rule", "mute_rule_arn", "mute_window_start", "mute_window_end")


def reads_as_paused(value: str | None) -> bool:
    """The pause switch's rule: only `false` (any case, surrounding blanks) runs; no switch
    (None) never pauses; `true` and anything else pause (fail closed)."""
    return value is not None and value.strip().lower() != "false"


SLOT_SEPARATOR = "#"
"""Between a job-level incident's id and the instance in each of its slots (incident ids are
made of [A-Za-z0-9_-] only, so a slot names its incident unambiguously)."""


def slot_names(incident_id: str, instance_ids: Sequence[str] | None = None) -> tuple[str, ...]:
    """The guard slots an incident takes: one per node it acts on. A node-level incident's one
    slot is its id; a job-level incident (`instance_ids`) takes `<id>#<instance>` for each."""
    if instance_ids is None:
        return (incident_id,)
    return tuple(f"{incident_id}{SLOT_SEPARATOR}{i}" for i in instance_ids)


def slot_incident(slot: str) -> str:
    """The incident a slot belongs to."""
    return slot.split(SLOT_SEPARATOR, 1)[0]


def slots_of(slots: Iterable[str], incident_id: str) -> list[str]:
    """The slots of `slots` that `incident_id` holds."""
    return sorted(s for s in slots if slot_incident(s) == incident_id)


@dataclass(frozen=True, slots=True)
class GuardState:
    """`GUARD#<cluster>`: the guard slots taken (one per node an open incident acts on), and
    when the last storm hold was reset (flags before it no longer count towards a storm)."""

    slots: tuple[str, ...] = ()
    storm_reset_at: int | None = None

    @property
    def open_ids(self) -> tuple[str, ...]:
        """The incidents holding slots."""
        return tuple(sorted({slot_incident(s) for s in self.slots}))

    @property
    def open_nodes(self) -> int:
        """The nodes open incidents act on: what the blast-radius guard counts."""
        return len(self.slots)


def check_slot_limit(slot_limit: int | None) -> None:
    """A guard admits at least one incident (a cluster that must admit none is paused, not
    guarded); anything less is the caller's mistake, refused before a write."""
    if slot_limit is not None and slot_limit < 1:
        raise ValueError(f"a guard slot limit is at least 1, got {slot_limit}")


def check_slot_room(slots: Sequence[str], slot_limit: int | None) -> None:
    """An incident that needs more slots than the guard has at all is held before it is
    created (`sdc_remediation.lambdas.logic.opening.incidents`); asking the store for them is the caller's mistake."""
    check_slot_limit(slot_limit)
    if slot_limit is not None and len(slots) > slot_limit:
        raise ValueError(f"{len(slots)} guard slots asked of a guard of {slot_limit}")


@dataclass
class ClusterHold:
    """A storm hold: while active (`lifted_at` None) nothing in the cluster acts.

    `hold_id` is what the approver pastes as `incident_id` with decision `reset` to lift it.
    `version` is the optimistic lock, as for incidents.
    """

    hold_id: str
    cluster_name: str
    reason: str
    created_at: str
    instances: list[str] = field(default_factory=list)
    threshold: int = 0
    window_seconds: int = 0
    notified: bool = False
    lifted_at: str | None = None
    lifted_by: str | None = None
    comment: str | None = None
    approvals: list[dict[str, Any]] = field(default_factory=list)
    """The `ApprovalRecord`s of a reset counted so far, while more are required."""
    trusted_at: str | None = None
    """When flags from sources no training pod can speak for (`TriggerSource.trusted`) alone
    met the storm rule while the hold was active; None: it holds no such evidence."""
    version: int = 0

    @property
    def active(self) -> bool:
        return self.lifted_at is None

    def to_record(self) -> dict[str, Any]:
        return record_of(self)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> ClusterHold:
        return read_record(cls, record)


PAST_INCIDENTS_LIMIT = 50
"""How many past incidents one history lookup returns at most (the newest closings)."""


@dataclass(frozen=True, slots=True)
class PastIncident:
    """One closed node-scope incident, kept by instance id and by GPU UUID (instance ids change
    on replacement; a GPU UUID names the device), for the repeat-offender history."""

    incident_id: str
    cluster_name: str
    instance_id: str
    state: IncidentState
    created_at: str
    closed_at: str
    gpu_uuids: tuple[str, ...] = ()
    hold_kind: HoldKind | None = None
    advice: str | None = None

    @property
    def counts_as_history(self) -> bool:
        """Skipped incidents (not a node), storm holds (a software problem) and notices (a slow
        rank nothing in the hardware corroborated) say nothing about the hardware."""
        return self.state != IncidentState.SKIPPED and self.hold_kind not in (
            HoldKind.STORM,
            HoldKind.NOTICE,
        )

    def to_record(self) -> dict[str, Any]:
        return record_of(self)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> PastIncident:
        return read_record(cls, record)
