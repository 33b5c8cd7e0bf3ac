"""The state machines as deployed: parsed from the synthesized DefinitionString."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sdc_remediation.infra.stack.asl import (
    LAMBDA_INVOKE,
    LAMBDA_INVOKE_WAIT_FOR_TASK_TOKEN,
    TASK_TIMEOUT_SECONDS,
)
from sdc_remediation.infra.stack.settings import DeploymentSettings
from sdc_remediation.infra.stack.template import (
    function_handlers,
    placeholder_arns,
    state_machine_definitions,
)
from sdc_remediation.lambdas.models.recovery import MAX_REBOOTS
from tests.infra.conftest import CONTEXT, VARIANT_CONTEXT
from tests.infra.template_tools import definition

REMEDIATION = "RemediationStateMachine"
APPROVAL = "ApprovalStateMachine"

TASK_MODULES = {
    "IsolateNode": "isolate_node",
    "StartHealthCheck": "start_health_check",
    "CheckHealth": "check_health",
    "RequestApproval": "request_approval",
    "ReplaceNode": "replace_node",
    "CheckReplacement": "check_replacement",
    "RebootNode": "reboot_node",
    "CheckReboot": "check_reboot",
    "CloseReplaced": "close_incident",
    "CloseRebooted": "close_incident",
    "CloseRejected": "close_incident",
    "CloseExpired": "close_incident",
    "CloseFailed": "close_incident",
    "CloseHeld": "close_incident",
    "CloseChecked": "close_incident",
    "CloseReplacedByHyperPod": "close_incident",
}


@pytest.fixture(scope="module")
def remediation(template) -> dict[str, Any]:
    return definition(template, REMEDIATION)


@pytest.fixture(scope="module")
def approval(template) -> dict[str, Any]:
    return definition(template, APPROVAL)


def _tasks(asl: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in asl["States"].items() if s["Type"] == "Task"}


def _targets(state: dict[str, Any]) -> list[str]:
    targets = [state[k] for k in ("Next", "Default") if k in state]
    targets += [choice["Next"] for choice in state.get("Choices", [])]
    targets += [catch["Next"] for catch in state.get("Catch", [])]
    return targets


def test_both_are_standard_jsonpath_machines_with_full_logging_and_tracing(template):
    for logical_id in (REMEDIATION, APPROVAL):
        props = template["Resources"][logical_id]["Properties"]
        asl = definition(template, logical_id)

        assert props["StateMachineType"] == "STANDARD"
        assert asl["QueryLanguage"] == "JSONPath"
        assert props["LoggingConfiguration"]["Level"] == "ALL"
        assert props["LoggingConfiguration"]["IncludeExecutionData"] is False
        assert props["TracingConfiguration"] == {"Enabled": True}


def test_request_approval_waits_for_the_task_token_with_the_configured_timeout(remediation):
    state = remediation["States"]["RequestApproval"]

    assert state["Resource"] == LAMBDA_INVOKE_WAIT_FOR_TASK_TOKEN
    assert state["Resource"].endswith(".waitForTaskToken")
    assert state["TimeoutSeconds"] == CONTEXT["sdc:approvalTimeoutSeconds"]
    payload = state["Parameters"]["Payload"]
    assert payload["task_token.$"] == "$$.Task.Token"
    assert payload["incident_id.$"] == "$.incident_id"


def test_the_timeout_follows_the_context(variant_template):
    state = definition(variant_template, REMEDIATION)["States"]["RequestApproval"]

    assert state["TimeoutSeconds"] == VARIANT_CONTEXT["sdc:approvalTimeoutSeconds"]


def test_the_waiting_state_shows_the_approval_input_to_paste(remediation):
    hint = remediation["States"]["RequestApproval"]["Parameters"]["Payload"]["approval_input"]

    for decision in ("approve", "reject"):
        assert hint[decision] == {
            "incident_id.$": "$.incident_id",
            "decision": decision,
            "comment": "<why>",
        }
    assert hint["approval_state_machine_arn"].endswith(":stateMachine:SdcRemediation-approval")


def test_an_approval_timeout_closes_as_expired_and_never_approves(remediation):
    catches = remediation["States"]["RequestApproval"]["Catch"]

    assert catches[0] == {
        "ErrorEquals": ["States.Timeout"],
        "ResultPath": "$.error",
        "Next": "CloseExpired",
    }
    expired = remediation["States"]["CloseExpired"]["Parameters"]["Payload"]
    assert expired["outcome"] == "expired"


def test_every_task_invokes_lambda_with_an_explicit_payload_and_keeps_only_the_payload(
    remediation, approval
):
    for asl in (remediation, approval):
        for name, state in _tasks(asl).items():
            assert state["Resource"] in (LAMBDA_INVOKE, LAMBDA_INVOKE_WAIT_FOR_TASK_TOKEN), name
            assert isinstance(state["Parameters"]["Payload"], dict), name
            if state["Resource"] == LAMBDA_INVOKE:
                assert (
                    state.get("ResultSelector") == {"Payload.$": "$.Payload"}
                    or state.get("OutputPath") == "$.Payload"
                ), name


def test_every_remediation_task_catches_all_errors(remediation):
    for name, state in _tasks(remediation).items():
        caught = [c for c in state["Catch"] if c["ErrorEquals"] == ["States.ALL"]]
        assert caught, f"{name} lets errors escape"
        expected = "Failed" if name == "CloseFailed" else "CloseFailed"
        assert caught[-1]["Next"] == expected, name
        assert state["Catch"][-1] is caught[-1], f"{name}: States.ALL must come last"


def test_each_task_invokes_the_function_of_its_handler(template, remediation, approval):
    arns = placeholder_arns(template)
    handler_of_arn = {arns[lid]: h for lid, h in function_handlers(template).items()}
    expected = {**TASK_MODULES, "Decide": "decide"}

    for asl in (remediation, approval):
        for name, state in _tasks(asl).items():
            handler = handler_of_arn[state["Parameters"]["FunctionName"]]
            assert handler == f"sdc_remediation.lambdas.handlers.{expected[name]}.handler", name


def test_every_ending_closes_the_incident_with_its_outcome(remediation):
    states = remediation["States"]
    for name, outcome, end in [
        ("CloseReplaced", "replaced", "Closed"),
        ("CloseRebooted", "rebooted", "Closed"),
        ("CloseRejected", "rejected", "Closed"),
        ("CloseExpired", "expired", "Closed"),
        ("CloseFailed", "failed", "Failed"),
        ("CloseHeld", "held", "Closed"),
        ("CloseChecked", "checked", "Closed"),
        ("CloseReplacedByHyperPod", "replaced_by_hyperpod", "Closed"),
    ]:
        payload = states[name]["Parameters"]["Payload"]
        assert payload["outcome"] == outcome
        assert "error" in payload or "error.$" in payload
        assert states[name]["Next"] == end
    assert states["Closed"]["Type"] == "Succeed"
    assert states["Failed"]["Type"] == "Fail"


def test_successful_closes_send_an_explicit_null_error(remediation):
    for name in ("CloseReplaced", "CloseRejected"):
        assert remediation["States"][name]["Parameters"]["Payload"]["error"] is None


def _branches(choice: dict[str, Any]) -> dict[str, str]:
    """Choice rule (the tested condition, behind its IsPresent guard) → next state."""
    found = {}
    for rule in choice["Choices"]:
        conditions = [c for c in rule.get("And", [rule]) if "IsPresent" not in c]
        found[json.dumps(conditions[-1], sort_keys=True)] = rule["Next"]
    return found


def _rule(variable: str, **test: Any) -> str:
    return json.dumps({"Variable": variable, **test}, sort_keys=True)


def test_a_held_health_check_start_closes_the_incident_as_held(remediation):
    states = remediation["States"]

    assert states["StartHealthCheck"]["Next"] == "HealthCheckHeld?"
    choice = states["HealthCheckHeld?"]
    assert _branches(choice) == {_rule("$.health.Payload.held", BooleanEquals=True): "CloseHeld"}
    assert choice["Default"] == "WaitForHealthCheck"


def test_after_the_health_check_job_incidents_close_checked_and_gone_nodes_close_early(
    remediation,
):
    branches = _branches(remediation["States"]["HealthCheckDone?"])

    assert branches[_rule("$.health.Payload.scope", StringEquals="job")] == "CloseChecked"
    assert (
        branches[_rule("$.health.Payload.status", StringEquals="NotFound")]
        == "CloseReplacedByHyperPod"
    )
    assert remediation["States"]["HealthCheckDone?"]["Default"] == "RequestApproval"


def test_a_health_check_ending_under_a_hold_closes_held_before_any_approval_request(remediation):
    branches = _branches(remediation["States"]["HealthCheckDone?"])

    assert branches[_rule("$.health.Payload.held", BooleanEquals=True)] == "CloseHeld"


def test_a_held_replacement_closes_the_incident_as_held(remediation):
    branches = _branches(remediation["States"]["Replaced?"])

    assert branches[_rule("$.replacement.Payload.status", StringEquals="held")] == "CloseHeld"


def test_every_task_retries_the_steps_retryable_errors_with_backoff(remediation, approval):
    for asl in (remediation, approval):
        for name, state in _tasks(asl).items():
            (retry,) = [
                r for r in state["Retry"] if r["ErrorEquals"] == ["Throttled", "ServiceUnavailable"]
            ]
            assert retry["MaxAttempts"] >= 3, name
            assert retry["BackoffRate"] > 1, name


def test_the_decision_branches_on_approve_reboot_and_reject(remediation):
    choice = remediation["States"]["Decision?"]

    def conditions(rule: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            c
            for part in rule.get("And", [rule])
            for c in (conditions(part) if "And" in part else [part])
        ]

    branches = {
        condition["StringEquals"]: rule["Next"]
        for rule in choice["Choices"]
        for condition in conditions(rule)
        if condition.get("Variable") == "$.decision.decision" and "StringEquals" in condition
    }

    assert branches == {
        "approve": "ReplaceNode",
        "reboot": "CountReboot",
        "reject": "CloseRejected",
    }
    (reboot,) = [rule for rule in choice["Choices"] if rule["Next"] == "CountReboot"]
    assert {"Variable": "$.polls.reboots.count", "NumericLessThan": 1} in conditions(reboot)
    assert choice["Default"] == "UnknownDecision"
    assert remediation["States"]["UnknownDecision"]["Next"] == "CloseFailed"


def test_every_state_is_reachable_and_every_transition_exists(remediation, approval):
    for asl in (remediation, approval):
        states = asl["States"]
        seen, todo = set(), [asl["StartAt"]]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            for target in _targets(states[name]):
                assert target in states, f"{name} → unknown {target}"
                todo.append(target)
        assert seen == set(states)


def _guarded_edges(states: dict[str, Any]) -> dict[tuple[str, str], str]:
    """Choice edges taken only while `$.polls.<counter>.count < max`: edge → counter."""
    guarded = {}
    for name, state in states.items():
        for rule in state.get("Choices", []):
            for condition in rule.get("And", [rule]):
                variable = condition.get("Variable", "")
                if "NumericLessThan" in condition and variable.startswith("$.polls."):
                    guarded[(name, rule["Next"])] = variable.split(".")[2]
    return guarded


def test_every_loop_is_bounded_by_a_counter_it_increments(remediation):
    states = remediation["States"]
    guarded = _guarded_edges(states)

    # Without the guarded edges, the state graph has no cycle at all ...
    edges = {
        name: [t for t in _targets(state) if (name, t) not in guarded]
        for name, state in states.items()
    }
    visiting, done = set(), set()

    def visit(name: str) -> None:
        assert name not in visiting, f"unbounded loop through {name}"
        if name in done:
            return
        visiting.add(name)
        for target in edges[name]:
            visit(target)
        visiting.discard(name)
        done.add(name)

    visit(remediation["StartAt"])

    # ... and every guarded edge closes loops that each increment the counter it tests: with
    # the states that increment it taken out, the choice is no longer reachable from the edge.
    assert set(guarded.values()) == {
        "health",
        "replacement",
        "replace_retries",
        "reboot",
        "reboot_retries",
        "reboots",
    }
    for (choice, start), counter in guarded.items():
        bump = f"States.MathAdd($.polls.{counter}.count, 1)"
        increments = {
            name
            for name, state in states.items()
            if state.get("Parameters", {}).get("count.$") == bump
        }
        assert increments, counter
        seen, todo = set(), [start]
        while todo:
            name = todo.pop()
            if name in seen or name in increments:
                continue
            assert name != choice, f"{choice} → {start} loops without incrementing {counter}"
            seen.add(name)
            todo.extend(_targets(states[name]))


def test_loop_bounds_and_waits_follow_the_context(variant_template):
    states = definition(variant_template, REMEDIATION)["States"]
    bounds = {
        counter: rule_condition["NumericLessThan"]
        for state in states.values()
        for rule in state.get("Choices", [])
        for rule_condition in rule.get("And", [rule])
        if str(rule_condition.get("Variable", "")).startswith("$.polls.")
        for counter in [rule_condition["Variable"].split(".")[2]]
    }

    assert bounds == {
        "health": VARIANT_CONTEXT["sdc:healthCheckMaxPolls"],
        "replacement": VARIANT_CONTEXT["sdc:replacementMaxPolls"],
        "replace_retries": VARIANT_CONTEXT["sdc:replaceMaxRetries"],
        "reboot": DeploymentSettings().reboot_max_polls,
        "reboot_retries": VARIANT_CONTEXT["sdc:replaceMaxRetries"],
        "reboots": MAX_REBOOTS,
    }
    assert states["WaitForReboot"]["Seconds"] == DeploymentSettings().reboot_poll_seconds
    assert states["WaitForHealthCheck"]["Seconds"] == VARIANT_CONTEXT["sdc:healthCheckPollSeconds"]
    assert states["WaitForReplacement"]["Seconds"] == VARIANT_CONTEXT["sdc:replacementPollSeconds"]
    assert states["WaitToRetryReplace"]["Seconds"] == VARIANT_CONTEXT["sdc:replaceRetrySeconds"]


def test_the_approval_machine_passes_the_decision_and_its_own_execution_arn(approval):
    assert approval["StartAt"] == "Decide"
    (state,) = approval["States"].values()

    assert state["Parameters"]["Payload"] == {
        "incident_id.$": "$.incident_id",
        "decision.$": "$.decision",
        "comment.$": "$.comment",
        "approval_execution_arn.$": "$$.Execution.Id",
    }
    assert state["End"] is True


def test_extracted_definitions_are_fully_resolved_and_deterministic(template):
    first = state_machine_definitions(template)
    second = state_machine_definitions(template)

    assert first == second
    for text in first.values():
        assert "Fn::" not in text and "${Token" not in text
        json.loads(text)


def test_definitions_can_be_resolved_with_any_arns(template):
    arns = {
        lid: f"arn:aws:lambda:eu-west-1:111122223333:function:{lid.lower()}"
        for lid in function_handlers(template)
    }
    definitions = state_machine_definitions(template, arns, region="eu-west-1")

    remediation = json.loads(definitions[REMEDIATION])
    assert remediation["States"]["CheckHealth"]["Parameters"]["FunctionName"] == (
        "arn:aws:lambda:eu-west-1:111122223333:function:checkhealthfunction"
    )


def test_every_task_retries_an_invocation_that_ran_out_of_time(remediation, approval):
    for asl in (remediation, approval):
        for name, state in _tasks(asl).items():
            retried = {e for r in state["Retry"] for e in r["ErrorEquals"]}
            assert {"Sandbox.Timedout", "Runtime.ExitError", "Lambda.Unknown"} <= retried, name
            if name != "RequestApproval":
                assert "States.Timeout" in retried, name
                assert state["TimeoutSeconds"] == TASK_TIMEOUT_SECONDS, name


def test_the_approval_task_never_retries_its_own_timeout_which_expires_the_incident(remediation):
    state = remediation["States"]["RequestApproval"]

    retried = {e for r in state["Retry"] for e in r["ErrorEquals"]}
    assert "States.Timeout" not in retried
    assert state["Catch"][0] == {
        "ErrorEquals": ["States.Timeout"],
        "ResultPath": "$.error",
        "Next": "CloseExpired",
    }
