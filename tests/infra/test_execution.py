"""The synthesized definitions run in moto's Step Functions interpreter.

The functions are stubs here (the handlers have their own tests, and tests/e2e runs the real
ones): every Lambda invocation moto makes is routed by function ARN to a scripted answer.
This proves the ASL itself: paths, intrinsic functions, the callback, the timeout, the loops.
Waits run on the local run's shortened clock (`sdc_remediation.infra.local.interpreter`); the approval timeout
stays in real seconds."""

from __future__ import annotations

import copy
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
from sdc_remediation.infra.local.state_run import (
    TIMED_OUT,
    Answered,
    Ended,
    FunctionError,
    Sleep,
    StateRun,
)
from sdc_remediation.infra.stack.template import (
    function_handlers,
    placeholder_arns,
    state_machine_definitions,
)
from sdc_remediation.lambdas.models.hyperpod import NodeStatus

pytestmark = pytest.mark.slow

REGION = "us-west-2"
COMMENT = "ECC clean, replay mismatch persistent"
Stub = Callable[[dict[str, Any]], Any]


class Cluster:
    """Scripted function answers, in the shapes of docs/pipeline.md."""

    def __init__(
        self,
        *,
        replace_statuses: list[str],
        checks_until_replaced: int = 2,
        check_answers: list[dict[str, Any]] | None = None,
        errors: dict[str, list[str]] | None = None,
    ) -> None:
        self.calls: list[str] = []
        self.payloads: dict[str, list[dict[str, Any]]] = {}
        self.task_token: str | None = None
        self.replace_statuses = replace_statuses
        self.checks_until_replaced = checks_until_replaced
        self.check_answers = check_answers
        """check_health's answers in turn (default: in progress once, then passed)."""
        self.errors = errors or {}
        """Function → the error types its next invocations raise, in turn."""
        self.send_task_success: Callable[[str, dict[str, Any]], None] = _send_on_moto

    def answer(self, module: str, payload: dict[str, Any]) -> Any:
        self.calls.append(module)
        self.payloads.setdefault(module, []).append(payload)
        count = self.calls.count(module)
        if self.errors.get(module):
            raise FunctionError.of_function(self.errors[module].pop(0), f"{module} failed")
        if module == "isolate_node":
            return {"isolated": True, "state": "isolated", "reason": None}
        if module == "start_health_check":
            return {"status": "DeepHealthCheckInProgress", "started": True}
        if module == "check_health":
            if self.check_answers is not None:
                return self.check_answers[min(count, len(self.check_answers)) - 1]
            return {
                "status": "Running" if count > 1 else "DeepHealthCheckInProgress",
                "in_progress": count < 2,
            }
        if module == "reboot_node":
            return {"status": "requested"}
        if module == "check_reboot":
            return {"done": count >= 2, "gone": False}
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
            assert self.task_token is not None
            self.send_task_success(
                self.task_token,
                {
                    "incident_id": payload["incident_id"],
                    "decision": payload["decision"],
                    "comment": payload["comment"],
                    "approval_execution_arn": payload["approval_execution_arn"],
                },
            )
            return {
                "incident_id": payload["incident_id"],
                "decision": payload["decision"],
                "accepted": True,
            }
        raise AssertionError(f"unexpected invocation of {module}")


def _send_on_moto(token: str, output: dict[str, Any]) -> None:
    boto3.client("stepfunctions", region_name=REGION).send_task_success(
        taskToken=token, output=json.dumps(output)
    )


@pytest.fixture
def machines(variant_template, monkeypatch) -> Iterator[tuple[Any, dict[str, str], list[Cluster]]]:
    arns = placeholder_arns(variant_template)
    modules = {
        arns[lid]: h.split(".")[-2] for lid, h in function_handlers(variant_template).items()
    }
    current: list[Cluster] = []

    def invoke(self, function_name, qualifier, body, headers, response_headers):
        try:
            answer = current[0].answer(modules[function_name], json.loads(body))
        except FunctionError as failed:
            response_headers["x-amz-function-error"] = "Unhandled"
            return failed.cause.encode()
        return json.dumps(answer).encode()

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
                "comment": COMMENT,
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


# -- the fleet what-if's runner enters the states moto's interpreter enters ----------------------

