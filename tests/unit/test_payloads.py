from __future__ import annotations

import pytest

from sdc_remediation.lambdas.models.errors import MalformedEvent
from sdc_remediation.lambdas.models.payloads import (
    Outcome,
    parse_approval_request,
    parse_close_request,
    parse_decision_request,
    parse_incident_ref,
)


def test_incident_ref_reads_the_incident_id():
    assert parse_incident_ref({"incident_id": "sdc-a-i-1-20261130T081504"}).incident_id == (
        "sdc-a-i-1-20261130T081504"
    )


def test_incident_ref_without_an_id_names_the_field():
    with pytest.raises(MalformedEvent) as err:
        parse_incident_ref({})

    assert err.value.field == "incident_id"


def test_incident_id_with_characters_outside_the_execution_name_set_is_refused():
    with pytest.raises(MalformedEvent) as err:
        parse_incident_ref({"incident_id": "sdc/../other"})

    assert err.value.field == "incident_id"


def test_approval_request_needs_a_task_token():
    with pytest.raises(MalformedEvent) as err:
        parse_approval_request({"incident_id": "sdc-1"})

    assert err.value.field == "task_token"


def test_close_request_reads_outcome_and_error():
    request = parse_close_request(
        {"incident_id": "sdc-1", "outcome": "failed", "error": {"Error": "X", "Cause": "y"}}
    )

    assert request.outcome is Outcome.FAILED
    assert request.error == {"Error": "X", "Cause": "y"}


def test_close_request_with_an_unknown_outcome_names_the_field():
    with pytest.raises(MalformedEvent) as err:
        parse_close_request({"incident_id": "sdc-1", "outcome": "done", "error": None})

    assert err.value.field == "outcome"


def test_decision_request_keeps_raw_values_for_the_logic_to_judge():
    request = parse_decision_request(
        {"incident_id": 7, "decision": "maybe", "approval_execution_arn": "arn:x"}
    )

    assert (request.incident_id, request.decision, request.comment) == (7, "maybe", None)


def test_decision_request_needs_the_approval_execution_arn():
    with pytest.raises(MalformedEvent) as err:
        parse_decision_request({"incident_id": "sdc-1", "decision": "approve"})

    assert err.value.field == "approval_execution_arn"
