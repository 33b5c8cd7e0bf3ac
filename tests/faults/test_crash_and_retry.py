"""A handler that dies mid-step (after its AWS call, before it recorded the result) and is
invoked again does not act twice.

"Dies" is a BaseException raised from inside a port, after the acting call: no `except
Exception` runs, nothing is recorded, exactly as when Lambda kills a timed-out invocation. The
retry is what Lambda's asynchronous retry or EventBridge's redelivery does."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from sdc_remediation.lambdas.handlers import (
    _deps,
    check_replacement,
    close_incident,
    decide,
    open_incident,
    replace_node,
    start_health_check,
    store_report,
)
from tests.conftest import load_fixture
from tests.faults.figures import record
from tests.integration.conftest import Aws, invoke
from tests.integration.drive import awaiting_approval, decided, decision_input, opened


class HandlerDied(BaseException):
    """Not an Exception: no handler code catches it, as none survives a killed invocation."""


class Dying:
    """Delegates to `inner`; the `nth` call of `method` does the work, then dies."""

    def __init__(self, inner: Any, method: str, nth: int) -> None:
        self._inner, self._method, self._nth, self._calls = inner, method, nth, 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name != self._method:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self._calls += 1
            result = attr(*args, **kwargs)
            if self._calls == self._nth:
                raise HandlerDied(f"died after {name} #{self._nth}")
            return result

        return call


@contextmanager
def dying(port: str, method: str, nth: int = 1) -> Iterator[None]:
    current = _deps.deps()
    wrapped = dataclasses.replace(current, **{port: Dying(getattr(current, port), method, nth)})
    _deps.set_deps(wrapped)
    try:
        yield
    finally:
        _deps.set_deps(current)


class CountingWorkflow:
    """Counts the decisions Step Functions took (a token it no longer waits on refuses)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.sent = inner, 0

    def start_execution(self, name: str, payload: Any) -> Any:
        return self.inner.start_execution(name, payload)

    def send_task_success(self, task_token: str, output: Any) -> Any:
        answer = self.inner.send_task_success(task_token, output)
        self.sent += 1
        return answer

    def describe_execution(self, execution_arn: str) -> Any:
        return self.inner.describe_execution(execution_arn)


@dataclass(frozen=True)
class Crash:
    name: str
    before: Callable[[Aws], str | None]
    run: Callable[[str | None], Any]
    port: str
    method: str
    nth: int
    check: Callable[[Aws, str | None], None]


def _alarm(_: str | None) -> Any:
    return invoke(open_incident, load_fixture("events", "contributor_alarm"))


def _report(_: str | None) -> Any:
    return invoke(store_report, load_fixture("events", "sdc_report"))


def _one_incident_one_execution(aws: Aws, _: str | None) -> None:
    assert len(aws.items("INCIDENT#")) == 1
    assert len(aws.executions()) == 1


def _one_health_check(aws: Aws, incident_id: str | None) -> None:
    assert len(aws.hyperpod.calls_to("StartClusterHealthCheck")) == 1
    incident = aws.incident(str(incident_id))
    assert (incident.state, incident.health_check.started) == ("health_check", True)


def _one_replacement(aws: Aws, incident_id: str | None) -> None:
    while not invoke(check_replacement, {"incident_id": incident_id})["done"]:
        pass
    closed = invoke(
        close_incident, {"incident_id": incident_id, "outcome": "replaced", "error": None}
    )
    assert closed["state"] == "replaced"  # ours: the write-ahead says we asked
    assert len(aws.hyperpod.replaced_by) == 1  # one node replaced, once


def _done_once(aws: Aws, incident_id: str | None) -> None:
    replacement = aws.incident(str(incident_id)).replacement
    assert (replacement.status, str(replacement.new_instance_id)[:2]) == ("done", "i-")
    assert [e.action for e in aws.audit(str(incident_id))].count("replacement_done") == 1


