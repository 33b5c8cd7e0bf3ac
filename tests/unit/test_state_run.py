"""The fleet what-if's runner of state machine definitions (`infra/local/state_run.py`): what
it refuses up front, and what the conformance runs against moto's interpreter do not time
(tests/infra/test_execution.py compares the states entered on every path of the stack's own
definitions)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from sdc_remediation.infra.local.state_run import (
    TIMED_OUT,
    Answered,
    AwaitToken,
    Ended,
    FunctionError,
    Sleep,
    StateRun,
    UnsupportedDefinition,
)

TASK = "arn:aws:states:::lambda:invoke"


def machine(**states: dict[str, Any]) -> dict[str, Any]:
    return {"StartAt": next(iter(states)), "States": states}


def run_of(definition: dict[str, Any], answers: list[Any], data: Any = None) -> StateRun:
    """A run whose function answers `answers` in turn (an exception is raised)."""

    def invoke(arn: str, payload: Any) -> Any:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    tokens = iter(f"t{n}" for n in range(10))
    return StateRun(definition, data or {}, "e-1", invoke, lambda: next(tokens))


def task(**more: Any) -> dict[str, Any]:
    return {
        "Type": "Task",
        "Resource": TASK,
        "Parameters": {"FunctionName": "f", "Payload": {"id.$": "$.id"}},
        **more,
    }


@pytest.mark.parametrize(
    ("state", "named"),
    [
        ({"Type": "Map", "End": True}, "a Map state"),
        ({"Type": "Wait", "Timestamp": "2026-12-07T00:00:00Z", "End": True}, "Timestamp"),
        (task(Resource="arn:aws:states:::sqs:sendMessage", End=True), "sqs:sendMessage"),
        (task(Retry=[{"ErrorEquals": ["X"], "MaxDelaySeconds": 5}], End=True), "MaxDelaySeconds"),
        ({"Type": "Pass", "ResultPath": "$.items[0]", "End": True}, "$.items[0]"),
        (
            {
                "Type": "Choice",
                "Choices": [{"Variable": "$.a", "StringMatches": "x*", "Next": "Done"}],
            },
            "StringMatches",
        ),
        ({"Type": "Pass", "Next": "Nowhere"}, "Nowhere"),
    ],
)
def test_what_it_does_not_run_is_refused_naming_it(state, named):
    definition = machine(First=state, Done={"Type": "Succeed"})

    with pytest.raises(UnsupportedDefinition, match=re.escape(named)):
        run_of(definition, [])


def test_an_intrinsic_it_does_not_run_is_refused_up_front():
    definition = machine(
        First={"Type": "Pass", "Parameters": {"x.$": "States.Format('{}', $.id)"}, "End": True}
    )

    with pytest.raises(UnsupportedDefinition, match=r"States\.MathAdd"):
        run_of(definition, [], {"id": 1})


def test_retries_wait_interval_times_backoff_to_the_power_of_the_attempt_then_catch():
    retry = [
        {"ErrorEquals": ["Throttled"], "IntervalSeconds": 2, "MaxAttempts": 3, "BackoffRate": 2}
    ]
    catch = [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Caught"}]
    definition = machine(Call=task(Retry=retry, Catch=catch, End=True), Caught={"Type": "Succeed"})
    throttled = FunctionError.of_function("Throttled", "slow down")
    run = run_of(definition, [throttled] * 4, {"id": "i-1"})

    waits = [run.step(), run.step(), run.step()]
    ended = run.step()

    assert waits == [Sleep(2.0), Sleep(4.0), Sleep(8.0)]
    assert isinstance(ended, Ended) and ended.status == "SUCCEEDED"
    assert ended.output["error"]["Error"] == "Throttled"
    assert run.entered == ["Call", "Caught"]


def test_an_error_no_retry_or_catch_takes_fails_the_run_with_it():
    definition = machine(Call=task(End=True))

    ended = run_of(definition, [FunctionError.of_function("ValueError", "bad")], {"id": 1}).step()

    assert ended == Ended(
        "FAILED", None, "ValueError", '{"errorType":"ValueError","errorMessage":"bad"}'
    )


def test_a_choice_on_a_field_that_is_not_there_fails_the_run_as_states_runtime():
    definition = machine(
        Choose={
            "Type": "Choice",
            "Choices": [{"Variable": "$.missing", "BooleanEquals": True, "Next": "Done"}],
            "Default": "Done",
        },
        Done={"Type": "Succeed"},
    )

    ended = run_of(definition, []).step()

    assert isinstance(ended, Ended)
    assert (ended.status, ended.error) == ("FAILED", "States.Runtime")


def test_a_token_task_waits_for_its_answer_and_puts_it_under_its_result_path():
    definition = machine(
        Ask=task(
            Resource=TASK + ".waitForTaskToken",
            Parameters={"FunctionName": "f", "Payload": {"token.$": "$$.Task.Token"}},
            TimeoutSeconds=60,
            ResultPath="$.answer",
            End=True,
        )
    )
    run = run_of(definition, [{"notified": True}], {"id": "i-1"})

    waiting = run.step()
    ended = run.step(Answered({"decision": "approve"}))

    assert waiting == AwaitToken("t0", 60, "Ask")
    assert ended == Ended("SUCCEEDED", {"id": "i-1", "answer": {"decision": "approve"}})


def test_a_token_that_times_out_is_caught_as_states_timeout():
    catch = [{"ErrorEquals": ["States.Timeout"], "ResultPath": "$.error", "Next": "Expired"}]
    definition = machine(
        Ask=task(Resource=TASK + ".waitForTaskToken", TimeoutSeconds=60, Catch=catch, End=True),
        Expired={"Type": "Pass", "Result": "expired", "ResultPath": "$.how", "End": True},
    )
    run = run_of(definition, [{}], {"id": "i-1"})

    run.step()
    ended = run.step(TIMED_OUT)

    assert isinstance(ended, Ended)
    assert ended.output["how"] == "expired"
    assert ended.output["error"]["Error"] == "States.Timeout"


def test_result_path_merges_the_result_into_the_states_raw_input_not_its_input_path():
    """Step Functions puts a result into the state's raw input; InputPath only chooses what
    the state works on."""
    definition = machine(
        Note={
            "Type": "Pass",
            "InputPath": "$.incident",
            "Result": {"seen": True},
            "ResultPath": "$.note",
            "End": True,
        }
    )
    data = {"incident": {"id": "i-1"}, "polls": {"count": 2}}

    ended = run_of(definition, [], data).step()

    assert ended == Ended(
        "SUCCEEDED", {"incident": {"id": "i-1"}, "polls": {"count": 2}, "note": {"seen": True}}
    )


def test_a_task_with_an_input_path_keeps_the_rest_of_its_input_beside_its_result():
    definition = machine(
        Call=task(
            InputPath="$.incident",
            ResultSelector={"Payload.$": "$.Payload"},
            ResultPath="$.health",
            End=True,
        )
    )
    data = {"incident": {"id": "i-1"}, "polls": {"count": 2}}

    ended = run_of(definition, [{"passed": True}], data).step()

    assert isinstance(ended, Ended)
    assert ended.output == {**data, "health": {"Payload": {"passed": True}}}


def test_a_caught_error_goes_into_the_states_raw_input():
    catch = [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Caught"}]
    definition = machine(
        Call=task(InputPath="$.incident", Catch=catch, End=True), Caught={"Type": "Succeed"}
    )
    data = {"incident": {"id": "i-1"}, "polls": {"count": 2}}

    ended = run_of(definition, [FunctionError.of_function("ValueError", "bad")], data).step()

    assert isinstance(ended, Ended)
    assert ended.output["polls"] == {"count": 2}
    assert ended.output["error"]["Error"] == "ValueError"


def test_a_token_tasks_result_selector_shapes_the_answer_it_received():
    definition = machine(
        Ask=task(
            Resource=TASK + ".waitForTaskToken",
            Parameters={"FunctionName": "f", "Payload": {"token.$": "$$.Task.Token"}},
            ResultSelector={"decision.$": "$.decision"},
            ResultPath="$.answer",
            End=True,
        )
    )
    run = run_of(definition, [{}], {"id": "i-1"})

    run.step()
    ended = run.step(Answered({"decision": "approve", "comment": "ok"}))

    assert ended == Ended("SUCCEEDED", {"id": "i-1", "answer": {"decision": "approve"}})


@pytest.mark.parametrize(
    ("parameters", "named"),
    [
        ({"started.$": "$$.Execution.StartTime"}, "$$.Execution.StartTime"),
        ({"name.$": "$$.Execution.Name"}, "$$.Execution.Name"),
        ({"first.$": "$.items[0]"}, "$.items[0]"),
        ({"nested": {"text.$": "States.Format('{}', $.id)"}}, "States.Format"),
        ({"sum.$": "States.MathAdd($.count, one)"}, "one"),
    ],
)
def test_a_parameter_it_cannot_fill_is_refused_when_the_run_is_made(parameters, named):
    """A definition that reads what this runner does not give would fail every execution with
    States.Runtime half-way; it is refused before anything runs, naming the state."""
    definition = machine(
        Call=task(Parameters={"FunctionName": "f", "Payload": parameters}, End=True)
    )

    with pytest.raises(UnsupportedDefinition, match=rf"Call.*{re.escape(named)}"):
        run_of(definition, [{}])


def test_the_task_token_is_refused_in_a_task_that_does_not_wait_for_it():
    definition = machine(
        Call=task(Parameters={"FunctionName": "f", "Payload": {"t.$": "$$.Task.Token"}}, End=True)
    )

    with pytest.raises(UnsupportedDefinition, match=r"Call.*\$\$\.Task\.Token"):
        run_of(definition, [{}])


@pytest.mark.parametrize(
    ("state", "named"),
    [
        (
            {
                "Type": "Choice",
                "Choices": [{"Variable": "$.a", "BooleanEquals": True, "Next": "Done"}],
                "End": True,
            },
            "End",
        ),
        ({"Type": "Choice", "Choices": [{"Variable": "$.a", "BooleanEquals": True}]}, "Next"),
        ({"Type": "Succeed", "Next": "Done"}, "Next"),
        ({"Type": "Pass", "Result": 1}, "Next or End"),
        ({"Type": "Wait", "Seconds": 5, "Next": "Done", "End": True}, "Next or End"),
    ],
)
def test_a_state_that_does_not_say_where_it_goes_as_the_language_requires_is_refused(state, named):
    """Step Functions refuses such a definition when it is created; running it anyway would
    ignore the End or stop with a KeyError half-way."""
    definition = machine(First=state, Done={"Type": "Succeed"})

    with pytest.raises(UnsupportedDefinition, match=rf"First.*{re.escape(named)}"):
        run_of(definition, [])


@pytest.mark.parametrize(
    "rules",
    [
        [{"ErrorEquals": ["States.ALL"]}, {"ErrorEquals": ["Throttled"]}],
        [{"ErrorEquals": ["States.ALL", "Throttled"]}],
    ],
)
@pytest.mark.parametrize("field", ["Retry", "Catch"])
def test_states_all_anywhere_but_alone_in_the_last_rule_is_refused(field, rules):
    """Step Functions refuses it at creation; run here, the rules after it would never match."""
    if field == "Catch":
        rules = [{**rule, "Next": "Done"} for rule in rules]
    definition = machine(Call=task(**{field: rules}, End=True), Done={"Type": "Succeed"})

    with pytest.raises(UnsupportedDefinition, match=rf"Call: {field}.*States\.ALL"):
        run_of(definition, [{}])


@pytest.mark.parametrize(
    ("test", "value"),
    [("NumericLessThan", "5"), ("StringEquals", 1), ("BooleanEquals", "true"), ("IsPresent", 1)],
)
def test_a_choice_comparing_with_a_value_of_the_wrong_type_is_refused(test, value):
    """Step Functions refuses `"NumericLessThan": "5"` at creation; run here, it never holds."""
    definition = machine(
        Choose={
            "Type": "Choice",
            "Choices": [{"Variable": "$.polls", test: value, "Next": "Done"}],
            "Default": "Done",
        },
        Done={"Type": "Succeed"},
    )

    with pytest.raises(UnsupportedDefinition, match=rf"Choose: {test}"):
        run_of(definition, [])


def test_a_pass_states_result_is_its_result_even_beside_parameters():
    """Parameters shape a Pass state's input; its Result, where given, is what it passes on."""
    definition = machine(
        Note={
            "Type": "Pass",
            "Parameters": {"id.$": "$.id"},
            "Result": {"count": 0},
            "ResultPath": "$.polls",
            "End": True,
        }
    )

    ended = run_of(definition, [], {"id": "i-1"}).step()

    assert ended == Ended("SUCCEEDED", {"id": "i-1", "polls": {"count": 0}})


def test_a_result_path_through_a_field_that_is_not_an_object_fails_the_run():
    """`$.polls.count` where `polls` is a number: Step Functions cannot put the result there
    (moto's interpreter fails the run), rather than replace the number with an object."""
    definition = machine(
        Note={"Type": "Pass", "Result": 1, "ResultPath": "$.polls.count", "End": True}
    )

    ended = run_of(definition, [], {"polls": 3}).step()

    assert isinstance(ended, Ended)
    assert (ended.status, ended.error) == ("FAILED", "States.Runtime")
