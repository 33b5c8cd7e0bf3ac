from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta

import pytest

from sdc_remediation.lambdas.logic import approval
from sdc_remediation.lambdas.logic.core import ids
from sdc_remediation.lambdas.models.errors import DecisionRefused, DependencyFailed
from sdc_remediation.lambdas.models.incident import IncidentState, task_token_digest
from sdc_remediation.lambdas.models.payloads import ApprovalRequest, Decision
from sdc_remediation.lambdas.models.recovery import DecisionRecord
from tests.unit.world import APPROVAL_EXECUTION, TOKEN, World

S = IncidentState
FORGED = "AAAAforged-task-token"


# -- request approval ---------------------------------------------------------------------------


def test_requesting_approval_stores_the_token_with_the_incident(world):
    incident_id = world.awaiting_approval()

    incident = world.incident(incident_id)
    assert incident.state is S.AWAITING_APPROVAL
    assert world.store.task_token(incident_id) == TOKEN


def test_the_incident_record_keeps_only_the_digest_of_the_task_token(world):
    incident_id = world.awaiting_approval()

    incident = world.incident(incident_id)
    assert incident.task_token_sha256 == task_token_digest(TOKEN)
    assert TOKEN not in json.dumps(incident.to_record())


def test_the_approval_card_never_carries_the_task_token(world):
    world.store_fixture_report()

    world.awaiting_approval()

    card = world.notifier.published[-1]
    assert TOKEN not in card.message
    assert TOKEN not in card.subject
    assert TOKEN not in json.dumps(card.attributes)


def test_the_audit_log_never_carries_the_task_token(world):
    incident_id = world.awaiting_approval()

    assert all(TOKEN not in json.dumps(e.to_record()) for e in world.audit.entries(incident_id))


def test_the_card_holds_the_exact_approval_input_to_paste(world):
    incident_id = world.awaiting_approval()

    card = world.notifier.published[-1].message
    expected = {
        "incident_id": incident_id,
        "decision": "approve",
        "comment": "<why>",
    }
    assert json.dumps(expected) in card


def test_requesting_approval_returns_and_audits_the_approval_input(world):
    incident_id = world.health_checked()

    result = approval.request_approval(ApprovalRequest(incident_id, TOKEN), world.deps)

    assert result["approval_input"]["incident_id"] == incident_id
    assert result["approval_input"]["decision"] == "approve"
    entry = world.audit.entries(incident_id)[-1]
    assert entry.action == "approval_requested"
    assert entry.details["approval_input"] == result["approval_input"]
    assert entry.request_ids == ["sns-1"]


def test_the_approval_request_records_and_audits_when_it_expires(world):
    world.settings = dataclasses.replace(world.settings, approval_timeout_seconds=900)
    incident_id = world.health_checked()

    approval.request_approval(ApprovalRequest(incident_id, TOKEN), world.deps)

    incident = world.incident(incident_id)
    requested = datetime.fromisoformat(str(incident.approval_requested_at))
    assert incident.approval_deadline is not None
    assert incident.approval_deadline.instant == (requested + timedelta(seconds=900)).replace(
        microsecond=0
    )
    entry = world.audit.entries(incident_id)[-1]
    assert entry.details["expires_at"] == incident.approval_deadline.expires_at


def test_a_failed_notification_keeps_the_approval_request_waiting(world):
    incident_id = world.health_checked()
    world.notifier.fail_next = DependencyFailed("simulated SNS failure")

    approval.request_approval(ApprovalRequest(incident_id, TOKEN), world.deps)

    incident = world.incident(incident_id)
    assert (incident.state, world.store.task_token(incident_id)) == (S.AWAITING_APPROVAL, TOKEN)
    assert world.audit.actions(incident_id)[-2:] == ["notification_failed", "approval_requested"]


# -- decide -------------------------------------------------------------------------------------


def test_an_approval_is_sent_to_the_waiting_task_with_decision_comment_and_execution(world):
    incident_id = world.awaiting_approval()

    result = approval.decide(world.decision(incident_id, "approve"), world.deps)

    assert result == {
        "incident_id": incident_id,
        "decision": "approve",
        "accepted": True,
        "principal": f"unverified, execution {APPROVAL_EXECUTION}",
    }
    assert world.workflow.answers == [
        (
            TOKEN,
            {
                "incident_id": incident_id,
                "decision": "approve",
                "comment": "evidence reviewed",
                "approval_execution_arn": APPROVAL_EXECUTION,
            },
        )
    ]


def test_an_accepted_decision_is_recorded_and_audited_with_the_approver(world):
    incident_id = world.awaiting_approval()

    approval.decide(world.decision(incident_id, "reject", "looks transient"), world.deps)

    assert world.incident(incident_id).decision.decision == "reject"
    accepted = [e for e in world.audit.entries(incident_id) if e.action == "decision_accepted"]
    assert accepted[0].actor == f"approver:{APPROVAL_EXECUTION}"
    assert accepted[0].details["comment"] == "looks transient"


def test_a_second_decision_is_refused_and_audited(world):
    incident_id = world.decided("approve")

    with pytest.raises(DecisionRefused, match="already decided"):
        approval.decide(world.decision(incident_id, "reject", execution="arn:second"), world.deps)

    entry = world.audit.entries(incident_id)[-1]
    assert (entry.action, entry.details["decision"]) == ("decision_refused", "reject")
    assert len(world.workflow.answers) == 1


def test_an_unknown_decision_value_is_refused_and_audited(world):
    incident_id = world.awaiting_approval()

    with pytest.raises(DecisionRefused, match=r"'approve' \(replace\), 'reboot' or 'reject'"):
        approval.decide(world.decision(incident_id, "yes please"), world.deps)

    assert world.audit.actions(incident_id)[-1] == "decision_refused"
    assert world.workflow.answers == []
    assert world.incident(incident_id).decision is None


