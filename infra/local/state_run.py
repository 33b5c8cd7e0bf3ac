"""A state machine definition (Amazon States Language, JSONPath) run step by step on a virtual
clock: the fleet what-if runs the stack's own remediation and approval definitions this way.

moto's interpreter (`sdc_remediation.infra.local.interpreter`) runs an execution on a thread of
its own in real time; thousands of incidents over weeks of virtual time cannot wait on it. A
`StateRun` is one execution that runs until it must wait, and says for what: `Sleep` (a Wait
state, the interval before a retry), `AwaitToken` (a `.waitForTaskToken` task, with its
TimeoutSeconds) or `Ended`. Its owner keeps the clock and calls `step` again when the wait is
over: with nothing, with the token's answer (`Answered`), or with `TIMED_OUT`.

What it runs is what the project's definitions use, with the semantics the Amazon States
Language specification gives: Pass (Result, Parameters), Task (`lambda:invoke`, its
`.waitForTaskToken` form, Retry with IntervalSeconds, MaxAttempts and BackoffRate, Catch,
TimeoutSeconds of a token wait), Choice (And, Or, Not, IsPresent, IsNull, the String, Numeric
and Boolean comparisons), Wait (Seconds), Succeed, Fail; InputPath, Parameters, ResultSelector,
ResultPath and OutputPath; paths `$` and `$.a.b`, the context object's `$$.Execution.Id`,
`$$.Execution.Input`, `$$.State.Name` and `$$.Task.Token`; the intrinsic `States.MathAdd`.
Anything else is refused when the run is made (`UnsupportedDefinition`, naming the state and
the field), so a definition that outgrows this subset fails loudly instead of running
differently. tests/infra/test_execution.py runs the definitions through this and through
moto's interpreter and compares the states each execution entered.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

LAMBDA_INVOKE: Final = "arn:aws:states:::lambda:invoke"
WAIT_FOR_TASK_TOKEN: Final = ".waitForTaskToken"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_STATE_FIELDS: Final = {
    "Pass": {"Result", "Parameters", "InputPath", "ResultPath", "OutputPath"},
    "Task": {
        "Resource",
        "Parameters",
        "InputPath",
        "ResultSelector",
        "ResultPath",
        "OutputPath",
        "TimeoutSeconds",
        "Retry",
        "Catch",
    },
    "Choice": {"Choices", "Default", "InputPath", "OutputPath"},
    "Wait": {"Seconds", "InputPath", "OutputPath"},
    "Succeed": {"InputPath", "OutputPath"},
    "Fail": {"Error", "Cause"},
}
_COMMON_FIELDS: Final = {"Type", "Comment", "Next", "End"}
_TERMINAL: Final = {"Choice", "Succeed", "Fail"}
"""States that take neither Next nor End (a Choice goes where its rules say)."""
_CONTEXT_PATHS: Final = ("$$.Execution.Id", "$$.Execution.Input", "$$.State.Name")
"""What a Parameters template may read of the context object (and `$$.Task.Token` in a task
that waits for it)."""
_RETRY_FIELDS: Final = {"ErrorEquals", "IntervalSeconds", "MaxAttempts", "BackoffRate"}
_CATCH_FIELDS: Final = {"ErrorEquals", "ResultPath", "Next"}
_COMPARISONS: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "StringEquals": lambda v, t: isinstance(v, str) and v == t,
    "StringLessThan": lambda v, t: isinstance(v, str) and v < t,
    "StringGreaterThan": lambda v, t: isinstance(v, str) and v > t,
    "NumericEquals": lambda v, t: _is_number(v) and v == t,
    "NumericLessThan": lambda v, t: _is_number(v) and v < t,
    "NumericLessThanEquals": lambda v, t: _is_number(v) and v <= t,
    "NumericGreaterThan": lambda v, t: _is_number(v) and v > t,
    "NumericGreaterThanEquals": lambda v, t: _is_number(v) and v >= t,
    "BooleanEquals": lambda v, t: isinstance(v, bool) and v == t,
}
_TYPE_TESTS: Final[dict[str, Callable[[Any], bool]]] = {
    "IsNull": lambda v: v is None,
    "IsString": lambda v: isinstance(v, str),
    "IsNumeric": _is_number,
    "IsBoolean": lambda v: isinstance(v, bool),
}
_PATH: Final = re.compile(r"^\$(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_MATH_ADD: Final = re.compile(r"^States\.MathAdd\(\s*([^,()]+?)\s*,\s*([^,()]+?)\s*\)$")

STATES_ALL: Final = "States.ALL"
STATES_TIMEOUT: Final = "States.Timeout"
STATES_TASK_FAILED: Final = "States.TaskFailed"
STATES_RUNTIME: Final = "States.Runtime"
NO_CHOICE_MATCHED: Final = "States.NoChoiceMatched"


class UnsupportedDefinition(ValueError):
    """The definition uses something this runner does not run."""


class FunctionError(Exception):
    """A function's invocation ended in an error: `error` is what a Retry or Catch matches
    (Lambda's `errorType`: the exception's class name, or `Sandbox.Timedout`, ...)."""

    def __init__(self, error: str, cause: str) -> None:
        super().__init__(f"{error}: {cause}")
        self.error = error
        self.cause = cause

    @classmethod
    def of_function(cls, error_type: str, message: str) -> FunctionError:
        """A function's error as a task sees it: the Cause is the function's error document."""
        document = {"errorType": error_type, "errorMessage": message}
        return cls(error_type, json.dumps(document, separators=(",", ":")))


class _RuntimeFailure(Exception):
    """States.Runtime: the execution fails at once; no Retry or Catch sees it."""


@dataclass(frozen=True, slots=True)
class Sleep:
    seconds: float


@dataclass(frozen=True, slots=True)
class AwaitToken:
    token: str
    timeout_seconds: float | None
    state: str


@dataclass(frozen=True, slots=True)
class Ended:
    status: str
    """SUCCEEDED or FAILED."""
    output: Any = None
    error: str | None = None
    cause: str | None = None


Pause = Sleep | AwaitToken | Ended


@dataclass(frozen=True, slots=True)
class Answered:
    """A task token's answer (SendTaskSuccess's output)."""

    output: Any


TIMED_OUT: Final = "timed out"
"""What `step` is given when an awaited token's TimeoutSeconds passed."""

