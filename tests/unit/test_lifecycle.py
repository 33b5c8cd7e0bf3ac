from __future__ import annotations

import pytest

from sdc_remediation.lambdas.logic.core import lifecycle
from sdc_remediation.lambdas.models.errors import InvalidTransition
from sdc_remediation.lambdas.models.guard import HoldRecord
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.payloads import Decision, Outcome
from sdc_remediation.lambdas.models.recovery import DecisionRecord, ReplacementRecord

S = IncidentState


def incident(
    state: IncidentState,
    decision: str | None = None,
    *,
    replacement: dict | None = None,
    hold: dict | None = None,
    scope: str = "node",
) -> Incident:
    return Incident(
        incident_id="sdc-1",
        cluster_name="c",
        instance_id="i-0abc1234def567890",
        state=state,
        created_at="t0",
        updated_at="t0",
        decision=DecisionRecord(Decision(decision)) if decision else None,
        replacement=ReplacementRecord.from_record(replacement) if replacement else None,
        hold=HoldRecord.from_record(hold) if hold else None,
        scope=scope,
    )


OURS = {"requested_by_us": True}
STORM = {"kind": "storm", "reason": "storm", "hold_id": "hold-c-storm-1"}


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (S.OPENED, S.HEALTH_CHECK),
        (S.HEALTH_CHECK, S.AWAITING_APPROVAL),
        (S.AWAITING_APPROVAL, S.REPLACING),
        (S.AWAITING_APPROVAL, S.REJECTED),
        (S.AWAITING_APPROVAL, S.EXPIRED),
        (S.REPLACING, S.REPLACED),
        (S.OPENED, S.FAILED),
        (S.REPLACING, S.FAILED),
        (S.OPENED, S.HELD),
        (S.AWAITING_APPROVAL, S.HELD),
        (S.HEALTH_CHECK, S.CHECKED),
        (S.HEALTH_CHECK, S.REPLACED_BY_HYPERPOD),
        (S.REPLACING, S.REPLACED_BY_HYPERPOD),
        (S.AWAITING_APPROVAL, S.REBOOTING),
        (S.REBOOTING, S.HEALTH_CHECK),
        (S.REBOOTING, S.REPLACED_BY_HYPERPOD),
        (S.HEALTH_CHECK, S.REBOOTED),
    ],
)
def test_the_documented_path_is_allowed(current, target):
    assert lifecycle.can_transition(current, target)


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (S.OPENED, S.REPLACING),
        (S.HEALTH_CHECK, S.REPLACING),
        (S.OPENED, S.REPLACED),
        (S.AWAITING_APPROVAL, S.REPLACED),
        (S.REPLACED, S.FAILED),
        (S.SKIPPED, S.OPENED),
        (S.EXPIRED, S.REPLACING),
        (S.HELD, S.HEALTH_CHECK),
        (S.OPENED, S.CHECKED),
    ],
)
def test_skipping_approval_or_leaving_a_final_state_is_not_allowed(current, target):
    assert not lifecycle.can_transition(current, target)


def test_every_final_state_is_terminal_and_no_open_state_is():
    assert {s for s in S if s.terminal} == {
        S.REPLACED,
        S.REJECTED,
        S.EXPIRED,
        S.FAILED,
        S.SKIPPED,
        S.HELD,
        S.CHECKED,
        S.REPLACED_BY_HYPERPOD,
        S.REBOOTED,
    }


def test_advance_refuses_a_forbidden_transition_naming_both_states():
    item = incident(S.HEALTH_CHECK)

    with pytest.raises(InvalidTransition, match="health_check to replacing"):
        lifecycle.advance(item, S.REPLACING, "t1")

    assert item.state is S.HEALTH_CHECK


def test_advance_moves_the_state_and_the_update_time():
    item = incident(S.OPENED)

    lifecycle.advance(item, S.HEALTH_CHECK, "t1")

    assert (item.state, item.updated_at) == (S.HEALTH_CHECK, "t1")


@pytest.mark.parametrize(
    ("state", "decision", "outcome", "expected"),
    [
        (S.AWAITING_APPROVAL, "reject", Outcome.REJECTED, S.REJECTED),
        (S.AWAITING_APPROVAL, None, Outcome.EXPIRED, S.EXPIRED),
        (S.HEALTH_CHECK, None, Outcome.FAILED, S.FAILED),
        (S.FAILED, None, Outcome.FAILED, S.FAILED),
        (S.HEALTH_CHECK, None, Outcome.REPLACED_BY_HYPERPOD, S.REPLACED_BY_HYPERPOD),
    ],
)
def test_closing_outcomes_that_follow_from_the_state_are_kept(state, decision, outcome, expected):
    assert lifecycle.closing_state(incident(state, decision), outcome) == (expected, None)


def test_a_replacement_this_pipeline_requested_closes_as_replaced():
    item = incident(S.REPLACING, "approve", replacement=OURS)

    assert lifecycle.closing_state(item, Outcome.REPLACED) == (S.REPLACED, None)


def test_a_node_that_went_away_without_our_request_closes_as_replaced_by_hyperpod():
    item = incident(S.REPLACING, "approve", replacement={"status": "gone"})

    assert lifecycle.closing_state(item, Outcome.REPLACED) == (S.REPLACED_BY_HYPERPOD, None)


def test_a_request_whose_answer_was_never_recorded_counts_as_ours():
    item = incident(S.REPLACING, "approve", replacement={"pending": True})

    assert lifecycle.closing_state(item, Outcome.REPLACED) == (S.REPLACED, None)


def test_a_dry_run_closes_as_replaced():
    item = incident(S.REPLACING, "approve", replacement={"dry_run": True})

    assert lifecycle.closing_state(item, Outcome.REPLACED) == (S.REPLACED, None)


def test_an_incident_with_a_recorded_hold_closes_as_held():
    item = incident(S.AWAITING_APPROVAL, "approve", hold=STORM)

    assert lifecycle.closing_state(item, Outcome.HELD) == (S.HELD, None)


def test_a_job_level_incident_closes_as_checked_after_its_health_checks():
    item = incident(S.HEALTH_CHECK, scope="job")

    assert lifecycle.closing_state(item, Outcome.CHECKED) == (S.CHECKED, None)


@pytest.mark.parametrize(
    ("state", "decision", "outcome"),
    [
        (S.HEALTH_CHECK, None, Outcome.REPLACED),
        (S.AWAITING_APPROVAL, None, Outcome.REJECTED),
        (S.AWAITING_APPROVAL, "approve", Outcome.REJECTED),
        (S.FAILED, None, Outcome.REPLACED),
        (S.OPENED, None, Outcome.HELD),  # no hold recorded
        (S.HEALTH_CHECK, None, Outcome.CHECKED),  # a node-level incident
    ],
)
def test_closing_outcomes_that_do_not_follow_close_as_failed_with_a_reason(
    state, decision, outcome
):
    final, reason = lifecycle.closing_state(incident(state, decision), outcome)

    assert final is S.FAILED
    assert reason


def test_held_after_a_requested_replacement_closes_as_failed():
    item = incident(S.REPLACING, "approve", replacement=OURS, hold=STORM)

    final, reason = lifecycle.closing_state(item, Outcome.HELD)

    assert final is S.FAILED
    assert "after a replacement was requested" in reason
