"""The synthesized definitions run in moto's Step Functions interpreter.

The functions are stubs here (the handlers have their own tests, and tests/e2e runs the real
ones): every Lambda invocation moto makes is routed by function ARN to a scripted answer.
This proves the ASL itself: paths, intrinsic functions, the callback, the timeout, the loops.
Waits run on the local run's shortened clock (`sdc_remediation.infra.local.interpreter`); the approval timeout
stays in real seconds."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.awslambda_simple.models import LambdaSimpleBackend

from sdc_remediation.infra.local.interpreter import local_interpreter
from sdc_remediation.infra.local.run import WAIT_SCALE
from sdc_remediation.infra.stack.template import (
    function_handlers,
    placeholder_arns,
    state_machine_definitions,
)

pytestmark = pytest.mark.slow

REGION = "us-west-2"
Stub = Callable[[dict[str, Any]], Any]


class Cluster:
    """Scripted function answers, in the shapes of docs/pipeline.md."""

    def __init__(self, *, replace_statuses: list[str], checks_until_replaced: int = 2) -> None:
        self.calls: list[str] = []
        self.payloads: dict[str, list[dict[str, Any]]] = {}
        self.task_token: str | None = None
        self.replace_statuses = replace_statuses
        self.checks_until_replaced = checks_until_replaced

    def answer(self, module: str, payload: dict[str, Any]) -> Any:
        self.calls.append(module)
        self.payloads.setdefault(module, []).append(payload)
        count = self.calls.count(module)
        if module == "isolate_node":
            return {"isolated": True, "state": "isolated", "reason": None}
        if module == "start_health_check":
            return {"status": "DeepHealthCheckInProgress", "started": True}
        if module == "check_health":
            return {
                "status": "Running" if count > 1 else "DeepHealthCheckInProgress",
                "in_progress": count < 2,
            }
        if module == "request_approval":
            self.task_token = payload["task_token"]
            return {"incident_id": payload["incident_id"], "notified": True}
        if module == "replace_node":
            return {"status": self.replace_statuses[min(count, len(self.replace_statuses)) - 1]}
        if module == "check_replacement":
            done = count >= self.checks_until_replaced
            return {"done": done, "new_instance_id": "i-0fedcba9876543210" if done else None}
        if module == "close_incident":
            return {"incident_id": payload["incident_id"], "state": payload["outcome"]}
        if module == "decide":
            boto3.client("stepfunctions", region_name=REGION).send_task_success(
                taskToken=self.task_token,
                output=json.dumps(
                    {
                        "incident_id": payload["incident_id"],
                        "decision": payload["decision"],
                        "comment": payload["comment"],
                        "approval_execution_arn": payload["approval_execution_arn"],
                    }
                ),
            )
            return {
                "incident_id": payload["incident_id"],
                "decision": payload["decision"],
                "accepted": True,
            }
        raise AssertionError(f"unexpected invocation of {module}")


@pytest.fixture
def machines(variant_template, monkeypatch) -> Iterator[tuple[Any, dict[str, str], list[Cluster]]]:
    arns = placeholder_arns(variant_template)
    modules = {
        arns[lid]: h.split(".")[-2] for lid, h in function_handlers(variant_template).items()
    }
    current: list[Cluster] = []

    def invoke(self, function_name, qualifier, body, headers, response_headers):
        return json.dumps(current[0].answer(modules[function_name], json.loads(body))).encode()

    monkeypatch.setattr(LambdaSimpleBackend, "invoke", invoke)
    with (
        mock_aws(
            config={
                "lambda": {"use_docker": False},
                "stepfunctions": {"execute_state_machine": True},
            }
        ),
        local_interpreter(WAIT_SCALE),
    ):
        client = boto3.client("stepfunctions", region_name=REGION)
        created = {}
        for logical_id, text in state_machine_definitions(variant_template, arns).items():
            name = variant_template["Resources"][logical_id]["Properties"]["StateMachineName"]
            created[logical_id] = client.create_state_machine(
                name=name,
                definition=text,
                roleArn="arn:aws:iam::123456789012:role/states",
                type="STANDARD",
            )["stateMachineArn"]
        yield client, created, current


def _start(client, machines: dict[str, str]) -> str:
    return client.start_execution(
        stateMachineArn=machines["RemediationStateMachine"],
        name="sdc-ml-cluster-1-i-0abc1234def567890-20261130T081504",
        input=json.dumps(
            {
                "incident_id": "sdc-ml-cluster-1-i-0abc1234def567890-20261130T081504",
                "cluster_name": "ml-cluster-1",
                "instance_id": "i-0abc1234def567890",
            }
        ),
    )["executionArn"]


def _wait_for(predicate: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _decide(client, machines, cluster: Cluster, decision: str) -> None:
    _wait_for(lambda: cluster.task_token is not None)
    client.start_execution(
        stateMachineArn=machines["ApprovalStateMachine"],
        name=f"{decision}-1",
        input=json.dumps(
            {
                "incident_id": "sdc-ml-cluster-1-i-0abc1234def567890-20261130T081504",
                "decision": decision,
                "comment": "ECC clean, replay mismatch persistent",
            }
        ),
    )


def _finish(client, execution_arn: str) -> dict[str, Any]:
    result: dict[str, Any] = {}

    def done() -> bool:
        result.update(client.describe_execution(executionArn=execution_arn))
        return result["status"] != "RUNNING"

    _wait_for(done)
    return result


def test_approve_replaces_after_a_retry_and_closes_as_replaced(machines):
    client, arns, current = machines
    cluster = Cluster(replace_statuses=["retry", "requested"])
    current.append(cluster)

    execution = _start(client, arns)
    _decide(client, arns, cluster, "approve")
    result = _finish(client, execution)

    assert result["status"] == "SUCCEEDED"
    assert cluster.calls == [
        "isolate_node",
        "start_health_check",
        "check_health",
        "check_health",
        "request_approval",
        "decide",
        "replace_node",
        "replace_node",
        "check_replacement",
        "check_replacement",
        "close_incident",
    ]
    assert cluster.payloads["close_incident"] == [
        {
            "incident_id": "sdc-ml-cluster-1-i-0abc1234def567890-20261130T081504",
            "outcome": "replaced",
            "error": None,
        }
    ]
    approval = cluster.payloads["request_approval"][0]["approval_input"]
    assert (
        approval["approve"]["incident_id"] == cluster.payloads["close_incident"][0]["incident_id"]
    )


def test_reject_closes_as_rejected_without_replacing(machines):
    client, arns, current = machines
    cluster = Cluster(replace_statuses=["requested"])
    current.append(cluster)

    execution = _start(client, arns)
    _decide(client, arns, cluster, "reject")
    result = _finish(client, execution)

    assert result["status"] == "SUCCEEDED"
    assert "replace_node" not in cluster.calls
    assert cluster.payloads["close_incident"][0]["outcome"] == "rejected"


def test_no_decision_before_the_timeout_closes_as_expired_without_replacing(machines):
    client, arns, current = machines
    cluster = Cluster(replace_statuses=["requested"])
    current.append(cluster)

    result = _finish(client, _start(client, arns))

    assert result["status"] == "SUCCEEDED"
    assert "replace_node" not in cluster.calls
    (close,) = cluster.payloads["close_incident"]
    assert close["outcome"] == "expired"
    assert close["error"]["Error"] == "States.Timeout"


def test_a_replacement_that_never_finishes_closes_as_failed_and_the_run_fails(machines):
    client, arns, current = machines
    cluster = Cluster(replace_statuses=["requested"], checks_until_replaced=99)
    current.append(cluster)

    execution = _start(client, arns)
    _decide(client, arns, cluster, "approve")
    result = _finish(client, execution)

    assert result["status"] == "FAILED"
    assert cluster.calls.count("check_replacement") == 2  # sdc:replacementMaxPolls
    (close,) = cluster.payloads["close_incident"]
    assert close["outcome"] == "failed"
    assert close["error"]["Error"] == "ReplacementTimedOut"
