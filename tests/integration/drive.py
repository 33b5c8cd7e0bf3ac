"""Drivers that walk an incident through the handlers, in the order the remediation state
machine calls them, with the payloads docs/pipeline.md documents."""

from __future__ import annotations

import json
import os

from sdc_remediation.lambdas.handlers import (
    check_health,
    check_replacement,
    close_incident,
    decide,
    open_incident,
    replace_node,
    request_approval,
    start_health_check,
)
from tests.conftest import load_fixture
from tests.integration.conftest import SESSION, Aws, invoke

TOKEN = "AQCEAAAAKgAAAAMAAAAAAAAAAf-task-token-from-step-functions"
APPROVAL_EXECUTION = "arn:aws:states:us-west-2:123456789012:execution:sdc-approval:ops-1"
"""The approval execution `decision_input` starts first (in moto, as the console would)."""


def opened(aws: Aws) -> str:
    return invoke(open_incident, load_fixture("events", "contributor_alarm"))["incident_id"]


def health_checked(aws: Aws) -> str:
    incident_id = opened(aws)
    invoke(start_health_check, {"incident_id": incident_id})
    while invoke(check_health, {"incident_id": incident_id})["in_progress"]:
        pass
    return incident_id


def awaiting_approval(aws: Aws) -> str:
    incident_id = health_checked(aws)
    invoke(request_approval, {"incident_id": incident_id, "task_token": TOKEN})
    return incident_id


def decided(aws: Aws, decision: str) -> str:
    incident_id = awaiting_approval(aws)
    invoke(decide, decision_input(incident_id, decision))
    return incident_id


def decision_input(incident_id: str, decision: str, execution: str = APPROVAL_EXECUTION):
    """The payload the approval state machine gives decide, after starting the execution it
    names (named as `execution`'s last part, once) with the same input, as an approver would."""
    payload = {"incident_id": incident_id, "decision": decision, "comment": "checked the evidence"}
    sfn = SESSION.client("stepfunctions")
    name = execution.rsplit(":", 1)[-1]
    try:
        sfn.describe_execution(executionArn=execution)
    except sfn.exceptions.ExecutionDoesNotExist:
        sfn.start_execution(
            stateMachineArn=os.environ["APPROVAL_STATE_MACHINE_ARN"],
            name=name,
            input=json.dumps(payload),
        )
    return {**payload, "approval_execution_arn": execution}


def replaced(aws: Aws) -> str:
    incident_id = decided(aws, "approve")
    invoke(replace_node, {"incident_id": incident_id})
    while not invoke(check_replacement, {"incident_id": incident_id})["done"]:
        pass
    invoke(close_incident, {"incident_id": incident_id, "outcome": "replaced", "error": None})
    return incident_id
