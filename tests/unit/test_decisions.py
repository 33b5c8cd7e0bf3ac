from __future__ import annotations

import pytest

from sdc_remediation.lambdas.logic.safety.decisions import (
    MAX_COMMENT,
    check_accepts_decision,
    validate_decision,
)
from sdc_remediation.lambdas.models.errors import DecisionRefused
from sdc_remediation.lambdas.models.incident import Incident, IncidentState, task_token_digest
from sdc_remediation.lambdas.models.payloads import Decision, DecisionRequest
from sdc_remediation.lambdas.models.recovery import DecisionRecord


def request(**changes) -> DecisionRequest:
    values = {
        "incident_id": "sdc-1",
        "decision": "approve",
        "comment": "ok",
        "approval_execution_arn": "arn:exec",
    }
    values.update(changes)
    return DecisionRequest(**values)


def waiting(**changes) -> Incident:
    values = {
        "incident_id": "sdc-1",
        "cluster_name": "c",
        "instance_id": "i-0abc1234def567890",
        "state": IncidentState.AWAITING_APPROVAL,
        "created_at": "t",
        "updated_at": "t",
        "task_token_sha256": task_token_digest("tok"),
    }
    values.update(changes)
    return Incident(**values)


@pytest.mark.parametrize("raw", ["approve", "Approve", " APPROVE "])
def test_approve_is_accepted_whatever_its_case(raw):
    assert validate_decision(request(decision=raw)).decision is Decision.APPROVE


@pytest.mark.parametrize("raw", ["yes", "", None, 1, "approved"])
def test_unknown_decision_values_are_refused(raw):
    with pytest.raises(DecisionRefused, match="decision must be"):
        validate_decision(request(decision=raw))


def test_missing_comment_is_an_empty_comment():
    assert validate_decision(request(comment=None)).comment == ""


def test_a_comment_that_is_not_text_is_refused():
    with pytest.raises(DecisionRefused, match="comment"):
        validate_decision(request(comment={"why": "x"}))


def test_an_overlong_comment_is_refused():
    with pytest.raises(DecisionRefused, match="longer"):
        validate_decision(request(comment="x" * (MAX_COMMENT + 1)))


def test_an_incident_id_that_cannot_exist_is_refused():
    with pytest.raises(DecisionRefused, match="incident_id"):
        validate_decision(request(incident_id="../../etc"))


def test_an_incident_awaiting_its_first_decision_hands_out_its_token():
    assert check_accepts_decision(waiting(), task_token="tok") == "tok"


def test_a_token_whose_digest_is_not_the_incidents_is_refused():
    with pytest.raises(DecisionRefused, match="not the one its approval request recorded"):
        check_accepts_decision(waiting(), task_token="another request's token")


@pytest.mark.parametrize(
    ("digest", "token"), [(None, "tok"), (task_token_digest("tok"), None)], ids=["digest", "token"]
)
def test_an_incident_without_a_token_or_its_digest_refuses_a_decision(digest, token):
    with pytest.raises(DecisionRefused, match="holds no task token"):
        check_accepts_decision(waiting(task_token_sha256=digest), task_token=token)


def test_an_incident_not_awaiting_approval_refuses_a_decision():
    with pytest.raises(DecisionRefused, match="health_check, not awaiting approval"):
        check_accepts_decision(waiting(state=IncidentState.HEALTH_CHECK))


def test_a_second_decision_is_refused_naming_the_first():
    first = DecisionRecord(Decision.REJECT, None, "arn:first", "t1")

    with pytest.raises(DecisionRefused, match="already decided: reject"):
        check_accepts_decision(waiting(decision=first))
