"""The alarms on the pipeline itself: failed or timed-out remediation executions, function
errors. Both notify the topic and say what to do."""

from __future__ import annotations

import re
from typing import Any

import pytest

from sdc_remediation.infra.stack.template import (
    function_handlers,
    pipeline_functions,
    resources_of_type,
)
from sdc_remediation.infra.stack.workflow import REMEDIATION_LOGICAL_ID
from tests.conftest import REPO
from tests.infra.template_tools import resolved

TOPIC = "NotificationTopic"


def alarm_named(template: dict[str, Any], suffix: str) -> dict[str, Any]:
    """The alarm's properties, references resolved (tests/infra/template_tools.resolved)."""
    (alarm,) = [
        a["Properties"]
        for a in resources_of_type(template, "AWS::CloudWatch::Alarm").values()
        if str(a["Properties"].get("AlarmName", "")).endswith(f"-{suffix}")
    ]
    found: dict[str, Any] = resolved(template, alarm)
    return found


def watched(alarm: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(namespace, metric, dimension value) of every metric the alarm's expression reads."""
    found = []
    for query in alarm["Metrics"]:
        if "MetricStat" in query:
            metric = query["MetricStat"]["Metric"]
            (dimension,) = metric["Dimensions"]
            found.append((metric["Namespace"], metric["MetricName"], dimension["Value"]))
    return found


def expression(alarm: dict[str, Any]) -> str:
    (returned,) = [q for q in alarm["Metrics"] if q.get("ReturnData", True) and "Expression" in q]
    return str(returned["Expression"])


def test_a_failed_or_timed_out_remediation_execution_alarms(template):
    alarm = alarm_named(template, "remediation-failed")
    remediation = {"Ref": REMEDIATION_LOGICAL_ID}

    metrics = watched(alarm)

    assert sorted(metrics) == sorted(
        [
            ("AWS/States", "ExecutionsFailed", resolved(template, remediation)),
            ("AWS/States", "ExecutionsTimedOut", resolved(template, remediation)),
        ]
    )
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
    assert alarm["TreatMissingData"] == "notBreaching"
    assert alarm["AlarmName"] == "SdcRemediation-remediation-failed"


def test_an_error_of_any_pipeline_function_but_decide_alarms(template):
    # One metric math alarm reads at most 10 metrics: the functions are split over two alarms.
    alarms = [
        alarm_named(template, suffix)
        for suffix in ("function-errors", "function-errors-2", "intake-errors")
    ]
    functions = {
        logical_id: resolved(template, {"Ref": logical_id})
        for logical_id in pipeline_functions(template)
    }

    metrics = [metric for alarm in alarms for metric in watched(alarm)]

    assert {(ns, name) for ns, name, _ in metrics} == {("AWS/Lambda", "Errors")}
    assert sorted(v for _, _, v in metrics) == sorted(
        v for k, v in functions.items() if k != "DecideFunction"
    )
    for alarm in alarms:
        assert len(watched(alarm)) <= 10
        # every watched metric is in the sum
        assert sorted(re.findall(r"FILL\((\w+), 0\)", expression(alarm))) == sorted(
            q["Id"] for q in alarm["Metrics"] if "MetricStat" in q
        )


def errors_alarms(template: dict[str, Any]) -> dict[str, set[str]]:
    """Each alarm on Lambda errors: its name and the handler modules whose errors it reads."""
    module_of = {
        resolved(template, {"Ref": logical_id}): handler.split(".")[-2]
        for logical_id, handler in function_handlers(template).items()
    }
    found = {}
    for alarm in resources_of_type(template, "AWS::CloudWatch::Alarm").values():
        props = resolved(template, alarm["Properties"])
        if "Metrics" not in props:
            continue
        read = [v for ns, name, v in watched(props) if (ns, name) == ("AWS/Lambda", "Errors")]
        if read:
            found[props["AlarmName"]] = {module_of[v] for v in read}
    return found


UNTRUSTED_INPUT = {"store_report", "open_incident"}
"""The functions any pod (a report, a metric datapoint) or alert sender can make raise."""


def test_errors_untrusted_input_can_cause_never_share_an_alarm_with_node_action_errors(template):
    alarms = errors_alarms(template)

    for name, modules in alarms.items():
        assert modules <= UNTRUSTED_INPUT or not modules & UNTRUSTED_INPUT, (name, modules)
    node_actions = {"replace_node", "reboot_node", "isolate_node", "start_health_check"}
    watching = {m for modules in alarms.values() for m in modules}
    assert UNTRUSTED_INPUT | node_actions <= watching
    assert "SdcRemediation-intake-errors" in alarms
    assert alarms["SdcRemediation-intake-errors"] == UNTRUSTED_INPUT


def test_the_pipeline_alarms_notify_the_topic(template):
    for suffix in ("remediation-failed", "function-errors", "function-errors-2", "intake-errors"):
        alarm = alarm_named(template, suffix)
        assert alarm["AlarmActions"] == [f"<{TOPIC}>"]


def test_the_pipeline_alarms_say_where_to_look_and_which_docs_section(template):
    operate = (REPO / "docs" / "operate.md").read_text()
    for suffix, where in (
        ("remediation-failed", "RemediationStateMachineConsole"),
        ("function-errors", "DashboardUrl"),
        ("intake-errors", "DashboardUrl"),
    ):
        description = alarm_named(template, suffix)["AlarmDescription"]
        assert where in description
        assert "`sdc status`" in description
        (section,) = re.findall(r'docs/operate\.md, "([^"]+)"', description)
        assert f"## {section}" in operate, f"docs/operate.md has no section {section!r}"
        assert len(description) <= 1024


@pytest.mark.parametrize(
    ("suffix", "metric"),
    [("cards-undelivered", "CardsUndelivered"), ("reconcile-needs-person", "ReconcileNeedsPerson")],
)
def test_a_card_nobody_received_and_a_stuck_incident_nobody_settled_alarm_on_the_topic(
    template, suffix, metric
):
    alarm = alarm_named(template, suffix)
    operate = (REPO / "docs" / "operate.md").read_text()

    (query,) = alarm["Metrics"]
    assert query["MetricStat"]["Metric"]["MetricName"] == metric
    assert query["MetricStat"]["Stat"] == "Sum"
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    assert alarm["AlarmActions"] == [f"<{TOPIC}>"]
    assert "`sdc status`" in alarm["AlarmDescription"]
    (section,) = re.findall(r'docs/operate\.md, "([^"]+)"', alarm["AlarmDescription"])
    assert f"## {section}" in operate
    assert f"`{alarm['AlarmName']}`".replace("SdcRemediation", "<stack>") in operate


def test_the_audit_check_runs_hourly_and_alarms_on_a_broken_chain(template):
    (rule,) = [
        r["Properties"]
        for r in resources_of_type(template, "AWS::Events::Rule").values()
        if "ScheduleExpression" in r["Properties"]
        and r["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": ["VerifyAuditFunction", "Arn"]}
    ]
    alarm = alarm_named(template, "audit-chains-broken")

    assert rule["ScheduleExpression"] == "rate(1 hour)"
    assert rule["Targets"][0]["Arn"] == {"Fn::GetAtt": ["VerifyAuditFunction", "Arn"]}
    assert (alarm["Namespace"], alarm["MetricName"]) == ("SDC/Remediation", "AuditChainsBroken")
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    assert alarm["AlarmActions"] == [f"<{TOPIC}>"]
    (section,) = re.findall(r'docs/operate\.md, "([^"]+)"', alarm["AlarmDescription"])
    assert f"## {section}" in (REPO / "docs" / "operate.md").read_text()
