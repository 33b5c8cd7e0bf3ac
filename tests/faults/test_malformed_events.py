"""Malformed and unexpected events: a clear error (audited, dead-lettered) or a clean skip, never
a crash, never an incident opened wrongly.

Each kind runs twice: straight into its handler on moto (what the function does with it), and
through the synthesized stack's rules on the local bus (what EventBridge would deliver, and where
a failed delivery lands)."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from sdc_remediation.infra.local.run import LocalRun
from sdc_remediation.lambdas.handlers import open_incident, store_report
from sdc_remediation.lambdas.logic.core import ids
from sdc_remediation.lambdas.models.errors import MalformedEvent
from tests.conftest import load_fixture
from tests.faults.figures import record
from tests.integration.conftest import Aws, invoke

REFUSED, IGNORED, SKIPPED = "refused", "ignored", "skipped"


@dataclass(frozen=True)
class Case:
    kind: str
    channel: str
    """"alarm" (open_incident) or "report" (store_report)."""
    change: Callable[[dict[str, Any]], Any]
    """Mutates a fresh copy of the documented event, or returns `Instead(replacement)`."""
    expect: str

    def event(self) -> Any:
        name = "contributor_alarm" if self.channel == "alarm" else "sdc_report"
        event = copy.deepcopy(load_fixture("events", name))
        event["id"] = str(uuid.uuid4())
        changed = self.change(event)
        return changed.value if isinstance(changed, Instead) else event


@dataclass(frozen=True)
class Instead:
    """The whole event replaced by `value`."""

    value: Any


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    *parents, last = path.split(".")

    def change(event: dict[str, Any]) -> None:
        node = event
        for key in parents:
            node = node[key]
        node[last] = value

    return change


def _drop(path: str) -> Callable[[dict[str, Any]], None]:
    *parents, last = path.split(".")

    def change(event: dict[str, Any]) -> None:
        node = event
        for key in parents:
            node = node[key]
        del node[last]

    return change


def _unknown_alarm(event: dict[str, Any]) -> None:
    event["detail"]["alarmName"] = "cpu-utilization-high"
    event["detail"]["configuration"]["metrics"][0]["expression"] = "SELECT AVG(CPUUtilization)"


ATTRS = "detail.alarmContributor.attributes"
CASES = [
    # -- contributor alarms → open_incident ---------------------------------------------------
    Case("a list instead of an object", "alarm", lambda e: Instead([e]), REFUSED),
    Case("null", "alarm", lambda e: Instead(None), REFUSED),
    Case("an empty object", "alarm", lambda e: Instead({}), REFUSED),
    Case("wrong source", "alarm", _set("source", "aws.ec2"), REFUSED),
    Case(
        "alarm-level detail-type",
        "alarm",
        _set("detail-type", "CloudWatch Alarm State Change"),
        REFUSED,
    ),
    Case("missing id", "alarm", _drop("id"), REFUSED),
    Case("id of the wrong type", "alarm", _set("id", 42), REFUSED),
    Case("oversized id", "alarm", _set("id", "x" * 5000), REFUSED),
    Case("missing detail", "alarm", _drop("detail"), REFUSED),
    Case("detail is a string", "alarm", _set("detail", "ALARM"), REFUSED),
    Case("missing alarm name", "alarm", _drop("detail.alarmName"), REFUSED),
    Case("unknown alarm", "alarm", _unknown_alarm, REFUSED),
    Case("missing contributor", "alarm", _drop("detail.alarmContributor"), REFUSED),
    Case("attributes is a list", "alarm", _set(ATTRS, ["ml-cluster-1"]), REFUSED),
    Case("missing InstanceId", "alarm", _drop(f"{ATTRS}.InstanceId"), REFUSED),
    Case(
        "non-instance contributor",
        "alarm",
        _set(f"{ATTRS}.InstanceId", "ip-10-0-0-1.ec2.internal"),
        REFUSED,
    ),
    Case("InstanceId of the wrong type", "alarm", _set(f"{ATTRS}.InstanceId", 12345), REFUSED),
    Case("missing ClusterName", "alarm", _drop(f"{ATTRS}.ClusterName"), REFUSED),
    Case("ClusterName not a cluster name", "alarm", _set(f"{ATTRS}.ClusterName", "a/b c"), REFUSED),
    Case("missing state", "alarm", _drop("detail.state"), REFUSED),
    Case("unknown state value", "alarm", _set("detail.state.value", "BROKEN"), REFUSED),
    Case("timestamp not a time", "alarm", _set("detail.state.timestamp", "yesterday"), REFUSED),
    Case(
        "timestamp without an offset",
        "alarm",
        _set("detail.state.timestamp", "2026-11-30T08:15:04"),
        REFUSED,
    ),
    Case("reason of the wrong type", "alarm", _set("detail.state.reason", 123), REFUSED),
    Case("oversized event", "alarm", _set("detail.state.reason", "x" * 300_000), REFUSED),
    Case("OK state", "alarm", _set("detail.state.value", "OK"), IGNORED),
    Case(
        "INSUFFICIENT_DATA state", "alarm", _set("detail.state.value", "INSUFFICIENT_DATA"), IGNORED
    ),
    Case("cluster not allowed", "alarm", _set(f"{ATTRS}.ClusterName", "other-cluster"), IGNORED),
    Case(
        "instance HyperPod does not know",
        "alarm",
        _set(f"{ATTRS}.InstanceId", "i-0123456789abcdef0"),
        SKIPPED,
    ),
    # -- SDC reports → store_report -----------------------------------------------------------
    Case("report: wrong source", "report", _set("source", "sdc.other"), REFUSED),
    Case("report: wrong detail-type", "report", _set("detail-type", "SDC Rapport"), REFUSED),
    Case("report: missing detail", "report", _drop("detail"), REFUSED),
    Case("report: unknown schema version", "report", _set("detail.schema_version", "3"), REFUSED),
    Case("report: report id too short", "report", _set("detail.report_id", "r-1"), REFUSED),
    Case("report: emitted_at not a time", "report", _set("detail.emitted_at", "now"), REFUSED),
    Case("report: suspects not an array", "report", _set("detail.suspects", {}), REFUSED),
    Case(
        "report: instance id not an instance",
        "report",
        _set(
            "detail.instances",
            [{"instance_id": "node-7", "metrics": [], "ranks": [], "role": "culprit"}],
        ),
        REFUSED,
    ),
    Case(
        "report: unknown verdict kind",
        "report",
        _set("detail.verdicts", [{"pair": [1, 2], "third": 3, "suspect": 1, "kind": "cosmic"}]),
        REFUSED,
    ),
    Case("report: ambiguous not a boolean", "report", _set("detail.ambiguous", "no"), REFUSED),
    Case("report: negative rank", "report", _set("detail.culprits", [-1]), REFUSED),
    Case("report: step is a string", "report", _set("detail.step", "30"), REFUSED),
    Case(
        "report: cluster name not a cluster name",
        "report",
        _set("detail.cluster_name", "a b"),
        REFUSED,
    ),
    Case("report: oversized", "report", _set("detail.errors", ["x" * 300_000]), REFUSED),
    Case(
        "report: cluster not allowed",
        "report",
        _set("detail.cluster_name", "other-cluster"),
        IGNORED,
    ),
    Case(
        "report: names no instance",
        "report",
        lambda e: e["detail"].update(instances=[], suspects=[]),
        IGNORED,
    ),
]


def outcome_of(aws: Aws, case: Case, event: Any) -> str:
    module = open_incident if case.channel == "alarm" else store_report
    try:
        result = invoke(module, event)
    except MalformedEvent:
        return REFUSED
    if case.channel == "report":
        return IGNORED if not result["stored"] and not result["incidents"] else "acted"
    return str(result["action"])


def incidents_opened(aws: Aws) -> list[dict[str, Any]]:
    """Incident items in any state but skipped (a skipped record is not an opened incident)."""
    return [i for i in aws.items("INCIDENT#") if i["state"]["S"] != "skipped"]


def test_there_are_at_least_twenty_kinds():
    assert len({case.kind for case in CASES}) == len(CASES) >= 20


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.kind)
def test_a_bad_event_is_refused_and_audited_or_skipped_cleanly_in_its_handler(aws, case):
    event = case.event()

    outcome = outcome_of(aws, case, event)  # anything but MalformedEvent fails the test: a crash

    record("malformed events, handlers on moto", outcome)
    assert outcome == case.expect
    assert incidents_opened(aws) == []
    assert aws.executions() == []
    if outcome == REFUSED:  # audited under the event's id, naming the bad field
        raw_id = event.get("id") if isinstance(event, dict) else None
        subject = ids.event_subject(str(raw_id)[:200] if raw_id else "without-id")
        refusals = [e for e in aws.audit(subject) if e.action == "event_refused"]
        assert refusals and refusals[-1].details["field"], subject


def _nested(levels: int) -> dict[str, Any]:
    alarm: dict[str, Any] = {}
    for _ in range(levels - 1):
        alarm = {"a": alarm}
    return alarm


def _rank_of_first_suspect(value: int) -> Callable[[dict[str, Any]], None]:
    def change(event: dict[str, Any]) -> None:
        event["detail"]["suspects"][0]["rank"] = value

    return change


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (_set("detail.step", 10**40), "detail.step"),
        (_rank_of_first_suspect(2**200), "detail.suspects[0].rank"),
        (_set("detail.alarm", _nested(900)), "detail.alarm" + ".a" * 31),
        (_set("detail.alarm", {"loss": 2**200}), "detail.alarm.loss"),
        (_set("detail.alarm", {"loss": 1e300}), "detail.alarm.loss"),
        (
            _set(
                "detail.instances",
                [load_fixture("events", "sdc_report")["detail"]["instances"][0]] * 2049,
            ),
            "detail.instances",
        ),
        (_set("detail.job_name", "j" * 256), "detail.job_name"),
    ],
    ids=[
        "step 10^40",
        "rank 2^200",
        "900 levels",
        "alarm integer 2^200",
        "alarm 1e300",
        "2049 instances",
        "long job name",
    ],
)
def test_a_report_outside_the_bounds_is_refused_naming_the_field_and_nothing_is_stored(
    aws, change, field
):
    case = Case("bounds", "report", change, REFUSED)
    event = case.event()

    outcome = outcome_of(aws, case, event)

    assert outcome == REFUSED
    (refusal,) = [
        e for e in aws.audit(ids.event_subject(event["id"])) if e.action == "event_refused"
    ]
    assert refusal.details["field"] == field
    assert aws.items("REPORT#") == []
    assert aws.items("INCIDENT#") == []


# -- through the deployed rules: what EventBridge delivers, and where failures land -----------


@pytest.fixture(scope="module")
def run() -> Iterator[LocalRun]:
    with LocalRun.open() as local:
        yield local


@pytest.mark.slow
@pytest.mark.synth
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.kind)
def test_through_the_rules_a_bad_event_is_filtered_dead_lettered_or_skipped(run, case):
    event = case.event()
    if not isinstance(event, dict):
        record("malformed events, through the rules", "not routable (not a JSON object)")
        return  # EventBridge carries JSON objects only

    deliveries = run.put_event(event)

    if not deliveries:
        seen = "filtered by the rule pattern"
    elif all(d.ok for d in deliveries):
        (delivery,) = deliveries
        response = delivery.response or {}
        seen = str(response.get("action") or ("ignored" if not response.get("stored") else "?"))
        assert seen == case.expect, response
    else:
        assert all(d.dead_lettered for d in deliveries if not d.ok), deliveries
        assert all(
            json.loads(json.dumps(d.response)).get("errorType") == "MalformedEvent"
            for d in deliveries
        ), [d.response for d in deliveries]
        seen = "dead-lettered (MalformedEvent)"
    record("malformed events, through the rules", seen)
    opened = [
        i
        for i in run.session.client("dynamodb").scan(TableName=run.deps.settings.incidents_table)[
            "Items"
        ]
        if i["pk"]["S"].startswith("INCIDENT#") and i["state"]["S"] != "skipped"
    ]
    assert opened == []
