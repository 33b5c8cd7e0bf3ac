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

Every Task is an `sdc_remediation.infra.stack.asl.task`: the function's return value under its ResultPath
(`$.health.Payload`, `$.replacement.Payload`, ...), retried on Lambda's and the steps' own
retryable errors and on an invocation that ended without an answer (`sdc_remediation.infra.stack.asl.TIMEOUT_ERRORS`:
the step resumes from what it wrote ahead), and `Catch States.ALL → CloseFailed` (CloseFailed's own catch goes to
Failed): once the retries are spent, the incident closes as failed with the error as its cause. Choices test a returned field only behind
IsPresent, so a return value that misses a field takes the default branch instead of failing
the execution with an uncatchable States.Runtime error. Counters live in
`$.polls.<loop>.count` and are bumped with States.MathAdd, so every loop is bounded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from sdc_remediation.infra.stack.asl import (
    CLOSE_EXPIRED,
    CLOSE_FAILED,
    CLOSE_HELD,
    LAMBDA_INVOKE,
    LAMBDA_INVOKE_WAIT_FOR_TASK_TOKEN,
    TASK_TIMEOUT_SECONDS,
    TIMEOUT_ERRORS,
    State,
    close,
    count,
    failure,
    incident,
    poll,
    service_retry,
    task,
    wait,
    when,
)
from sdc_remediation.infra.stack.settings import DeploymentSettings
from sdc_remediation.lambdas.models.hyperpod import NodeStatus
from sdc_remediation.lambdas.models.payloads import Decision, Outcome, RecoveryStatus
from sdc_remediation.lambdas.models.recovery import MAX_REBOOTS
from sdc_remediation.lambdas.models.states import Scope

REMEDIATION_STEPS: Final = (
    "isolate_node",
    "start_health_check",
    "check_health",
    "request_approval",
    "replace_node",
    "check_replacement",
    "reboot_node",
    "check_reboot",
    "close_incident",
)
"""The handler modules the remediation state machine invokes (the keys of its `functions`)."""

APPROVAL_TASK_TIMEOUT_ERRORS: Final = tuple(e for e in TIMEOUT_ERRORS if e != "States.Timeout")
"""The approval task retries a killed request_approval, never its own timeout (the approval
expiring closes the incident as expired)."""

REMEDIATION_COMMENT: Final = (
    "SDC remediation: deep health check, human approval, node replacement. See docs/pipeline.md."
)
APPROVAL_COMMENT: Final = (
    "Approve or reject a pending SDC node replacement. "
    'Input: {"incident_id": "...", "decision": "approve" | "reject", "comment": "..."}'
)


def remediation_definition(
    functions: Mapping[str, str], settings: DeploymentSettings, approval_state_machine_arn: str
) -> dict[str, Any]:
    """The remediation state machine; `functions` maps handler module name → function ARN."""
    states: dict[str, State] = {
        **_health_check_states(functions, settings),
        **_approval_states(functions, settings, approval_state_machine_arn),
        **_reboot_states(functions, settings),
        **_replacement_states(functions, settings),
        **_closing_states(functions["close_incident"]),
    }
    return {
        "Comment": REMEDIATION_COMMENT,
        "QueryLanguage": "JSONPath",
        "StartAt": "InitPollCounters",
        "States": states,
    }