SCENARIOS: dict[str, tuple[dict[str, Any], str | None]] = {
    "approved, the replacement retried once": (
        {"replace_statuses": ["retry", "requested"]},
        "approve",
    ),
    "rejected": ({"replace_statuses": ["requested"]}, "reject"),
    "no decision before the timeout": ({"replace_statuses": ["requested"]}, None),
    "a replacement that never finishes": (
        {"replace_statuses": ["requested"], "checks_until_replaced": 99},
        "approve",
    ),
    "rebooted, then the check passes": (
        {
            "replace_statuses": ["requested"],
            "check_answers": [
                {"status": "Failure", "in_progress": False},
                {"status": "Running", "in_progress": False, "passed_after_reboot": True},
            ],
        },
        "reboot",
    ),
    "held before the check": (
        {
            "replace_statuses": ["requested"],
            "check_answers": [{"in_progress": False, "held": True}],
        },
        None,
    ),
    "a job-level check": (
        {
            "replace_statuses": ["requested"],
            "check_answers": [{"in_progress": False, "scope": "job"}],
        },
        None,
    ),
    "the node gone": (
        {
            "replace_statuses": ["requested"],
            "check_answers": [{"in_progress": False, "status": NodeStatus.NOT_FOUND.value}],
        },
        None,
    ),
    "an answer that lacks a field": (
        {"replace_statuses": ["requested"], "check_answers": [{"status": "Running"}]},
        "reject",
    ),
    "throttled once, then approved": (
        {"replace_statuses": ["requested"], "errors": {"start_health_check": ["Throttled"]}},
        "approve",
    ),
    "an error no retry takes": (
        {"replace_statuses": ["requested"], "errors": {"isolate_node": ["ValueError"]}},
        None,
    ),
}


def _on_moto(client, arns, cluster: Cluster, decision: str | None) -> tuple[str, list[str]]:
    execution = _start(client, arns)
    if decision is not None:
        _decide(client, arns, cluster, decision)
    status = _finish(client, execution)["status"]
    history = client.get_execution_history(executionArn=execution, maxResults=1000)["events"]
    entered = [
        e["stateEnteredEventDetails"]["name"] for e in history if e["type"].endswith("StateEntered")
    ]
    return status, entered


def _on_the_virtual_clock(
    template, cluster: Cluster, decision: str | None
) -> tuple[str, list[str]]:
    arns = placeholder_arns(template)
    modules = {arns[lid]: h.split(".")[-2] for lid, h in function_handlers(template).items()}
    definitions = {k: json.loads(v) for k, v in state_machine_definitions(template, arns).items()}
    answers: list[dict[str, Any]] = []
    cluster.send_task_success = lambda token, output: answers.append(output)
    tokens = iter(f"token-{n}" for n in range(100))

    def invoke(arn: str, payload: Any) -> Any:
        return json.loads(json.dumps(cluster.answer(modules[arn], json.loads(json.dumps(payload)))))

    incident_id = "sdc-ml-cluster-1-i-0abc1234def567890-20261130T081504"
    run = StateRun(
        definitions["RemediationStateMachine"],
        {
            "incident_id": incident_id,
            "cluster_name": "ml-cluster-1",
            "instance_id": "i-0abc1234def567890",
        },
        execution_id="remediation-1",
        invoke=invoke,
        new_token=lambda: next(tokens),
    )
    pause = run.step()
    while not isinstance(pause, Ended):
        if isinstance(pause, Sleep):
            pause = run.step()
            continue
        if decision is None:
            pause = run.step(TIMED_OUT)
            continue
        approval = StateRun(
            definitions["ApprovalStateMachine"],
            {"incident_id": incident_id, "decision": decision, "comment": COMMENT},
            execution_id="approval-1",
            invoke=invoke,
            new_token=lambda: next(tokens),
        )
        assert isinstance(approval.step(), Ended)
        pause = run.step(Answered(answers.pop()))
    return pause.status, run.entered


def _without_ids(payloads: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The payloads but for the ids each interpreter makes its own way (tokens, execution ARNs)."""
    made = {"task_token", "approval_execution_arn"}
    return {
        f: [{k: v for k, v in p.items() if k not in made} for p in ps] for f, ps in payloads.items()
    }


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_virtual_clock_runner_enters_the_states_moto_enters(
    machines, variant_template, scenario
):
    """The fleet what-if runs the definitions with `StateRun`: on every path the definitions
    have, it calls the same functions in the same order, enters the same states and ends the
    same way as moto's interpreter."""
    script, decision = SCENARIOS[scenario]
    client, arns, current = machines
    on_moto = Cluster(**script)
    current.append(on_moto)
    on_the_clock = Cluster(**copy.deepcopy(script))

    moto_status, moto_entered = _on_moto(client, arns, on_moto, decision)
    status, entered = _on_the_virtual_clock(variant_template, on_the_clock, decision)

    assert on_the_clock.calls == on_moto.calls
    assert _without_ids(on_the_clock.payloads) == _without_ids(on_moto.payloads)
    assert entered == moto_entered
    assert status == moto_status
