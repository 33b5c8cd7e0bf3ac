"""The two state machine definitions (Amazon States Language, JSONPath), as plain data.

Pure functions of the function ARNs and the settings, with no CDK in them: the constructs in
workflow.py and approval.py pass CDK tokens for the ARNs, tests may pass plain strings. The
shape follows docs/pipeline.md:

    InitPollCounters → IsolateNode → StartHealthCheck → HealthCheckHeld? (held → CloseHeld)
      → WaitForHealthCheck → CheckHealth → CountHealthPoll
      → HealthCheckDone? (in_progress and polls < max → WaitForHealthCheck;
                          scope "job" → CloseChecked; status NotFound → CloseReplacedByHyperPod;
                          held (storm hold or pause, before any approval card) → CloseHeld;
                          else → RequestApproval)
      (HealthCheckDone? also: passed after an approved reboot → CloseRebooted)
    RequestApproval (.waitForTaskToken, TimeoutSeconds; States.Timeout → CloseExpired)
      → Decision? (approve → ReplaceNode; reboot and reboots < MAX_REBOOTS → CountReboot
                   → RebootNode; reject → CloseRejected; else → UnknownDecision)
    RebootNode → Rebooted? ("held" → CloseHeld; "gone" → CloseReplacedByHyperPod;
                            "retry" and retries < max → CountRebootRetry → WaitToRetryReboot
                                                         → RebootNode;
                            "retry" otherwise → RebootRetriesExhausted;
                            else → WaitForReboot)
    WaitForReboot → CheckReboot → CountRebootPoll
      → RebootDone? (done → ResetHealthPolls → StartHealthCheck (the check runs again);
                     gone → CloseReplacedByHyperPod; polls < max → WaitForReboot;
                     else → RebootTimedOut)
    ReplaceNode → Replaced? ("held" → CloseHeld; "gone" → CloseReplaced;
                             "retry" and retries < max → CountReplaceRetry → WaitToRetryReplace
                                                          → ReplaceNode;
                             "retry" otherwise → ReplaceRetriesExhausted;
                             else → WaitForReplacement)
    WaitForReplacement → CheckReplacement → CountReplacementPoll
      → ReplacementDone? (done → CloseReplaced; polls < max → WaitForReplacement;
                          else → ReplacementTimedOut)
    UnknownDecision / ReplaceRetriesExhausted / ReplacementTimedOut / RebootRetriesExhausted /
      RebootTimedOut: Pass that records why in $.error → CloseFailed
    CloseReplaced / CloseRebooted / CloseRejected / CloseExpired / CloseHeld / CloseChecked /
      CloseReplacedByHyperPod → Closed (Succeed); CloseFailed → Failed (Fail)

Every Task: `arn:aws:states:::lambda:invoke` with an explicit Payload, a ResultSelector that
keeps `$.Payload` (the function's return value) under the task's ResultPath (`$.health.Payload`,
`$.replacement.Payload`, ...), a retry on Lambda service errors and on the steps' own retryable
errors (`Throttled`, `ServiceUnavailable`: the handler left the incident as it was), and
`Catch States.ALL → CloseFailed` (CloseFailed's own catch goes to Failed): once the retries are
spent, the incident closes as failed with the error as its cause. Choices test a returned field only behind
IsPresent, so a return value that misses a field takes the default branch instead of failing
the execution with an uncatchable States.Runtime error. Counters live in
`$.polls.<loop>.count` and are bumped with States.MathAdd, so every loop is bounded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from infra.settings import Settings
from lambdas.logic.lifecycle import MAX_REBOOTS

LAMBDA_INVOKE: Final = "arn:aws:states:::lambda:invoke"
LAMBDA_INVOKE_WAIT_FOR_TASK_TOKEN: Final = "arn:aws:states:::lambda:invoke.waitForTaskToken"

LAMBDA_SERVICE_ERRORS: Final = (
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
)
"""Transient errors of the Invoke API itself (not of the handler): retried with backoff."""

RETRYABLE_STEP_ERRORS: Final = ("Throttled", "ServiceUnavailable")
"""The handlers' own retryable errors (Lambda's `errorType` is the exception's class name,
`lambdas.models.errors`): AWS throttled a call or failed on its side after the SDK's own
retries. The step left the incident unchanged, so calling it again is safe."""
STEP_RETRY_INTERVAL_SECONDS: Final = 2
STEP_RETRY_ATTEMPTS: Final = 5

REMEDIATION_COMMENT: Final = (
    "SDC remediation: deep health check, human approval, node replacement. See docs/pipeline.md."
)
APPROVAL_COMMENT: Final = (
    "Approve or reject a pending SDC node replacement. "
    'Input: {"incident_id": "...", "decision": "approve" | "reject", "comment": "..."}'
)

CLOSE_FAILED: Final = "CloseFailed"
CLOSE_EXPIRED: Final = "CloseExpired"
CLOSE_HELD: Final = "CloseHeld"

State = dict[str, Any]


def _service_retry() -> list[State]:
    return [
        {
            "ErrorEquals": list(LAMBDA_SERVICE_ERRORS),
            "IntervalSeconds": 2,
            "MaxAttempts": 3,
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


def _when(path: str, test: Mapping[str, Any]) -> dict[str, Any]:
    """`path` satisfies `test`, guarded by IsPresent: a return value that lacks a documented
    field takes the Choice's default branch instead of failing the execution with an
    uncatchable States.Runtime error (and leaving the incident open)."""
    return {"And": [{"Variable": path, "IsPresent": True}, {"Variable": path, **test}]}


def _task(
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
            "Retry": _service_retry(),
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": catch_to}],
        }
    )
    if next_state is None:
        state["End"] = True
    else:
        state["Next"] = next_state
    return state


def _incident() -> dict[str, str]:
    return {"incident_id.$": "$.incident_id"}


def _count(counter: str, next_state: str) -> State:
    path = f"$.polls.{counter}"
    return {
        "Type": "Pass",
        "Parameters": {"count.$": f"States.MathAdd({path}.count, 1)"},
        "ResultPath": path,
        "Next": next_state,
    }


def _wait(seconds: int, next_state: str) -> State:
    return {"Type": "Wait", "Seconds": seconds, "Next": next_state}


def _poll(
    states: tuple[str, str, str],
    seconds: int,
    function_arn: str,
    result_path: str,
    counter: str,
    choice: str,
) -> dict[str, State]:
    """A bounded poll, `states` = (wait, task, count): wait → the function → bump `counter` →
    `choice`, which decides whether to go round again (the loop's bound lives there)."""
    wait, task, count = states
    return {
        wait: _wait(seconds, task),
        task: _task(function_arn, _incident(), result_path=result_path, next_state=count),
        count: _count(counter, choice),
    }


def _failure(error: str, cause: str) -> State:
    """Record why the run gives up in $.error (CloseFailed passes it on), then close as failed."""
    return {
        "Type": "Pass",
        "Result": {"Error": error, "Cause": cause},
        "ResultPath": "$.error",
        "Next": CLOSE_FAILED,
    }


def _close(function_arn: str, outcome: str, *, error_from_state: bool, next_state: str) -> State:
    payload: dict[str, Any] = {**_incident(), "outcome": outcome}
    if error_from_state:
        payload["error.$"] = "$.error"
    else:
        payload["error"] = None
    state = _task(
        function_arn,
        payload,
        result_path="$.closed",
        next_state=next_state,
        comment=f"close_incident with outcome {outcome!r}",
    )
    if outcome == "failed":
        # The last resort: if closing as failed fails too, end red without another attempt.
        state["Catch"] = [
            {"ErrorEquals": ["States.ALL"], "ResultPath": "$.close_error", "Next": "Failed"}
        ]
    return state


def _reboot_states(fn: Mapping[str, str], s: Settings) -> dict[str, State]:
    """The reboot an approver chose: request it (retried like the replacement), wait until the
    node is Running again (bounded), then run the deep health check again from the top."""
    return {
        "CountReboot": _count("reboots", "RebootNode"),
        "RebootNode": _task(
            fn["reboot_node"], _incident(), result_path="$.reboot", next_state="Rebooted?"
        ),
        "Rebooted?": {
            "Type": "Choice",
            "Choices": [
                {
                    **_when("$.reboot.Payload.status", {"StringEquals": "held"}),
                    "Next": CLOSE_HELD,
                },
                {
                    **_when("$.reboot.Payload.status", {"StringEquals": "gone"}),
                    "Next": "CloseReplacedByHyperPod",
                },
                {
                    "And": [
                        _when("$.reboot.Payload.status", {"StringEquals": "retry"}),
                        {
                            "Variable": "$.polls.reboot_retries.count",
                            "NumericLessThan": s.replace_max_retries,
                        },
                    ],
                    "Next": "CountRebootRetry",
                },
                {
                    **_when("$.reboot.Payload.status", {"StringEquals": "retry"}),
                    "Next": "RebootRetriesExhausted",
                },
            ],
            "Default": "WaitForReboot",
        },
        "CountRebootRetry": _count("reboot_retries", "WaitToRetryReboot"),
        "WaitToRetryReboot": _wait(s.replace_retry_seconds, "RebootNode"),
        "RebootRetriesExhausted": _failure(
            "RebootRetriesExhausted",
            f"BatchRebootClusterNodes still reported InvalidInstanceStatus or InternalServerError "
            f"after {s.replace_max_retries} retries.",
        ),
        **_poll(
            ("WaitForReboot", "CheckReboot", "CountRebootPoll"),
            s.reboot_poll_seconds,
            fn["check_reboot"],
            "$.reboot_check",
            "reboot",
            "RebootDone?",
        ),
        "RebootDone?": {
            "Type": "Choice",
            "Choices": [
                {
                    **_when("$.reboot_check.Payload.done", {"BooleanEquals": True}),
                    "Next": "ResetHealthPolls",
                },
                {
                    **_when("$.reboot_check.Payload.gone", {"BooleanEquals": True}),
                    "Next": "CloseReplacedByHyperPod",
                },
                {
                    "Variable": "$.polls.reboot.count",
                    "NumericLessThan": s.reboot_max_polls,
                    "Next": "WaitForReboot",
                },
            ],
            "Default": "RebootTimedOut",
        },
        "RebootTimedOut": _failure(
            "RebootTimedOut",
            f"The node was not Running again {s.reboot_max_polls} polls after its reboot.",
        ),
        "ResetHealthPolls": {
            "Type": "Pass",
            "Comment": "The deep health check runs again after the reboot, with its own bound.",
            "Result": {"count": 0},
            "ResultPath": "$.polls.health",
            "Next": "StartHealthCheck",
        },
    }


def remediation_definition(
    functions: Mapping[str, str], settings: Settings, approval_state_machine_arn: str
) -> dict[str, Any]:
    """The remediation state machine; `functions` maps handler module name → function ARN."""
    fn = functions
    s = settings
    approval_hint = {
        "how": "Start an execution of the approval state machine with one of these inputs "
        "(write your reason in comment).",
        "approval_state_machine_arn": approval_state_machine_arn,
        "approve": {**_incident(), "decision": "approve", "comment": "<why>"},
        "reboot": {**_incident(), "decision": "reboot", "comment": "<why>"},
        "reject": {**_incident(), "decision": "reject", "comment": "<why>"},
    }
    states: dict[str, State] = {
        "InitPollCounters": {
            "Type": "Pass",
            "Comment": "Counters that bound the loops (States.MathAdd bumps them).",
            "Result": {
                "health": {"count": 0},
                "replacement": {"count": 0},
                "replace_retries": {"count": 0},
                "reboot": {"count": 0},
                "reboot_retries": {"count": 0},
                "reboots": {"count": 0},
            },
            "ResultPath": "$.polls",
            "Next": "IsolateNode",
        },
        "IsolateNode": _task(
            fn["isolate_node"],
            _incident(),
            result_path="$.isolation",
            next_state="StartHealthCheck",
            comment="Cordon and taint the suspect node (EKS clusters configured for it). "
            "An unreachable Kubernetes API does not fail it: the incident records why.",
        ),
        "StartHealthCheck": _task(
            fn["start_health_check"],
            _incident(),
            result_path="$.health",
            next_state="HealthCheckHeld?",
        ),
        "HealthCheckHeld?": {
            "Type": "Choice",
            "Comment": "Storm hold or pause switch: nothing was started; the incident is held.",
            "Choices": [
                {
                    **_when("$.health.Payload.held", {"BooleanEquals": True}),
                    "Next": CLOSE_HELD,
                }
            ],
            "Default": "WaitForHealthCheck",
        },
        **_poll(
            ("WaitForHealthCheck", "CheckHealth", "CountHealthPoll"),
            s.health_check_poll_seconds,
            fn["check_health"],
            "$.health",
            "health",
            "HealthCheckDone?",
        ),
        "HealthCheckDone?": {
            "Type": "Choice",
            "Choices": [
                {
                    "And": [
                        _when("$.health.Payload.in_progress", {"BooleanEquals": True}),
                        {
                            "Variable": "$.polls.health.count",
                            "NumericLessThan": s.health_check_max_polls,
                        },
                    ],
                    "Next": "WaitForHealthCheck",
                },
                {
                    **_when("$.health.Payload.passed_after_reboot", {"BooleanEquals": True}),
                    "Next": "CloseRebooted",
                },
                {
                    **_when("$.health.Payload.scope", {"StringEquals": "job"}),
                    "Next": "CloseChecked",
                },
                {
                    **_when("$.health.Payload.status", {"StringEquals": "NotFound"}),
                    "Next": "CloseReplacedByHyperPod",
                },
                {
                    **_when("$.health.Payload.held", {"BooleanEquals": True}),
                    "Next": CLOSE_HELD,
                },
            ],
            "Default": "RequestApproval",
        },
        "RequestApproval": {
            "Type": "Task",
            "Comment": "Waits for the approval state machine's decide function to call "
            "SendTaskSuccess with {decision, comment, approval_execution_arn}.",
            "Resource": LAMBDA_INVOKE_WAIT_FOR_TASK_TOKEN,
            "Parameters": {
                "FunctionName": fn["request_approval"],
                "Payload": {
                    **_incident(),
                    "task_token.$": "$$.Task.Token",
                    "approval_input": approval_hint,
                },
            },
            "TimeoutSeconds": s.approval_timeout_seconds,
            "ResultPath": "$.decision",
            "Retry": _service_retry(),
            "Catch": [
                {"ErrorEquals": ["States.Timeout"], "ResultPath": "$.error", "Next": CLOSE_EXPIRED},
                {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": CLOSE_FAILED},
            ],
            "Next": "Decision?",
        },
        "Decision?": {
            "Type": "Choice",
            "Choices": [
                {
                    **_when("$.decision.decision", {"StringEquals": "approve"}),
                    "Next": "ReplaceNode",
                },
                {
                    "And": [
                        _when("$.decision.decision", {"StringEquals": "reboot"}),
                        {"Variable": "$.polls.reboots.count", "NumericLessThan": MAX_REBOOTS},
                    ],
                    "Next": "CountReboot",
                },
                {
                    **_when("$.decision.decision", {"StringEquals": "reject"}),
                    "Next": "CloseRejected",
                },
            ],
            "Default": "UnknownDecision",
        },
        "UnknownDecision": _failure(
            "UnknownDecision",
            "The approval task completed without 'approve', 'reboot' or 'reject' (or with a "
            "reboot beyond the one an incident may have).",
        ),
        **_reboot_states(fn, s),
        "ReplaceNode": _task(
            fn["replace_node"],
            _incident(),
            result_path="$.replacement",
            next_state="Replaced?",
        ),
        "Replaced?": {
            "Type": "Choice",
            "Choices": [
                {
                    **_when("$.replacement.Payload.status", {"StringEquals": "held"}),
                    "Next": CLOSE_HELD,
                },
                {
                    **_when("$.replacement.Payload.status", {"StringEquals": "gone"}),
                    "Next": "CloseReplaced",
                },
                {
                    "And": [
                        _when("$.replacement.Payload.status", {"StringEquals": "retry"}),
                        {
                            "Variable": "$.polls.replace_retries.count",
                            "NumericLessThan": s.replace_max_retries,
                        },
                    ],
                    "Next": "CountReplaceRetry",
                },
                {
                    **_when("$.replacement.Payload.status", {"StringEquals": "retry"}),
                    "Next": "ReplaceRetriesExhausted",
                },
            ],
            "Default": "WaitForReplacement",
        },
        "CountReplaceRetry": _count("replace_retries", "WaitToRetryReplace"),
        "WaitToRetryReplace": _wait(s.replace_retry_seconds, "ReplaceNode"),
        "ReplaceRetriesExhausted": _failure(
            "ReplaceRetriesExhausted",
            f"BatchReplaceClusterNodes still reported InvalidInstanceStatus after "
            f"{s.replace_max_retries} retries.",
        ),
        **_poll(
            ("WaitForReplacement", "CheckReplacement", "CountReplacementPoll"),
            s.replacement_poll_seconds,
            fn["check_replacement"],
            "$.replacement_check",
            "replacement",
            "ReplacementDone?",
        ),
        "ReplacementDone?": {
            "Type": "Choice",
            "Choices": [
                {
                    **_when("$.replacement_check.Payload.done", {"BooleanEquals": True}),
                    "Next": "CloseReplaced",
                },
                {
                    "Variable": "$.polls.replacement.count",
                    "NumericLessThan": s.replacement_max_polls,
                    "Next": "WaitForReplacement",
                },
            ],
            "Default": "ReplacementTimedOut",
        },
        "ReplacementTimedOut": _failure(
            "ReplacementTimedOut",
            f"The replacement was not done after {s.replacement_max_polls} polls.",
        ),
        "CloseReplaced": _close(
            fn["close_incident"], "replaced", error_from_state=False, next_state="Closed"
        ),
        "CloseRebooted": _close(
            fn["close_incident"], "rebooted", error_from_state=False, next_state="Closed"
        ),
        "CloseRejected": _close(
            fn["close_incident"], "rejected", error_from_state=False, next_state="Closed"
        ),
        CLOSE_EXPIRED: _close(
            fn["close_incident"], "expired", error_from_state=True, next_state="Closed"
        ),
        CLOSE_HELD: _close(
            fn["close_incident"], "held", error_from_state=False, next_state="Closed"
        ),
        "CloseChecked": _close(
            fn["close_incident"], "checked", error_from_state=False, next_state="Closed"
        ),
        "CloseReplacedByHyperPod": _close(
            fn["close_incident"],
            "replaced_by_hyperpod",
            error_from_state=False,
            next_state="Closed",
        ),
        CLOSE_FAILED: _close(
            fn["close_incident"], "failed", error_from_state=True, next_state="Failed"
        ),
        "Closed": {"Type": "Succeed"},
        "Failed": {
            "Type": "Fail",
            "Error": "RemediationFailed",
            "Cause": "The incident was closed as failed; its audit log says why.",
        },
    }
    return {
        "Comment": REMEDIATION_COMMENT,
        "QueryLanguage": "JSONPath",
        "StartAt": "InitPollCounters",
        "States": states,
    }


def approval_definition(decide_function_arn: str) -> dict[str, Any]:
    """The approval state machine: one `decide` task. A refusal (DecisionRefused) fails the
    execution on purpose, so the approver sees it; there is nothing to clean up."""
    return {
        "Comment": APPROVAL_COMMENT,
        "QueryLanguage": "JSONPath",
        "StartAt": "Decide",
        "States": {
            "Decide": {
                "Type": "Task",
                "Resource": LAMBDA_INVOKE,
                "Parameters": {
                    "FunctionName": decide_function_arn,
                    "Payload": {
                        "incident_id.$": "$.incident_id",
                        "decision.$": "$.decision",
                        "comment.$": "$.comment",
                        "approval_execution_arn.$": "$$.Execution.Id",
                    },
                },
                "OutputPath": "$.Payload",
                "Retry": _service_retry(),
                "End": True,
            }
        },
    }
