"""Incident states and the transitions between them.

```
opened → health_check → awaiting_approval → replacing → replaced
                         awaiting_approval → rejected | expired
any open state → failed;   skipped is created as such (unknown instance), never entered
```
"""

from __future__ import annotations

from typing import Final

from lambdas.models.errors import InvalidTransition
from lambdas.models.incident import Incident, IncidentState
from lambdas.models.payloads import Decision, Outcome

S = IncidentState

TRANSITIONS: Final[dict[IncidentState, frozenset[IncidentState]]] = {
    S.OPENED: frozenset({S.HEALTH_CHECK, S.FAILED}),
    S.HEALTH_CHECK: frozenset({S.AWAITING_APPROVAL, S.FAILED}),
    S.AWAITING_APPROVAL: frozenset({S.REPLACING, S.REJECTED, S.EXPIRED, S.FAILED}),
    S.REPLACING: frozenset({S.REPLACED, S.FAILED}),
}


def can_transition(current: IncidentState, target: IncidentState) -> bool:
    return target in TRANSITIONS.get(current, frozenset())


def advance(incident: Incident, target: IncidentState, at: str) -> None:
    """Move the incident to `target`, or raise InvalidTransition naming both states."""
    if not can_transition(incident.state, target):
        raise InvalidTransition(
            f"incident {incident.incident_id} cannot go from {incident.state} to {target}"
        )
    incident.state = target
    incident.updated_at = at


def closing_state(incident: Incident, outcome: Outcome) -> tuple[IncidentState, str | None]:
    """The final state for closing with `outcome`, and why it differs when it does.

    An outcome that does not follow from the incident's state (a reject close without a reject
    decision, a replaced close before replacing...) closes the incident as failed, with the
    reason: closing must always end the incident and free its lock.
    """
    state = incident.state
    if state is S.FAILED:
        if outcome is Outcome.FAILED:
            return S.FAILED, None
        return S.FAILED, f"outcome {outcome} reported for an incident already failed"
    decided = (incident.decision or {}).get("decision")
    wanted = {
        Outcome.REPLACED: S.REPLACED,
        Outcome.REJECTED: S.REJECTED,
        Outcome.EXPIRED: S.EXPIRED,
        Outcome.FAILED: S.FAILED,
    }[outcome]
    if not can_transition(state, wanted):
        return S.FAILED, f"outcome {outcome} does not follow state {state}"
    if outcome is Outcome.REJECTED and decided != Decision.REJECT:
        return S.FAILED, f"outcome rejected without a reject decision (decision: {decided})"
    return wanted, None
