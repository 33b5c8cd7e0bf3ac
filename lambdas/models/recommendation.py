"""The recommendation as the incident records it: judged once from the evidence
(`sdc_remediation.lambdas.logic.evidence.recommendation.judge`), stored on the incident beside `telemetry` and
`hyperpod`, audited `recommended`, and worded from this record by every reader (the card, the
chat notice, the lifecycle event, `sdc show`, `sdc status`, the drill), so they cannot advise
differently."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from sdc_remediation.lambdas.models._record import read_record, record_of
from sdc_remediation.lambdas.models.guard import PastIncident
from sdc_remediation.lambdas.models.states import IncidentState


class Advice(StrEnum):
    """The recovery tier the decision table recommends."""

    REPLACE = "replace after review"
    REBOOT = "reboot, then health-check again (the node stays isolated until it passes)"
    HEALTH_CHECK_ONLY = "health check only, no replacement proposed"

    @property
    def strength(self) -> int:
        return _STRENGTH[self]

    @property
    def tier(self) -> str:
        """The tier in one word, as the card's RECOMMENDATION heading and `sdc status` show it."""
        return _TIER[self]


class Course(StrEnum):
    """What the pipeline does with an incident before anyone decides: the decision table's
    watch rows choose it (`sdc_remediation.lambdas.logic.evidence.policy.Row`, read through `course_of`); every
    other kind of evidence acts."""

    ACT = "isolate, health-check, ask for a decision"
    CHECK = "health check within the guard; nothing isolated, no recovery proposed"
    NOTICE = "notice only: nothing isolated, no health check, no recovery proposed"

    @property
    def strength(self) -> int:
        return _COURSE_STRENGTH[self]


_COURSE_STRENGTH: Final = {Course.NOTICE: 0, Course.CHECK: 1, Course.ACT: 2}

_STRENGTH: Final = {Advice.HEALTH_CHECK_ONLY: 0, Advice.REBOOT: 1, Advice.REPLACE: 2}
_TIER: Final = {
    Advice.HEALTH_CHECK_ONLY: "health check only",
    Advice.REBOOT: "reboot",
    Advice.REPLACE: "replace",
}

MAX_PAST: Final = 20
"""Past incidents a recommendation keeps for the card's HISTORY (the newest); the rest are
counted in `past_left_out`. The ids that counted as history are all kept."""


@dataclass(frozen=True, slots=True)
class Recommendation:
    """The advice, its reasons, and what it was judged on beyond the evidence on the incident:
    the past incidents of the node (`past`, as the card lists them; `history`, the ids of those
    that counted as history) and the instances whose claims the checks did not confirm."""

    advice: Advice
    reasons: tuple[str, ...]
    history: tuple[str, ...] = ()
    """Ids of the past incidents that counted as history (a transient fault on a node with
    history is proposed for replacement)."""
    unconfirmed: tuple[str, ...] = ()
    """Instances the reports named that the checks did not confirm: then the reports propose
    nothing beyond a health check."""
    past: tuple[PastIncident, ...] = ()
    """The node's past incidents as the card's HISTORY lists them (at most `MAX_PAST`)."""
    past_left_out: int = 0
    judged_at: str | None = None
    repeat_offender: str | None = None
    """Why the node or a GPU of it is a repeat offender when it was judged
    (`sdc_remediation.lambdas.logic.evidence.history.repeat_offence`); kept so that a judgement again, after
    evidence attached, weighs the same history."""

    def same_advice(self, other: Recommendation | None) -> bool:
        """Whether `other` advises the same, for the same reasons."""
        return other is not None and (other.advice, other.reasons) == (self.advice, self.reasons)

    def to_event(self) -> dict[str, Any]:
        """What the lifecycle event and `sdc show --json` carry."""
        return {
            "advice": self.advice.value,
            "tier": self.advice.tier,
            "reasons": list(self.reasons),
            "history": list(self.history),
            "unconfirmed": list(self.unconfirmed),
            "judged_at": self.judged_at,
        }

    def to_record(self) -> dict[str, Any]:
        return record_of(self)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Recommendation:
        return read_record(cls, record)


NOT_AN_OFFENCE = frozenset({IncidentState.REJECTED, IncidentState.HELD})
"""Past incidents that do not count towards a repeat offence: one an approver rejected (a person
judged its evidence not worth acting on: reports forged against a healthy node are rejected,
and must not add up to a replacement), and one held before anything checked it (paused, muted,
the guard full, the rate bound: its claim was never weighed)."""


def set_aside(state: str | None, advice: str | None) -> bool:
    """Whether an incident that ended in `state`, its last judgement `advice`, counts toward no
    repeat offence (`is_offence`; the fleet figures' count too): `NOT_AN_OFFENCE`, or left to
    expire with no recovery proposed."""
    if state in NOT_AN_OFFENCE:
        return True
    return state == IncidentState.EXPIRED and advice in _PROPOSES_NOTHING


_PROPOSES_NOTHING: Final = frozenset({None, Advice.HEALTH_CHECK_ONLY.value})
"""The advice of an incident that proposed neither a reboot nor a replacement (None: never
judged)."""