def test_a_decision_before_approval_was_requested_is_refused(world):
    incident_id = world.health_checked()

    with pytest.raises(DecisionRefused, match="not awaiting approval"):
        approval.decide(world.decision(incident_id), world.deps)

    assert world.audit.actions(incident_id)[-1] == "decision_refused"


def test_a_decision_for_an_unknown_incident_is_audited_under_the_approval_execution(world):
    with pytest.raises(DecisionRefused, match="no incident"):
        approval.decide(world.decision("sdc-nope"), world.deps)

    assert world.audit.actions(ids.decision_subject(APPROVAL_EXECUTION)) == ["decision_refused"]


def test_a_decision_whose_task_is_gone_is_refused_released_and_audited(world):
    incident_id = world.awaiting_approval()
    world.workflow.waiting_tokens.clear()

    with pytest.raises(DecisionRefused, match="no longer waits"):
        approval.decide(world.decision(incident_id), world.deps)

    assert world.incident(incident_id).decision is None
    assert world.audit.actions(incident_id)[-1] == "decision_refused"


def test_a_kept_token_whose_digest_is_not_the_incidents_is_refused_and_never_sent(world):
    incident_id = world.awaiting_approval()
    world.store.keep_task_token(incident_id, FORGED)  # a token put in the approval's place
    world.workflow.waiting_tokens.add(FORGED)

    with pytest.raises(DecisionRefused, match="not the one its approval request recorded"):
        approval.decide(world.decision(incident_id), world.deps)

    assert world.workflow.answers == []
    assert world.incident(incident_id).decision is None
    assert world.audit.actions(incident_id)[-1] == "decision_refused"


def test_a_resumed_delivery_refuses_a_token_whose_digest_is_not_the_incidents(world):
    incident_id = world.awaiting_approval()
    world.workflow.fail_next_send = DependencyFailed("SendTaskSuccess failed")
    with pytest.raises(DependencyFailed):
        approval.decide(world.decision(incident_id), world.deps)
    world.store.keep_task_token(incident_id, FORGED)
    world.workflow.waiting_tokens.add(FORGED)

    with pytest.raises(DecisionRefused, match="not the one its approval request recorded"):
        approval.decide(world.decision(incident_id), world.deps)

    assert world.workflow.answers == []
    assert world.audit.actions(incident_id)[-1] == "decision_refused"


def test_a_decision_whose_delivery_failed_stays_pending_audited_and_raised(world):
    incident_id = world.awaiting_approval()
    world.workflow.fail_next_send = DependencyFailed("SendTaskSuccess failed")

    with pytest.raises(DependencyFailed):
        approval.decide(world.decision(incident_id), world.deps)

    assert world.incident(incident_id).decision.delivery == "pending"
    assert world.audit.actions(incident_id)[-2:] == [
        "decision_accepted",
        "decision_delivery_unknown",
    ]


def test_a_decision_for_a_closed_incident_is_refused(world: World):
    incident_id = world.awaiting_approval()
    from sdc_remediation.lambdas.logic import closing
    from sdc_remediation.lambdas.models.payloads import CloseRequest, Outcome

    closing.close_incident(CloseRequest(incident_id, Outcome.EXPIRED, None), world.deps)

    with pytest.raises(DecisionRefused, match="expired, not awaiting approval"):
        approval.decide(world.decision(incident_id), world.deps)


def interfere_with_next_save(world: World, change) -> None:
    """Just before the next save lands, another writer changes the stored incident."""
    store = world.store
    original = store.save

    def save(incident):
        store.save = original
        competitor = store.get(incident.incident_id)
        change(competitor)
        original(competitor)
        original(incident)  # now stale: raises ConditionFailed

    store.save = save


def test_of_two_racing_decisions_the_second_is_refused(world):
    incident_id = world.awaiting_approval()
    first = DecisionRecord(Decision.REJECT, None, "arn:first", "t")
    interfere_with_next_save(world, lambda competitor: setattr(competitor, "decision", first))

    with pytest.raises(DecisionRefused, match="already decided: reject"):
        approval.decide(world.decision(incident_id, "approve"), world.deps)

    assert world.workflow.answers == []
    assert world.incident(incident_id).decision == first


def test_a_decision_racing_an_unrelated_update_is_still_accepted(world):
    incident_id = world.awaiting_approval()
    interfere_with_next_save(
        world,
        lambda competitor: competitor.evidence.append(
            {"kind": "alarm", "key": "alarm:x", "metric": "sdc_x"}
        ),
    )

    approval.decide(world.decision(incident_id, "approve"), world.deps)

    incident = world.incident(incident_id)
    assert incident.decision.decision == "approve"
    assert "sdc_x" in incident.metrics


def test_a_decision_after_the_approval_timeout_is_refused_and_audited(world):
    incident_id = world.awaiting_approval()
    world.settings = dataclasses.replace(world.settings, approval_timeout_seconds=60)
    world.clock.current += timedelta(minutes=5)

    with pytest.raises(DecisionRefused, match="timed out"):
        approval.decide(world.decision(incident_id), world.deps)

    assert world.incident(incident_id).decision is None
    assert world.workflow.answers == []
    assert world.audit.actions(incident_id)[-1] == "decision_refused"


def test_a_decision_within_the_approval_timeout_is_accepted(world):
    incident_id = world.awaiting_approval()
    world.settings = dataclasses.replace(world.settings, approval_timeout_seconds=3600)

    result = approval.decide(world.decision(incident_id), world.deps)

    assert result["accepted"] is True


def test_the_card_lists_no_history_for_a_first_incident(world):
    world.awaiting_approval()

    assert "none: no earlier incident" in world.notifier.published[-1].message
