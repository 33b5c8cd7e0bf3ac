"""The state machine's functions on moto, called with the payloads docs/pipeline.md documents,
in the order the remediation state machine calls them."""

from __future__ import annotations

import json

import pytest

from sdc_remediation.lambdas.adapters.stepfunctions import StepFunctionsWorkflow
from sdc_remediation.lambdas.handlers import (
    check_health,
    check_replacement,
    close_incident,
    decide,
    replace_node,
    start_health_check,
)
from sdc_remediation.lambdas.models.errors import DependencyFailed
from tests.integration.conftest import CLUSTER, INCIDENTS_TABLE, INSTANCE, invoke
from tests.integration.drive import (
    APPROVAL_EXECUTION,
    TOKEN,
    awaiting_approval,
    decided,
    decision_input,
    opened,
)


def test_start_health_check_returns_the_node_status_and_that_it_started(aws):
    incident_id = opened(aws)

    result = invoke(start_health_check, {"incident_id": incident_id})

    assert result == {
        "status": "DeepHealthCheckInProgress",
        "started": True,
        "held": False,
        "scope": "node",
    }
    assert aws.incident(incident_id).state == "health_check"


def test_check_health_polls_until_the_check_is_over(aws):
    incident_id = opened(aws)
    invoke(start_health_check, {"incident_id": incident_id})

    polls = [invoke(check_health, {"incident_id": incident_id}) for _ in range(2)]

    assert polls == [
        {
            "status": "DeepHealthCheckInProgress",
            "in_progress": True,
            "scope": "node",
            "held": False,
            "passed_after_reboot": False,
        },
        {
            "status": "Running",
            "in_progress": False,
            "scope": "node",
            "held": False,
            "passed_after_reboot": False,
        },
    ]


def test_request_approval_stores_the_token_and_publishes_the_card_without_it(aws):
    incident_id = awaiting_approval(aws)

    assert aws.incidents.task_token(incident_id) == TOKEN
    (card,) = aws.messages()
    assert TOKEN not in json.dumps(card)
    assert (
        json.dumps(
            {
                "incident_id": incident_id,
                "decision": "approve",
                "comment": "<why>",
            }
        )
        in card["Message"]
    )
    assert card["MessageAttributes"]["kind"]["Value"] == "approval_request"


def test_decide_accepts_the_approval_state_machine_input(aws):
    incident_id = awaiting_approval(aws)

    result = invoke(decide, decision_input(incident_id, "approve"))

    assert (result["incident_id"], result["decision"], result["accepted"]) == (
        incident_id,
        "approve",
        True,
    )
    assert aws.incident(incident_id).decision.approval_execution_arn == APPROVAL_EXECUTION


def test_an_incident_waiting_with_its_token_in_its_record_is_decided_with_that_token(
    aws, monkeypatch
):
    """An incident that waited for approval when the token moved to its own item."""
    incident_id = awaiting_approval(aws)
    key = {"pk": {"S": f"INCIDENT#{incident_id}"}, "sk": {"S": "META"}}
    aws.dynamodb.update_item(
        TableName=INCIDENTS_TABLE,
        Key=key,
        UpdateExpression="SET task_token = :token REMOVE task_token_sha256",
        ExpressionAttributeValues={":token": {"S": TOKEN}},
    )
    aws.incidents.forget_task_token(incident_id)
    sent: list[str] = []
    send = StepFunctionsWorkflow.send_task_success
    monkeypatch.setattr(
        StepFunctionsWorkflow,
        "send_task_success",
        lambda self, token, output: sent.append(token) or send(self, token, output),
    )

    result = invoke(decide, decision_input(incident_id, "approve"))

    assert (result["accepted"], sent) == (True, [TOKEN])
    record = aws.dynamodb.get_item(TableName=INCIDENTS_TABLE, Key=key)["Item"]
    assert "task_token" not in record


def test_replace_node_requests_the_replacement_on_hyperpod(aws):
    incident_id = decided(aws, "approve")

    assert invoke(replace_node, {"incident_id": incident_id}) == {"status": "requested"}
    assert aws.hyperpod.calls_to("BatchReplaceClusterNodes") == [
        {"ClusterName": CLUSTER, "NodeIds": [INSTANCE]}
    ]


def test_check_replacement_reports_the_new_instance_when_the_old_one_is_gone(aws):
    incident_id = decided(aws, "approve")
    invoke(replace_node, {"incident_id": incident_id})

    results = [invoke(check_replacement, {"incident_id": incident_id}) for _ in range(3)]

    assert [r["done"] for r in results] == [False, False, True]
    assert results[-1]["new_instance_id"] == aws.hyperpod.replaced_by[INSTANCE]


def test_the_rejected_path_replaces_nothing_and_closes_rejected(aws):
    incident_id = decided(aws, "reject")

    result = invoke(
        close_incident, {"incident_id": incident_id, "outcome": "rejected", "error": None}
    )

    assert result == {"incident_id": incident_id, "state": "rejected"}
    assert aws.hyperpod.calls_to("BatchReplaceClusterNodes") == []


def test_the_expired_path_closes_expired_and_drops_the_token(aws):
    incident_id = awaiting_approval(aws)

    result = invoke(
        close_incident, {"incident_id": incident_id, "outcome": "expired", "error": None}
    )

    assert result["state"] == "expired"
    assert aws.incidents.task_token(incident_id) is None


def test_a_failed_aws_call_leaves_the_incident_failed_and_audited_then_closes_failed(aws):
    incident_id = opened(aws)
    refused = DependencyFailed("not Running", code="ValidationException", request_id="r-1")
    aws.hyperpod.fail_next("StartClusterHealthCheck", refused)

    with pytest.raises(DependencyFailed):
        invoke(start_health_check, {"incident_id": incident_id})
    assert aws.incident(incident_id).state == "failed"
    assert aws.actions(incident_id)[-1] == "step_failed"

    catch_output = {"Error": "DependencyFailed", "Cause": "not Running"}
    result = invoke(
        close_incident, {"incident_id": incident_id, "outcome": "failed", "error": catch_output}
    )

    assert result["state"] == "failed"
    assert "closed: failed" in aws.messages()[-1]["Subject"]


def test_dry_run_records_would_replace_and_never_calls_batch_replace(aws, monkeypatch):
    from dataclasses import replace

    from sdc_remediation.lambdas.handlers import _deps

    current = _deps.deps()
    _deps.set_deps(replace(current, settings=replace(current.settings, dry_run=True)))
    incident_id = decided(aws, "approve")

    assert invoke(replace_node, {"incident_id": incident_id}) == {"status": "dry_run"}
    assert invoke(check_replacement, {"incident_id": incident_id})["done"] is True
    assert aws.hyperpod.calls_to("BatchReplaceClusterNodes") == []
    assert "replacement_would_replace" in aws.actions(incident_id)
