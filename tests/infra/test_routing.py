"""EventBridge: our contributor ALARMs reach open_incident, SDC Reports reach store_report, and
nothing is lost on the way (retries, dead-letter queues)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from moto.events.models import EventPattern

from sdc_remediation.infra.stack.routing import CONTRIBUTOR_DETAIL_TYPE
from sdc_remediation.infra.stack.template import resources_of_type
from tests.conftest import load_fixture
from tests.infra.template_tools import statements_of_function
from trainer_emitter.contract import REPORT_DETAIL_TYPE, REPORT_SOURCE, Metric


def _rule_targeting(template: dict[str, Any], function_id: str) -> dict[str, Any]:
    (rule,) = [
        r["Properties"]
        for r in resources_of_type(template, "AWS::Events::Rule").values()
        if r["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}
    ]
    return rule


def _matches(rule: dict[str, Any], event: Any) -> bool:
    return bool(EventPattern.load(json.dumps(rule["EventPattern"])).matches_event(event))


def test_contributor_rule_pattern_selects_our_alarms_entering_alarm(template):
    pattern = _rule_targeting(template, "OpenIncidentFunction")["EventPattern"]

    assert pattern == {
        "source": ["aws.cloudwatch"],
        "detail-type": [CONTRIBUTOR_DETAIL_TYPE],
        "detail": {
            "alarmName": [m.alarm_name for m in Metric],
            "state": {"value": ["ALARM"]},
        },
    }


def test_contributor_rule_pattern_uses_the_prefixed_alarm_names(variant_template):
    pattern = _rule_targeting(variant_template, "OpenIncidentFunction")["EventPattern"]

    assert sorted(pattern["detail"]["alarmName"]) == sorted(f"prod-{m.alarm_name}" for m in Metric)


@pytest.mark.parametrize(
    ("fixture_name", "routed"),
    [
        ("contributor_alarm", True),
        ("contributor_alarm_muted", True),  # held by open_incident, which must see it
        ("contributor_ok", False),
        ("alarm_level_metrics_insights", False),
        ("hyperpod_node_health", False),
    ],
)
def test_only_the_contributor_alarm_event_opens_an_incident(template, fixture_name, routed):
    rule = _rule_targeting(template, "OpenIncidentFunction")

    assert _matches(rule, load_fixture("events", fixture_name)) is routed


def test_report_rule_routes_sdc_reports_to_store_report(template):
    rule = _rule_targeting(template, "StoreReportFunction")
    report = {
        "source": REPORT_SOURCE,
        "detail-type": REPORT_DETAIL_TYPE,
        "detail": {"report_id": "r-1"},
    }

    assert rule["EventPattern"] == {"source": [REPORT_SOURCE], "detail-type": [REPORT_DETAIL_TYPE]}
    assert _matches(rule, report)
    assert not _matches(rule, {**report, "source": "someone.else"})


@pytest.mark.parametrize("function_id", ["OpenIncidentFunction", "StoreReportFunction"])
def test_rule_targets_retry_and_dead_letter_into_an_encrypted_tls_only_queue(template, function_id):
    (target,) = _rule_targeting(template, function_id)["Targets"]

    assert target["RetryPolicy"]["MaximumRetryAttempts"] > 0
    assert target["RetryPolicy"]["MaximumEventAgeInSeconds"] > 0
    queue_id = target["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0]
    _assert_encrypted_tls_only(template, queue_id)


@pytest.mark.parametrize("function_id", ["OpenIncidentFunction", "StoreReportFunction"])
def test_events_the_function_fails_on_land_in_a_queue(template, function_id):
    (config,) = [
        r["Properties"]
        for r in resources_of_type(template, "AWS::Lambda::EventInvokeConfig").values()
        if r["Properties"]["FunctionName"] == {"Ref": function_id}
    ]
    queue_arn = config["DestinationConfig"]["OnFailure"]["Destination"]
    queue_id = queue_arn["Fn::GetAtt"][0]

    assert config["MaximumRetryAttempts"] == 2
    _assert_encrypted_tls_only(template, queue_id)
    sends = [
        s for s in statements_of_function(template, function_id) if "sqs:SendMessage" in s["Action"]
    ]
    assert [s["Resource"] for s in sends] == [queue_arn]


def test_failed_reports_and_failed_alarms_land_in_queues_of_their_own(template):
    def failure_queue(function_id: str) -> str:
        (config,) = [
            r["Properties"]
            for r in resources_of_type(template, "AWS::Lambda::EventInvokeConfig").values()
            if r["Properties"]["FunctionName"] == {"Ref": function_id}
        ]
        return str(config["DestinationConfig"]["OnFailure"]["Destination"]["Fn::GetAtt"][0])

    alarms_queue, reports_queue = (
        failure_queue("OpenIncidentFunction"),
        failure_queue("StoreReportFunction"),
    )

    assert alarms_queue != reports_queue
    alarmed = [
        props["Dimensions"][0]["Value"]["Fn::GetAtt"][0]
        for props in (
            a["Properties"] for a in resources_of_type(template, "AWS::CloudWatch::Alarm").values()
        )
        if props.get("Namespace") == "AWS/SQS"
    ]
    assert alarmed.count(alarms_queue) == alarmed.count(reports_queue) == 1
    outputs = template["Outputs"]
    assert outputs["FailedInvocationsQueueUrl"]["Value"] == {"Ref": alarms_queue}
    assert outputs["FailedReportsQueueUrl"]["Value"] == {"Ref": reports_queue}


def test_a_message_in_either_queue_raises_an_alarm_on_the_topic(template):
    queues = set(resources_of_type(template, "AWS::SQS::Queue"))
    alarmed = set()
    for alarm in resources_of_type(template, "AWS::CloudWatch::Alarm").values():
        props = alarm["Properties"]
        if props.get("Namespace") == "AWS/SQS":
            assert props["AlarmActions"] == [{"Ref": "NotificationTopic"}]
            assert props["Threshold"] == 0
            alarmed.add(props["Dimensions"][0]["Value"]["Fn::GetAtt"][0])

    assert alarmed == queues


def _assert_encrypted_tls_only(template: dict[str, Any], queue_id: str) -> None:
    queue = template["Resources"][queue_id]
    assert queue["Type"] == "AWS::SQS::Queue"
    assert queue["Properties"].get("SqsManagedSseEnabled") or queue["Properties"].get(
        "KmsMasterKeyId"
    )
    denies = [
        statement
        for policy in resources_of_type(template, "AWS::SQS::QueuePolicy").values()
        if {"Ref": queue_id} in policy["Properties"]["Queues"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement["Effect"] == "Deny"
    ]
    assert any(d["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for d in denies), (
        f"{queue_id} accepts plain HTTP"
    )


def test_the_reconcile_function_runs_every_fifteen_minutes_on_a_schedule(template):
    rule = _rule_targeting(template, "ReconcileFunction")

    assert rule["ScheduleExpression"] == "rate(15 minutes)"
    assert "EventPattern" not in rule
    assert rule["Targets"][0]["RetryPolicy"]["MaximumRetryAttempts"] == 0
