"""Step Functions: start the remediation execution (named after the incident), answer the
approval task, and read an execution's status (reconciliation)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from lambdas.adapters._aws import (
    ClientFactory,
    LazyClient,
    aws_call,
    client_factory,
    error_code,
    request_id,
)
from lambdas.logic.ports import ExecutionStarted
from lambdas.models.errors import AwsError, SettingsError, TaskNotWaiting

_TASK_ERRORS: Mapping[str, type[AwsError]] = {
    "TaskDoesNotExist": TaskNotWaiting,
    "TaskTimedOut": TaskNotWaiting,
    "InvalidToken": TaskNotWaiting,
}


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
            raise SettingsError("STATE_MACHINE_ARN is not set: cannot start the remediation")
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

    def execution_status(self, execution_arn: str) -> str | None:
        with aws_call("DescribeExecution"):
            try:
                response = self.client.describe_execution(executionArn=execution_arn)
            except ClientError as err:
                if error_code(err) == "ExecutionDoesNotExist":
                    return None
                raise
        return str(response["status"])


if TYPE_CHECKING:
    from lambdas.logic.ports import Workflow

    _port: Workflow = StepFunctionsWorkflow("arn")
