"""The building blocks of the state machine definitions (Amazon States Language, JSONPath), as
plain data: a Lambda task with its retries and catch, bounded polls and counters, a guarded
Choice rule, a failure that records why, and the close that ends every run.

Every Task: `arn:aws:states:::lambda:invoke` with an explicit Payload, a ResultSelector that
keeps `$.Payload` (the function's return value) under the task's ResultPath, a retry on Lambda
service errors, on an invocation that ran out of time (`TIMEOUT_ERRORS`: the function was killed
by its own timeout, Lambda could not say how it ended, or the task's `TimeoutSeconds` passed)
and on the steps' own retryable errors (`Throttled`, `ServiceUnavailable`: the handler left the
incident as it was), and `Catch States.ALL → CloseFailed`.

Retrying a killed step is safe because every step resumes from what it wrote ahead: a step
that acts on a node (cordon, health check, reboot, replacement) records the request before it
sends it, and its retry reads that record instead of sending blindly or skipping the call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from sdc_remediation.lambdas.models.payloads import Outcome

LAMBDA_INVOKE: Final = "arn:aws:states:::lambda:invoke"
LAMBDA_INVOKE_WAIT_FOR_TASK_TOKEN: Final = "arn:aws:states:::lambda:invoke.waitForTaskToken"

LAMBDA_SERVICE_ERRORS: Final = (
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
)
"""Transient errors of the Invoke API itself (not of the handler): retried with backoff."""

TIMEOUT_ERRORS: Final = (
    "Sandbox.Timedout",
    "Runtime.ExitError",
    "Lambda.Unknown",
    "States.Timeout",
)
"""An invocation that ended without an answer: `Sandbox.Timedout` (Lambda killed the function at
its timeout), `Runtime.ExitError` (the function's process died: out of memory, a crash),
`Lambda.Unknown` (Lambda could not say how it ended), `States.Timeout` (the task's own
`TimeoutSeconds` passed). The step may have acted; its retry resumes from its write-ahead
record. Not on the approval task, whose `States.Timeout` is the approval expiring."""
TIMEOUT_RETRY_INTERVAL_SECONDS: Final = 5
TIMEOUT_RETRY_ATTEMPTS: Final = 3

TASK_TIMEOUT_SECONDS: Final = 120
"""A Lambda task's own `TimeoutSeconds`: longer than every function's timeout (a test holds
every function to it), so it only ends an invocation whose answer never came back."""

RETRYABLE_STEP_ERRORS: Final = ("Throttled", "ServiceUnavailable")
"""The handlers' own retryable errors (Lambda's `errorType` is the exception's class name,
`sdc_remediation.lambdas.models.errors`): AWS throttled a call or failed on its side after the SDK's own
retries. The step left the incident unchanged, so calling it again is safe."""
STEP_RETRY_INTERVAL_SECONDS: Final = 2
STEP_RETRY_ATTEMPTS: Final = 5

CLOSE_FAILED: Final = "CloseFailed"
CLOSE_EXPIRED: Final = "CloseExpired"
CLOSE_HELD: Final = "CloseHeld"

State = dict[str, Any]


def service_retry(*, timeouts: tuple[str, ...] = TIMEOUT_ERRORS) -> list[State]:
    """The retries of every Lambda task; `timeouts`: the timeout errors it retries (the approval
    task leaves `States.Timeout` out: for it, that is the approval expiring)."""
    return [
        {
            "ErrorEquals": list(LAMBDA_SERVICE_ERRORS),
            "IntervalSeconds": 2,
            "MaxAttempts": 3,
            "BackoffRate": 2,
        },
        {
            "ErrorEquals": list(timeouts),
            "IntervalSeconds": TIMEOUT_RETRY_INTERVAL_SECONDS,
            "MaxAttempts": TIMEOUT_RETRY_ATTEMPTS,
            "BackoffRate": 2,
        },
        {
            "ErrorEquals": list(RETRYABLE_STEP_ERRORS),
            "IntervalSeconds": STEP_RETRY_INTERVAL_SECONDS,
            "MaxAttempts": STEP_RETRY_ATTEMPTS,
            "BackoffRate": 2,
        },
    ]


RESULT_SELECTOR: Final = {"Payload.$": "$.Payload"}
"""Keep the function's return value (`Payload`), drop the invoke metadata (status code, headers)."""


def when(path: str, test: Mapping[str, Any]) -> dict[str, Any]:
    """`path` satisfies `test`, guarded by IsPresent: a return value that lacks a documented
    field takes the Choice's default branch instead of failing the execution with an
    uncatchable States.Runtime error (and leaving the incident open)."""
    return {"And": [{"Variable": path, "IsPresent": True}, {"Variable": path, **test}]}


def task(
    function_arn: str,
    payload: Mapping[str, Any],
    *,
    result_path: str,
    next_state: str | None = None,
    catch_to: str = CLOSE_FAILED,
    comment: str | None = None,
) -> State:
    state: State = {"Type": "Task"}
    if comment:
        state["Comment"] = comment
    state.update(
        {
            "Resource": LAMBDA_INVOKE,
            "Parameters": {"FunctionName": function_arn, "Payload": dict(payload)},
            "ResultSelector": dict(RESULT_SELECTOR),
            "ResultPath": result_path,
            "TimeoutSeconds": TASK_TIMEOUT_SECONDS,
            "Retry": service_retry(),
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": catch_to}],
        }
    )
    if next_state is None:
        state["End"] = True
    else:
        state["Next"] = next_state
    return state


def incident() -> dict[str, str]:
    return {"incident_id.$": "$.incident_id"}


def count(counter: str, next_state: str) -> State:
    path = f"$.polls.{counter}"
    return {
        "Type": "Pass",
        "Parameters": {"count.$": f"States.MathAdd({path}.count, 1)"},
        "ResultPath": path,
        "Next": next_state,
    }


def wait(seconds: int, next_state: str) -> State:
    return {"Type": "Wait", "Seconds": seconds, "Next": next_state}


def poll(
    states: tuple[str, str, str],
    seconds: int,
    function_arn: str,
    result_path: str,
    counter: str,
    choice: str,
) -> dict[str, State]:
    """A bounded poll, `states` = (wait, task, count): wait → the function → bump `counter` →
    `choice`, which decides whether to go round again (the loop's bound lives there)."""
    wait_state, task_state, count_state = states
    return {
        wait_state: wait(seconds, task_state),
        task_state: task(function_arn, incident(), result_path=result_path, next_state=count_state),
        count_state: count(counter, choice),
    }


def failure(error: str, cause: str) -> State:
    """Record why the run gives up in $.error (CloseFailed passes it on), then close as failed."""
    return {
        "Type": "Pass",
        "Result": {"Error": error, "Cause": cause},
        "ResultPath": "$.error",
        "Next": CLOSE_FAILED,
    }


def close(function_arn: str, outcome: Outcome, *, error_from_state: bool, next_state: str) -> State:
    payload: dict[str, Any] = {**incident(), "outcome": outcome.value}
    if error_from_state:
        payload["error.$"] = "$.error"
    else:
        payload["error"] = None
    state = task(
        function_arn,
        payload,
        result_path="$.closed",
        next_state=next_state,
        comment=f"close_incident with outcome {outcome.value!r}",
    )
    if outcome == Outcome.FAILED:
        # The last resort: if closing as failed fails too, end red without another attempt.
        state["Catch"] = [
            {"ErrorEquals": ["States.ALL"], "ResultPath": "$.close_error", "Next": "Failed"}
        ]
    return state