Invoke = Callable[[str, Any], Any]
"""(function ARN, payload) → the function's return value; raises FunctionError."""


@dataclass
class StateRun:
    """One execution of `definition` with `input`. `invoke` runs a function; `new_token` makes
    the task token of a `.waitForTaskToken` task."""

    definition: Mapping[str, Any]
    input: Any
    execution_id: str
    invoke: Invoke
    new_token: Callable[[], str]
    entered: list[str] = field(default_factory=list)
    """Every state entered, in order (a retried task is entered once)."""
    ended: Ended | None = None

    def __post_init__(self) -> None:
        check_definition(self.definition)
        self._steps: Generator[Pause, Any, Ended] = self._run()
        self._started = False

    def step(self, received: Answered | str | None = None) -> Pause:
        """Run until the next wait: the first call starts the run; each later call ends the wait
        the previous one returned (`received`: the token's answer or `TIMED_OUT` after an
        `AwaitToken`, nothing after a `Sleep`)."""
        if self.ended is not None:
            return self.ended
        try:
            if not self._started:
                self._started = True
                return next(self._steps)
            return self._steps.send(received)
        except StopIteration as stop:
            self.ended = stop.value
            return stop.value

    # -- the run --------------------------------------------------------------------------

    def _run(self) -> Generator[Pause, Any, Ended]:
        states = self.definition["States"]
        name: str = self.definition["StartAt"]
        data: Any = self.input
        while True:
            state = states[name]
            self.entered.append(name)
            kind = state["Type"]
            try:
                if kind == "Succeed":
                    return Ended("SUCCEEDED", _output(state, _input(state, data)))
                if kind == "Fail":
                    return Ended("FAILED", None, state.get("Error"), state.get("Cause"))
                if kind == "Choice":
                    effective = _input(state, data)
                    name = self._choose(state, effective, name)
                    data = _output(state, effective)
                    continue
                if kind == "Wait":
                    yield Sleep(float(state["Seconds"]))
                    data = _output(state, _input(state, data))
                elif kind == "Pass":
                    data = self._pass(state, data, name)
                else:
                    outcome = yield from self._task(state, data, name)
                    if isinstance(outcome, _Caught):
                        name, data = outcome.next_state, outcome.data
                        continue
                    if isinstance(outcome, Ended):
                        return outcome
                    data = outcome
            except _RuntimeFailure as failure:
                return Ended("FAILED", None, STATES_RUNTIME, str(failure))
            if state.get("End"):
                return Ended("SUCCEEDED", data)
            name = state["Next"]

    def _context(self, state_name: str, token: str | None = None) -> dict[str, Any]:
        context: dict[str, Any] = {
            "Execution": {"Id": self.execution_id, "Input": self.input},
            "State": {"Name": state_name},
        }
        if token is not None:
            context["Task"] = {"Token": token}
        return context

    def _pass(self, state: Mapping[str, Any], data: Any, name: str) -> Any:
        effective = _input(state, data)
        if "Parameters" in state:
            effective = _parameters(state["Parameters"], effective, self._context(name))
        result = state.get("Result", effective)
        return _output(state, _result_into(state, data, result))

    def _choose(self, state: Mapping[str, Any], data: Any, name: str) -> str:
        for rule in state["Choices"]:
            if _holds(rule, data):
                return str(rule["Next"])
        if "Default" in state:
            return str(state["Default"])
        raise _RuntimeFailure(f"{name}: no choice rule matched and there is no Default")

    def _task(self, state: Mapping[str, Any], data: Any, name: str) -> Generator[Pause, Any, Any]:
        """The task's output; or where a Catch sends it (`_Caught`); or the run's end."""
        effective = _input(state, data)
        resource: str = state["Resource"]
        waits = resource.endswith(WAIT_FOR_TASK_TOKEN)
        attempts: dict[int, int] = {}
        while True:
            token = self.new_token() if waits else None
            try:
                parameters = _parameters(
                    state.get("Parameters", effective), effective, self._context(name, token)
                )
                answer = self.invoke(parameters["FunctionName"], parameters.get("Payload"))
                if token is not None:
                    received = yield AwaitToken(token, state.get("TimeoutSeconds"), name)
                    if received == TIMED_OUT:
                        raise FunctionError(STATES_TIMEOUT, "")  # no cause, as on AWS
                    if not isinstance(received, Answered):
                        raise TypeError(f"{name}: awaits a token's answer, got {received!r}")
                    result = received.output
                else:
                    result = {"Payload": answer, "StatusCode": 200}
                if "ResultSelector" in state:
                    result = _parameters(state["ResultSelector"], result, self._context(name))
                return _output(state, _result_into(state, data, result))
            except FunctionError as failed:
                retrier = _matching(state.get("Retry", []), failed.error)
                if retrier is not None:
                    index, rule = retrier
                    done = attempts.get(index, 0)
                    if done < int(rule.get("MaxAttempts", 3)):
                        attempts[index] = done + 1
                        interval = float(rule.get("IntervalSeconds", 1))
                        yield Sleep(interval * float(rule.get("BackoffRate", 2)) ** done)
                        continue
                catcher = _matching(state.get("Catch", []), failed.error)
                if catcher is None:
                    return Ended("FAILED", None, failed.error, failed.cause)
                rule = catcher[1]
                error = {"Error": failed.error, "Cause": failed.cause}
                caught = _result_into(rule, data, error)
                return _Caught(str(rule["Next"]), caught)


