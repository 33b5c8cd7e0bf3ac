"""Incident states and the transitions between them.

```
opened → health_check → awaiting_approval → replacing → replaced | replaced_by_hyperpod
         health_check → checked (job level) | replaced_by_hyperpod (node gone after the check)
                         awaiting_approval → rejected | expired
                         awaiting_approval → rebooting → health_check (again) → rebooted
                                                                 (passed) | awaiting_approval
                         rebooting → replaced_by_hyperpod (the node went away)
any open state → failed | held (paused or storm hold before an acting step; from replacing
only while no replacement was requested)
skipped (unknown instance) and held (paused, storm, guard full) are also created as such
```
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from sdc_remediation.lambdas.models.errors import InvalidTransition
from sdc_remediation.lambdas.models.health_check import HealthCheckResult
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.payloads import Decision, Outcome, RecoveryStatus

S = IncidentState

TRANSITIONS: Final[dict[IncidentState, frozenset[IncidentState]]] = {
    S.OPENED: frozenset({S.HEALTH_CHECK, S.FAILED, S.HELD}),
    S.HEALTH_CHECK: frozenset(
        {S.AWAITING_APPROVAL, S.FAILED, S.HELD, S.CHECKED, S.REPLACED_BY_HYPERPOD, S.REBOOTED}
    ),
    S.AWAITING_APPROVAL: frozenset(
        {S.REPLACING, S.REBOOTING, S.REJECTED, S.EXPIRED, S.FAILED, S.HELD}
    ),
    S.REPLACING: frozenset({S.REPLACED, S.REPLACED_BY_HYPERPOD, S.FAILED, S.HELD}),
    S.REBOOTING: frozenset({S.HEALTH_CHECK, S.REPLACED_BY_HYPERPOD, S.FAILED, S.HELD}),
}


def requested_by_us(incident: Incident) -> bool:
    """Whether this pipeline asked HyperPod to replace the node (or may have: an attempt whose
    answer was never recorded)."""
    return incident.replacement is not None and incident.replacement.asked


def reboot_requested(incident: Incident) -> bool:
    """Whether this pipeline asked HyperPod to reboot the node (or may have)."""
    return incident.reboot is not None and incident.reboot.asked


def recovery_in_flight(incident: Incident) -> bool:
    """Whether a reboot or replacement this pipeline asked for (or may have asked for: written
    ahead, answer never recorded) can still be running: asked, not seen done, not a dry run,
    the node not found gone."""
    for record in (incident.reboot, incident.replacement):
        if record is None or not record.asked or record.done or record.dry_run:
            continue
        if record.status == RecoveryStatus.GONE:
            continue
        return True
    return False


def closed_undecided(incident: Incident) -> bool:
    """A closed incident whose last approval request has no decision after it, and that did
    not close by the approval's expiry: the waiting task was answered (or failed) outside
    `decide`, with the task token, so nothing it said is a decision. Its node stays isolated and
    a person is alarmed (`sdc_remediation.lambdas.logic.closing`)."""
    requested = incident.approval_requested_at
    if not requested or not incident.state.terminal or incident.state is S.EXPIRED:
        return False
    decided = incident.decision.at if incident.decision else None
    return decided is None or datetime.fromisoformat(decided) < datetime.fromisoformat(requested)


def awaiting_reconciliation(incident: Incident) -> bool:
    """A closed incident that kept its node's isolation, lock and guard slot because a recovery
    may have been running (`recovery_unknown`), and that reconciliation has not settled yet."""
    return bool(incident.recovery_unknown) and not incident.reconciled_at


def passed_after_reboot(incident: Incident) -> bool:
    """The approved reboot is done and the deep health check that followed it passed."""
    health = incident.health_check
    return (
        incident.reboot_done
        and health is not None
        and health.after_reboot
        and health.result == HealthCheckResult.PASSED
    )


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
    decided = incident.decided
    wanted = {
        Outcome.REPLACED: S.REPLACED,
        Outcome.REJECTED: S.REJECTED,
        Outcome.EXPIRED: S.EXPIRED,
        Outcome.FAILED: S.FAILED,
        Outcome.HELD: S.HELD,
        Outcome.CHECKED: S.CHECKED,
        Outcome.REPLACED_BY_HYPERPOD: S.REPLACED_BY_HYPERPOD,
        Outcome.REBOOTED: S.REBOOTED,
    }[outcome]
    if (
        outcome is Outcome.REPLACED
        and state is S.REPLACING
        and not (incident.replacement and incident.replacement.dry_run)
        and not requested_by_us(incident)
    ):
        wanted = S.REPLACED_BY_HYPERPOD  # the node went away without our request
    if not can_transition(state, wanted):
        return S.FAILED, f"outcome {outcome} does not follow state {state}"
    if outcome is Outcome.REJECTED and decided != Decision.REJECT:
        return S.FAILED, f"outcome rejected without a reject decision (decision: {decided})"
    if outcome is Outcome.HELD and not incident.hold:
        return S.FAILED, "outcome held, but no step recorded a hold"
    if outcome is Outcome.HELD and requested_by_us(incident):
        return S.FAILED, "outcome held after a replacement was requested"
    if (
        outcome is Outcome.HELD
        and state is S.REBOOTING
        and reboot_requested(incident)
        and not incident.reboot_done
    ):
        return S.FAILED, "outcome held while a requested reboot was under way"
    if outcome is Outcome.REBOOTED and not passed_after_reboot(incident):
        return S.FAILED, "outcome rebooted without a passed health check after the reboot"
    if outcome is Outcome.CHECKED and not incident.is_job:
        return S.FAILED, "outcome checked is for job-level incidents only"
    return wanted, None
