"""The approval state machine from the outside: start an execution, as the console's "Start
execution" does, and wait for it to end. Only the `sdc` CLI does; the functions never start it
(who may approve = who may `states:StartExecution` on its ARN)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from sdc_remediation.lambdas.adapters._aws import (
    ClientFactory,
    LazyClient,
    aws_call,
    client_factory,
)
from sdc_remediation.lambdas.adapters.stepfunctions import StepFunctionsWorkflow
from sdc_remediation.lambdas.logic.ports import ExecutionStarted

ENDED: Final = frozenset({"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"})


@dataclass(frozen=True, slots=True)
class ExecutionEnded:
    """How an execution ended; `status` is still "RUNNING" when the wait gave up first."""

    arn: str
    status: str
    output: Any = None
    """The execution's output, parsed (decide returns `{incident_id, decision, accepted}`)."""
    error: str | None = None
    cause: str | None = None

    @property
    def reason(self) -> str | None:
        """The failure in words: a failed Lambda task's cause is the function's error JSON,
        whose `errorMessage` is the sentence `decide` raised (DecisionRefused: ...)."""
        if not self.cause:
            return self.error
        try:
            message = json.loads(self.cause).get("errorMessage")
        except (ValueError, AttributeError):
            message = None
        return str(message) if message else self.cause


class ApprovalExecutions:
    def __init__(
        self,
        state_machine_arn: str,
        factory: ClientFactory | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.state_machine_arn = state_machine_arn
        self._client = LazyClient(factory or client_factory("stepfunctions"))
        self._starter = StepFunctionsWorkflow(state_machine_arn, self._client.get)
        self._sleep = sleep
        self._monotonic = monotonic

    @property
    def client(self) -> Any:
        return self._client.get()

    def start(self, name: str, payload: Mapping[str, Any]) -> ExecutionStarted:
        """StartExecution named `name` with `payload` as its input. `already_existed` is true
        when an execution of that name ran before: then it is not this call's."""
        return self._starter.start_execution(name, payload)

    def wait(self, execution_arn: str, timeout: float, poll: float = 0.5) -> ExecutionEnded:
        """DescribeExecution until it has ended or `timeout` seconds have passed."""
        deadline = self._monotonic() + timeout
        while True:
            with aws_call("DescribeExecution"):
                described = self.client.describe_execution(executionArn=execution_arn)
            status = str(described["status"])
            if status in ENDED or self._monotonic() >= deadline:
                output = described.get("output")
                return ExecutionEnded(
                    arn=execution_arn,
                    status=status,
                    output=json.loads(output) if output else None,
                    error=described.get("error"),
                    cause=described.get("cause"),
                )
            self._sleep(poll)