def _closed_once(aws: Aws, incident_id: str | None) -> None:
    incident = aws.incident(str(incident_id))
    assert incident.state == "rejected"
    assert aws.incidents.open_incident_id(incident.cluster_name, incident.instance_id) is None
    assert aws.guard.guard_state(incident.cluster_name).open_ids == ()
    actions = [e.action for e in aws.audit(str(incident_id))]
    assert (actions.count("incident_closed"), actions.count("closed_notified")) == (1, 1)


def _replacing(aws: Aws) -> str:
    incident_id = decided(aws, "approve")
    invoke(replace_node, {"incident_id": incident_id})
    return incident_id


def _rejected_awaiting_close(aws: Aws) -> str:
    return decided(aws, "reject")


CRASHES = [
    # open_incident: the execution started, its ARN not yet recorded
    Crash(
        "open_incident after StartExecution",
        lambda aws: None,
        _alarm,
        "workflow",
        "start_execution",
        1,
        _one_incident_one_execution,
    ),
    # store_report (report opens the incident): same point
    Crash(
        "store_report after StartExecution",
        lambda aws: None,
        _report,
        "workflow",
        "start_execution",
        1,
        _one_incident_one_execution,
    ),
    # store_report: the report stored, nothing opened yet (the retry, received later, finds
    # its stored copy the same report)
    Crash(
        "store_report after the report was stored",
        lambda aws: None,
        _report,
        "reports",
        "put_report",
        1,
        _one_incident_one_execution,
    ),
    # start_health_check: the check started, the incident not yet advanced
    Crash(
        "start_health_check after StartClusterHealthCheck",
        opened,
        lambda i: invoke(start_health_check, {"incident_id": i}),
        "hyperpod",
        "start_health_check",
        1,
        _one_health_check,
    ),
    # replace_node: the replacement accepted, not yet recorded
    Crash(
        "replace_node after BatchReplaceClusterNodes",
        lambda aws: decided(aws, "approve"),
        lambda i: invoke(replace_node, {"incident_id": i}),
        "hyperpod",
        "replace_nodes",
        1,
        _one_replacement,
    ),
    # check_replacement: the new node found, not yet recorded
    Crash(
        "check_replacement after finding the new node",
        _replacing,
        lambda i: [invoke(check_replacement, {"incident_id": i}) for _ in range(5)],
        "hyperpod",
        "describe_node_by_logical_id",
        1,
        _done_once,
    ),
    # close_incident: the state saved, the lock not yet released
    Crash(
        "close_incident after saving the closed state",
        _rejected_awaiting_close,
        lambda i: invoke(close_incident, {"incident_id": i, "outcome": "rejected", "error": None}),
        "incidents",
        "save",
        1,
        _closed_once,
    ),
]


@pytest.mark.parametrize("crash", CRASHES, ids=lambda c: c.name)
def test_a_step_that_died_after_acting_does_not_act_again_when_retried(aws, crash):
    incident_id = crash.before(aws)

    with dying(crash.port, crash.method, crash.nth), pytest.raises(HandlerDied):
        crash.run(incident_id)
    retried = crash.run(incident_id)

    if incident_id is None:
        incident_id = retried.get("incident_id")
    crash.check(aws, incident_id)
    record("crash mid-step, then retried", "acted once")


def test_a_decision_that_died_after_send_task_success_is_not_sent_twice(aws):
    incident_id = awaiting_approval(aws)
    counting = CountingWorkflow(_deps.deps().workflow)
    _deps.set_deps(dataclasses.replace(_deps.deps(), workflow=counting))

    # the first append is the write-ahead `decision_accepted`, the second settles the delivery
    with dying("audit", "append", 2), pytest.raises(HandlerDied):
        invoke(decide, decision_input(incident_id, "approve"))
    retried = invoke(decide, decision_input(incident_id, "approve"))

    assert retried["accepted"] is True
    assert counting.sent == 1
    assert aws.incident(incident_id).decision.delivery == "delivered"
    assert aws.actions(incident_id)[-2:] == ["decision_accepted", "decision_delivered"]
    record("crash mid-step, then retried", "acted once")