def _health_check_states(fn: Mapping[str, str], s: DeploymentSettings) -> dict[str, State]:
    """Set the loop counters, isolate the node, run the deep health check and poll it (bounded);
    then close, or ask for approval."""
    return {
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
        "IsolateNode": task(
            fn["isolate_node"],
            incident(),
            result_path="$.isolation",
            next_state="StartHealthCheck",
            comment="Cordon and taint the suspect node (EKS clusters configured for it). "
            "An unreachable Kubernetes API does not fail it: the incident records why.",
        ),
        "StartHealthCheck": task(
            fn["start_health_check"],
            incident(),
            result_path="$.health",
            next_state="HealthCheckHeld?",
        ),
        "HealthCheckHeld?": {
            "Type": "Choice",
            "Comment": "Storm hold or pause switch: nothing was started; the incident is held.",
            "Choices": [
                {
                    **when("$.health.Payload.held", {"BooleanEquals": True}),
                    "Next": CLOSE_HELD,
                }
            ],
            "Default": "WaitForHealthCheck",
        },
        **poll(
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
                        when("$.health.Payload.in_progress", {"BooleanEquals": True}),
                        {
                            "Variable": "$.polls.health.count",
                            "NumericLessThan": s.health_check_max_polls,
                        },
                    ],
                    "Next": "WaitForHealthCheck",
                },
                {
                    **when("$.health.Payload.passed_after_reboot", {"BooleanEquals": True}),
                    "Next": "CloseRebooted",
                },
                {
                    **when("$.health.Payload.scope", {"StringEquals": Scope.JOB.value}),
                    "Next": "CloseChecked",
                },
                {
                    **when("$.health.Payload.status", {"StringEquals": NodeStatus.NOT_FOUND.value}),
                    "Next": "CloseReplacedByHyperPod",
                },
                {
                    **when("$.health.Payload.held", {"BooleanEquals": True}),
                    "Next": CLOSE_HELD,
                },
            ],
            "Default": "RequestApproval",
        },
    }


def _approval_states(
    fn: Mapping[str, str], s: DeploymentSettings, approval_state_machine_arn: str
) -> dict[str, State]:
    """Wait for the approver's decision (bounded by the approval timeout), then branch on it."""
    approval_hint: dict[str, Any] = {
        "how": "Start an execution of the approval state machine with one of these inputs "
        "(write your reason in comment).",
        "approval_state_machine_arn": approval_state_machine_arn,
        **{
            decision.value: {**incident(), "decision": decision.value, "comment": "<why>"}
            for decision in (Decision.APPROVE, Decision.REBOOT, Decision.REJECT)
        },
    }
    return {
        "RequestApproval": {
            "Type": "Task",
            "Comment": "Waits for the approval state machine's decide function to call "
            "SendTaskSuccess with {decision, comment, approval_execution_arn}.",
            "Resource": LAMBDA_INVOKE_WAIT_FOR_TASK_TOKEN,
            "Parameters": {
                "FunctionName": fn["request_approval"],
                "Payload": {
                    **incident(),
                    "task_token.$": "$$.Task.Token",
                    "approval_input": approval_hint,
                },
            },
            "TimeoutSeconds": s.approval_timeout_seconds,
            "ResultPath": "$.decision",
            "Retry": service_retry(timeouts=APPROVAL_TASK_TIMEOUT_ERRORS),
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
                    **when("$.decision.decision", {"StringEquals": Decision.APPROVE.value}),
                    "Next": "ReplaceNode",
                },
                {
                    "And": [
                        when("$.decision.decision", {"StringEquals": Decision.REBOOT.value}),
                        {"Variable": "$.polls.reboots.count", "NumericLessThan": MAX_REBOOTS},
                    ],
                    "Next": "CountReboot",
                },
                {
                    **when("$.decision.decision", {"StringEquals": Decision.REJECT.value}),
                    "Next": "CloseRejected",
                },
            ],
            "Default": "UnknownDecision",
        },
        "UnknownDecision": failure(
            "UnknownDecision",
            "The approval task completed without 'approve', 'reboot' or 'reject' (or with a "
            "reboot beyond the one an incident may have).",
        ),
    }