@dataclass(frozen=True, slots=True)
class _Caught:
    next_state: str
    data: Any


def _matching(rules: list[Mapping[str, Any]], error: str) -> tuple[int, Mapping[str, Any]] | None:
    for index, rule in enumerate(rules):
        names = rule["ErrorEquals"]
        if error in names or STATES_ALL in names:
            return index, rule
        if STATES_TASK_FAILED in names and error != STATES_TIMEOUT:
            return index, rule
    return None


# -- data flow --------------------------------------------------------------------------------


def _input(state: Mapping[str, Any], data: Any) -> Any:
    path = state.get("InputPath", "$")
    return {} if path is None else _read(path, data, state)


def _output(state: Mapping[str, Any], data: Any) -> Any:
    path = state.get("OutputPath", "$")
    return {} if path is None else _read(path, data, state)


def _result_into(state: Mapping[str, Any], data: Any, result: Any) -> Any:
    """ResultPath: `$` replaces the input, null keeps it, `$.a.b` sets that field of a copy;
    `data` is the state's raw input (before its InputPath), as the language specifies."""
    path = state.get("ResultPath", "$")
    if path is None:
        return data
    parts = _parts(path)
    if not parts:
        return result
    if not isinstance(data, dict):
        raise _RuntimeFailure(f"ResultPath {path}: the state's input is not an object")
    out = dict(data)
    at = out
    for part in parts[:-1]:
        inner = at.get(part, {})
        if not isinstance(inner, dict):
            raise _RuntimeFailure(f"ResultPath {path}: {part} is not an object")
        at[part] = dict(inner)
        at = at[part]
    at[parts[-1]] = result
    return out


