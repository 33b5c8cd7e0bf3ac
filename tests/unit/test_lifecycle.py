from __future__ import annotations

import pytest

from lambdas.logic import lifecycle
from lambdas.models.errors import InvalidTransition
from lambdas.models.incident import Incident, IncidentState
from lambdas.models.payloads import Outcome

S = IncidentState


def incident(state: IncidentState, decision: str | None = None) -> Incident:
    return Incident(
        incident_id="sdc-1",
        cluster_name="c",
        instance_id="i-0abc1234def567890",
        state=state,
        created_at="t0",
        updated_at="t0",
        decision={"decision": decision} if decision else None,
    )


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
        (S.REPLACING, "approve", Outcome.REPLACED, S.REPLACED),
        (S.AWAITING_APPROVAL, "reject", Outcome.REJECTED, S.REJECTED),
        (S.AWAITING_APPROVAL, None, Outcome.EXPIRED, S.EXPIRED),
        (S.HEALTH_CHECK, None, Outcome.FAILED, S.FAILED),
        (S.FAILED, None, Outcome.FAILED, S.FAILED),
    ],
)
def test_closing_outcomes_that_follow_from_the_state_are_kept(state, decision, outcome, expected):
    assert lifecycle.closing_state(incident(state, decision), outcome) == (expected, None)


@pytest.mark.parametrize(
    ("state", "decision", "outcome"),
    [
        (S.HEALTH_CHECK, None, Outcome.REPLACED),
        (S.AWAITING_APPROVAL, None, Outcome.REJECTED),
        (S.AWAITING_APPROVAL, "approve", Outcome.REJECTED),
        (S.FAILED, None, Outcome.REPLACED),
    ],
)
def test_closing_outcomes_that_do_not_follow_close_as_failed_with_a_reason(
    state, decision, outcome
):
    final, reason = lifecycle.closing_state(incident(state, decision), outcome)

    assert final is S.FAILED
    assert reason