def _request_states(
    verb: str,
    *,
    function_arn: str,
    api: str,
    result_path: str,
    answered: str,
    gone: str,
    then: str,
    s: DeploymentSettings,
) -> dict[str, State]:
    """Ask HyperPod for the reboot or the replacement (`verb`: "Reboot" or "Replace"), and read
    its per-node answer (`sdc_remediation.lambdas.logic.recovery.engine`): held → CloseHeld, the node is gone → `gone`,
    a retryable refusal → wait and ask again (bounded by `sdc:replaceMaxRetries`), else `then`."""
    status = f"{result_path}.Payload.status"
    retries = f"{verb.lower()}_retries"
    return {
        f"{verb}Node": task(function_arn, incident(), result_path=result_path, next_state=answered),
        answered: {
            "Type": "Choice",
            "Choices": [
                {**when(status, {"StringEquals": RecoveryStatus.HELD.value}), "Next": CLOSE_HELD},
                {**when(status, {"StringEquals": RecoveryStatus.GONE.value}), "Next": gone},
                {
                    "And": [
                        when(status, {"StringEquals": RecoveryStatus.RETRY.value}),
                        {
                            "Variable": f"$.polls.{retries}.count",
                            "NumericLessThan": s.replace_max_retries,
                        },
                    ],
                    "Next": f"Count{verb}Retry",
                },
                {
                    **when(status, {"StringEquals": RecoveryStatus.RETRY.value}),
                    "Next": f"{verb}RetriesExhausted",
                },
            ],
            "Default": then,
        },
        f"Count{verb}Retry": count(retries, f"WaitToRetry{verb}"),
        f"WaitToRetry{verb}": wait(s.replace_retry_seconds, f"{verb}Node"),
        f"{verb}RetriesExhausted": failure(
            f"{verb}RetriesExhausted",
            f"{api} still reported InvalidInstanceStatus or InternalServerError after "
            f"{s.replace_max_retries} retries.",
        ),
    }


def _reboot_states(fn: Mapping[str, str], s: DeploymentSettings) -> dict[str, State]:
    """The reboot an approver chose: request it (retried like the replacement), wait until the
    node is Running again (bounded), then run the deep health check again from the top."""
    return {
        "CountReboot": count("reboots", "RebootNode"),
        **_request_states(
            "Reboot",
            function_arn=fn["reboot_node"],
            api="BatchRebootClusterNodes",
            result_path="$.reboot",
            answered="Rebooted?",
            gone="CloseReplacedByHyperPod",
            then="WaitForReboot",
            s=s,
        ),
        **poll(
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
                    **when("$.reboot_check.Payload.done", {"BooleanEquals": True}),
                    "Next": "ResetHealthPolls",
                },
                {
                    **when("$.reboot_check.Payload.gone", {"BooleanEquals": True}),
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
        "RebootTimedOut": failure(
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


def _replacement_states(fn: Mapping[str, str], s: DeploymentSettings) -> dict[str, State]:
    """The replacement an approver chose: request it (retried), then wait until it is done
    (bounded)."""
    return {
        **_request_states(
            "Replace",
            function_arn=fn["replace_node"],
            api="BatchReplaceClusterNodes",
            result_path="$.replacement",
            answered="Replaced?",
            gone="CloseReplaced",
            then="WaitForReplacement",
            s=s,
        ),
        **poll(
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
                    **when("$.replacement_check.Payload.done", {"BooleanEquals": True}),
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
        "ReplacementTimedOut": failure(
            "ReplacementTimedOut",
            f"The replacement was not done after {s.replacement_max_polls} polls.",
        ),
    }


CLOSINGS: Final = (
    ("CloseReplaced", Outcome.REPLACED),
    ("CloseRebooted", Outcome.REBOOTED),
    ("CloseRejected", Outcome.REJECTED),
    (CLOSE_EXPIRED, Outcome.EXPIRED),
    (CLOSE_HELD, Outcome.HELD),
    ("CloseChecked", Outcome.CHECKED),
    ("CloseReplacedByHyperPod", Outcome.REPLACED_BY_HYPERPOD),
    (CLOSE_FAILED, Outcome.FAILED),
)
"""Each close state and the outcome it records. Expired and failed carry $.error (why)."""


def _closing_states(close_incident_arn: str) -> dict[str, State]:
    """Every run ends in one close: Closed (Succeed), or Failed (Fail) after CloseFailed."""
    states: dict[str, State] = {
        name: close(
            close_incident_arn,
            outcome,
            error_from_state=name in (CLOSE_EXPIRED, CLOSE_FAILED),
            next_state="Failed" if name == CLOSE_FAILED else "Closed",
        )
        for name, outcome in CLOSINGS
    }
    states["Closed"] = {"Type": "Succeed"}
    states["Failed"] = {
        "Type": "Fail",
        "Error": "RemediationFailed",
        "Cause": "The incident was closed as failed; its audit log says why.",
    }
    return states


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
                "TimeoutSeconds": TASK_TIMEOUT_SECONDS,
                "Retry": service_retry(),
                "End": True,
            }
        },
    }