def _parts(path: str) -> list[str]:
    if not _PATH.match(path):
        raise UnsupportedDefinition(f"path {path!r}: only $ and $.field.field... are run here")
    return path.split(".")[1:]


_MISSING: Final = object()


def _lookup(path: str, data: Any) -> Any:
    """The value at `path`, or _MISSING."""
    for part in _parts(path):
        if not isinstance(data, dict) or part not in data:
            return _MISSING
        data = data[part]
    return data


def _read(path: str, data: Any, where: Any) -> Any:
    found = _lookup(path, data)
    if found is _MISSING:
        raise _RuntimeFailure(f"the path {path} names nothing in the state's data ({where!r:.80})")
    return found


def _parameters(template: Any, data: Any, context: Mapping[str, Any]) -> Any:
    """A Parameters (or ResultSelector) template filled in: `key.$` fields read a path, the
    context object (`$$.`) or States.MathAdd; the rest is copied."""
    if isinstance(template, list):
        return [_parameters(item, data, context) for item in template]
    if not isinstance(template, Mapping):
        return template
    filled: dict[str, Any] = {}
    for key, value in template.items():
        if key.endswith(".$"):
            filled[key[:-2]] = _dynamic(str(value), data, context)
        else:
            filled[key] = _parameters(value, data, context)
    return filled


def _dynamic(expression: str, data: Any, context: Mapping[str, Any]) -> Any:
    if expression.startswith("$$"):
        return _read(expression[1:], context, "the context object")
    if expression.startswith("$"):
        return _read(expression, data, "the state's input")
    add = _MATH_ADD.match(expression)
    if add is None:
        raise UnsupportedDefinition(f"{expression!r}: of the intrinsics only States.MathAdd runs")
    left, right = (_operand(a, data, context) for a in add.groups())
    if not (isinstance(left, int) and isinstance(right, int)):
        raise _RuntimeFailure(f"{expression}: States.MathAdd adds integers ({left!r}, {right!r})")
    return left + right


