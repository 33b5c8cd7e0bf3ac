"""Step Functions: start the remediation execution (named after the incident), answer the
approval task, and read an execution's status (reconciliation)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from sdc_remediation.lambdas.adapters._aws import (
    ClientFactory,
    LazyClient,
    aws_call,
    client_factory,
    error_code,
    request_id,
)
from sdc_remediation.lambdas.logic.ports import ExecutionRecord, ExecutionStarted
from sdc_remediation.lambdas.models.environment import EnvVar
from sdc_remediation.lambdas.models.errors import (
    AwsError,
    ExecutionNotFound,
    SettingsError,
    TaskNotWaiting,
)

_TASK_ERRORS: Mapping[str, type[AwsError]] = {
    "TaskDoesNotExist": TaskNotWaiting,
    "TaskTimedOut": TaskNotWaiting,
    "InvalidToken": TaskNotWaiting,
}

_DESCRIBE_ERRORS: Mapping[str, type[AwsError]] = {
    "ExecutionDoesNotExist": ExecutionNotFound,
    "InvalidArn": ExecutionNotFound,
    "AccessDeniedException": ExecutionNotFound,
    "ValidationException": ExecutionNotFound,
}
"""decide's role may describe executions of the approval state machine only: another one is
AccessDenied, which means the same as not existing here."""


def execution_arn(state_machine_arn: str, name: str) -> str:
    """`arn:aws:states:r:a:execution:<machine>:<name>` from the state machine's ARN."""
    prefix, _, machine = state_machine_arn.rpartition(":stateMachine:")
    return f"{prefix}:execution:{machine}:{name}"


class StepFunctionsWorkflow:
    def __init__(self, state_machine_arn: str | None, factory: ClientFactory | None = None) -> None:
        self.state_machine_arn = state_machine_arn
        self._client = LazyClient(factory or client_factory("stepfunctions"))

    @property
    def client(self) -> Any:
        return self._client.get()

    def start_execution(self, name: str, payload: Mapping[str, Any]) -> ExecutionStarted:
        """Same name again: Step Functions answers with the existing execution (same input) or
        ExecutionAlreadyExists (other input); either way there is one execution."""
        if not self.state_machine_arn:
            raise SettingsError(
                f"{EnvVar.STATE_MACHINE_ARN} is not set: cannot start the remediation"
            )
        with aws_call("StartExecution"):
            try:
                response = self.client.start_execution(
                    stateMachineArn=self.state_machine_arn,
                    name=name,
                    input=json.dumps(dict(payload), sort_keys=True),
                )
            except ClientError as err:
                if error_code(err) != "ExecutionAlreadyExists":
                    raise
                return ExecutionStarted(
                    arn=execution_arn(self.state_machine_arn, name),
                    request_id=request_id(err.response),
                    already_existed=True,
                )
        return ExecutionStarted(arn=response["executionArn"], request_id=request_id(response))

    def send_task_success(self, task_token: str, output: Mapping[str, Any]) -> str | None:
        with aws_call("SendTaskSuccess", _TASK_ERRORS):
            response = self.client.send_task_success(
                taskToken=task_token, output=json.dumps(dict(output), sort_keys=True)
            )
        return request_id(response)

    def describe_execution(self, execution_arn: str) -> ExecutionRecord:
        with aws_call("DescribeExecution", _DESCRIBE_ERRORS):
            response = self.client.describe_execution(executionArn=execution_arn)
        raw = response.get("input")
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        return ExecutionRecord(
            arn=str(response.get("executionArn", execution_arn)),
            state_machine_arn=str(response.get("stateMachineArn", "")),
            status=str(response.get("status", "")),
            input=parsed,
            request_id=request_id(response),
        )


if TYPE_CHECKING:
    from sdc_remediation.lambdas.logic.ports import Workflow

    _port: Workflow = StepFunctionsWorkflow("arn")
