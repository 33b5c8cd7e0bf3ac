"""SNS failing never loses an incident or an approval request: the failure is audited, the
record stays, and the notice goes out on the next occasion."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sdc_remediation.lambdas.handlers import (
    _deps,
    close_incident,
    decide,
    open_incident,
    request_approval,
    store_report,
)
from sdc_remediation.lambdas.models.errors import DependencyFailed
from tests.conftest import load_fixture
from tests.faults.figures import record
from tests.faults.test_duplicates import contributor, node
from tests.integration.conftest import CLUSTER, GROUP, Aws, invoke
from tests.integration.drive import TOKEN, awaiting_approval, decision_input, health_checked
from tests.unit.reports import forged_event


class DownNotifier:
    """SNS is down: every Publish fails, as the adapter reports it."""

    def __init__(self) -> None:
        self.attempts = 0

    def publish(self, subject: str, message: str, attributes: Any, chat: Any = None) -> str | None:
        self.attempts += 1
        raise DependencyFailed(
            "Publish failed: InternalError", operation="Publish", code="InternalError"
        )


@contextmanager
def sns_down() -> Iterator[DownNotifier]:
    current = _deps.deps()
    down = DownNotifier()
    _deps.set_deps(dataclasses.replace(current, notifier=down))
    try:
        yield down
    finally:
        _deps.set_deps(current)


def kinds(aws: Aws) -> list[str]:
    return [m["MessageAttributes"]["kind"]["Value"] for m in aws.messages()]


def test_a_failed_approval_card_keeps_the_approval_request_waiting_and_decidable(aws):
    incident_id = health_checked(aws)

    with sns_down() as down:
        invoke(request_approval, {"incident_id": incident_id, "task_token": TOKEN})

    incident = aws.incident(incident_id)
    assert down.attempts == 1
    assert (incident.state, aws.incidents.task_token(incident_id)) == ("awaiting_approval", TOKEN)
    assert "notification_failed" in aws.actions(incident_id)
    assert invoke(decide, decision_input(incident_id, "approve"))["accepted"] is True
    record("notification failures", "approval request kept, still decidable")


def test_a_failed_closing_notice_keeps_the_incident_closed_and_is_sent_on_the_next_close(aws):
    incident_id = awaiting_approval(aws)
    with sns_down():
        closed = invoke(
            close_incident, {"incident_id": incident_id, "outcome": "expired", "error": None}
        )
    assert closed["state"] == "expired"
    assert aws.actions(incident_id)[-1] == "notification_failed"

    invoke(close_incident, {"incident_id": incident_id, "outcome": "expired", "error": None})

    assert kinds(aws)[-1:] == ["closed"] and kinds(aws).count("closed") == 1
    record("notification failures", "closed incident kept, notice re-sent")


def test_a_failed_held_notice_keeps_the_held_incident_and_is_sent_on_redelivery(aws):
    for n in range(3):
        aws.hyperpod.add_node(CLUSTER, GROUP, node(n))
    invoke(open_incident, contributor(node(0)))  # 4 nodes: the one open incident allowed
    event = contributor(node(1))
    with sns_down():
        held = invoke(open_incident, event)
    assert held["action"] == "held"
    assert "notification_failed" in aws.actions(held["incident_id"])

    again = invoke(open_incident, event)

    assert again == held
    assert kinds(aws) == ["held"]
    record("notification failures", "held incident kept, notice re-sent")


def culprit_report(instance_id: str, n: int) -> dict[str, Any]:
    """A report naming `instance_id` the culprit: the storm rule counts the nodes reports name
    (an alarm alone flags nothing)."""
    return forged_event(
        [instance_id], ambiguous=False, role="culprit", report_id=f"culprit-{n:04d}"
    )


def test_a_failed_storm_notice_keeps_the_hold_and_the_next_report_sends_it(aws):
    for n in range(8):
        aws.hyperpod.add_node(CLUSTER, GROUP, node(n))
    for n in range(3):
        invoke(store_report, culprit_report(node(n), n))
    with sns_down():
        (held,) = invoke(store_report, culprit_report(node(3), 3))["incidents"]
        assert held["action"] == "held"

    invoke(store_report, culprit_report(node(4), 4))

    assert kinds(aws).count("storm_hold") == 1
    record("notification failures", "storm hold kept, notice sent by the next report")


def test_an_incident_opens_and_starts_its_execution_while_sns_is_down(aws):
    with sns_down() as down:
        result = invoke(open_incident, load_fixture("events", "contributor_alarm"))

    assert result["action"] == "opened"
    assert down.attempts == 0
    assert len(aws.executions()) == 1
    record("notification failures", "incident opened while SNS is down")