def _operand(text: str, data: Any, context: Mapping[str, Any]) -> Any:
    if text.startswith("$"):
        return _dynamic(text, data, context)
    try:
        return int(text)
    except ValueError:
        raise UnsupportedDefinition(f"{text!r}: an operand is a path or an integer") from None


# -- Choice rules ----------------------------------------------------------------------------


def _holds(rule: Mapping[str, Any], data: Any) -> bool:
    if "And" in rule:
        return all(_holds(r, data) for r in rule["And"])
    if "Or" in rule:
        return any(_holds(r, data) for r in rule["Or"])
    if "Not" in rule:
        return not _holds(rule["Not"], data)
    value = _lookup(rule["Variable"], data)
    if "IsPresent" in rule:
        return (value is not _MISSING) == bool(rule["IsPresent"])
    if value is _MISSING:
        raise _RuntimeFailure(f"Choice: the variable {rule['Variable']} names nothing")
    for name, test in _TYPE_TESTS.items():
        if name in rule:
            return test(value) == bool(rule[name])
    for name, compare in _COMPARISONS.items():
        if name in rule:
            return compare(value, rule[name])
    raise UnsupportedDefinition(f"Choice rule {dict(rule)!r}: no comparison this runner knows")


# -- what is refused up front ----------------------------------------------------------------


def check_definition(definition: Mapping[str, Any]) -> None:
    """Raise UnsupportedDefinition naming the first state and field this runner does not run."""
    language = definition.get("QueryLanguage", "JSONPath")
    if language != "JSONPath":
        raise UnsupportedDefinition(f"QueryLanguage {language}: only JSONPath runs here")
    states = definition["States"]
    if definition["StartAt"] not in states:
        raise UnsupportedDefinition(f"StartAt {definition['StartAt']}: no such state")
    for name, state in states.items():
        kind = state.get("Type")
        allowed = _STATE_FIELDS.get(kind)
        if allowed is None:
            raise UnsupportedDefinition(f"{name}: a {kind} state does not run here")
        extra = set(state) - allowed - _COMMON_FIELDS
        if extra:
            raise UnsupportedDefinition(f"{name}: {sorted(extra)} not run here")
        _check_transition(name, kind, state)
        for target in _targets(state):
            if target not in states:
                raise UnsupportedDefinition(f"{name}: goes to {target}, no such state")
        for key in ("InputPath", "OutputPath", "ResultPath"):
            if state.get(key) is not None:
                _parts(state[key])
        if kind == "Task":
            _check_task(name, state)
        if kind == "Choice":
            for rule in state["Choices"]:
                if "Next" not in rule:
                    raise UnsupportedDefinition(f"{name}: a Choice rule without Next")
                _check_rule(name, rule)
        token = kind == "Task" and state["Resource"].endswith(WAIT_FOR_TASK_TOKEN)
        for key in ("Parameters", "ResultSelector"):
            if kind != "Choice" and key in state:
                _check_template(name, state[key], token=token and key == "Parameters")
        if kind == "Wait" and not _is_number(state.get("Seconds")):
            raise UnsupportedDefinition(f"{name}: a Wait runs here with Seconds only")


def _check_transition(name: str, kind: str, state: Mapping[str, Any]) -> None:
    """Where the state goes, as the language requires it to say: a Choice, Succeed or Fail
    takes neither Next nor End; any other state exactly one of them."""
    says = [key for key in ("Next", "End") if key in state]
    if kind in _TERMINAL:
        if says:
            raise UnsupportedDefinition(f"{name}: a {kind} state takes no {says[0]}")
    elif ("Next" in state) == bool(state.get("End")):
        raise UnsupportedDefinition(f"{name}: a {kind} state takes Next or End: true, one of them")


def _check_template(name: str, template: Any, *, token: bool) -> None:
    """Every `key.$` of a Parameters or ResultSelector template reads what `_dynamic` fills in:
    a path, a context field this runner gives, States.MathAdd of paths and integers."""
    if isinstance(template, list):
        for item in template:
            _check_template(name, item, token=token)
        return
    if not isinstance(template, Mapping):
        return
    for key, value in template.items():
        if not key.endswith(".$"):
            _check_template(name, value, token=token)
            continue
        try:
            _check_expression(str(value), token=token)
        except UnsupportedDefinition as err:
            raise UnsupportedDefinition(f"{name}: {key} {err}") from None


def _check_expression(expression: str, *, token: bool) -> None:
    if expression.startswith("$$"):
        given = (*_CONTEXT_PATHS, "$$.Task.Token") if token else _CONTEXT_PATHS
        if not any(expression == p or expression.startswith(p + ".") for p in given):
            raise UnsupportedDefinition(f"{expression}: of the context object only {given} here")
        _parts(expression[1:])
        return
    if expression.startswith("$"):
        _parts(expression)
        return
    add = _MATH_ADD.match(expression)
    if add is None:
        raise UnsupportedDefinition(f"{expression!r}: of the intrinsics only States.MathAdd runs")
    for operand in add.groups():
        if operand.startswith("$"):
            _check_expression(operand, token=token)
        elif not re.fullmatch(r"-?[0-9]+", operand):
            raise UnsupportedDefinition(f"{operand!r}: an operand is a path or an integer")


def _targets(state: Mapping[str, Any]) -> list[str]:
    found = [state["Next"]] if "Next" in state else []
    found += [rule["Next"] for rule in state.get("Choices", []) if "Next" in rule]
    found += [rule["Next"] for rule in state.get("Catch", [])]
    if "Default" in state:
        found.append(state["Default"])
    return found


def _check_task(name: str, state: Mapping[str, Any]) -> None:
    resource = state["Resource"]
    if resource not in (LAMBDA_INVOKE, LAMBDA_INVOKE + WAIT_FOR_TASK_TOKEN):
        raise UnsupportedDefinition(f"{name}: resource {resource} does not run here")
    for key in ("Retry", "Catch"):
        rules = state.get(key, [])
        for index, rule in enumerate(rules):
            names = rule["ErrorEquals"]
            if STATES_ALL in names and (len(names) > 1 or index < len(rules) - 1):
                raise UnsupportedDefinition(
                    f"{name}: {key} names {STATES_ALL} other than alone in its last rule"
                )
    for rule in state.get("Retry", []):
        if set(rule) - _RETRY_FIELDS:
            raise UnsupportedDefinition(f"{name}: Retry {sorted(set(rule) - _RETRY_FIELDS)}")
    for rule in state.get("Catch", []):
        if set(rule) - _CATCH_FIELDS:
            raise UnsupportedDefinition(f"{name}: Catch {sorted(set(rule) - _CATCH_FIELDS)}")
        if rule.get("ResultPath") is not None:
            _parts(rule["ResultPath"])


def _check_rule(name: str, rule: Mapping[str, Any]) -> None:
    for key in ("And", "Or"):
        if key in rule:
            for inner in rule[key]:
                _check_rule(name, inner)
            return
    if "Not" in rule:
        _check_rule(name, rule["Not"])
        return
    _parts(rule["Variable"])
    tests = set(rule) - {"Variable", "Next"}
    known = {"IsPresent", *_TYPE_TESTS, *_COMPARISONS}
    if len(tests) != 1 or not tests <= known:
        raise UnsupportedDefinition(f"{name}: Choice rule tests {sorted(tests)} not run here")
    (test,) = tests
    if test.startswith("Numeric"):
        fits = _is_number(rule[test])
    elif test.startswith("String"):
        fits = isinstance(rule[test], str)
    else:  # BooleanEquals, IsPresent and the type tests take true or false
        fits = isinstance(rule[test], bool)
    if not fits:
        raise UnsupportedDefinition(f"{name}: {test} {rule[test]!r}: a value of another type")
