"""One Metrics Insights alarm per SDC metric, per instance, as the contract says."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from sdc_remediation.infra.stack.template import resources_of_type
from tests.conftest import load_fixture
from trainer_emitter.contract import NAMESPACE, Metric, metrics_insights_query


def _alarm_named(template: dict[str, Any], name: str) -> dict[str, Any]:
    (alarm,) = [
        r["Properties"]
        for r in resources_of_type(template, "AWS::CloudWatch::Alarm").values()
        if r["Properties"].get("AlarmName") == name
    ]
    return alarm


@pytest.mark.parametrize("metric", list(Metric))
def test_each_metric_has_a_per_instance_metrics_insights_alarm(template, metric):
    Template.from_json(template).has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "AlarmName": metric.alarm_name,
            "AlarmDescription": metric.description,
            "Metrics": [
                {
                    "Expression": metrics_insights_query(metric, NAMESPACE),
                    "Id": Match.any_value(),
                    "Period": 60,
                    "ReturnData": True,
                }
            ],
            "ComparisonOperator": "GreaterThanThreshold",
            "Threshold": 0,
            "EvaluationPeriods": 1,
            "DatapointsToAlarm": 1,
            "TreatMissingData": "notBreaching",
        },
    )


def test_the_detection_alarms_take_no_action_themselves(template):
    for metric in Metric:
        alarm = _alarm_named(template, metric.alarm_name)
        assert "AlarmActions" not in alarm, "the EventBridge rule is the action"


def test_prefix_and_namespace_come_from_context(variant_template):
    for metric in Metric:
        alarm = _alarm_named(variant_template, f"prod-{metric.alarm_name}")
        assert alarm["Metrics"][0]["Expression"] == metrics_insights_query(metric, "ML/SDC")


def test_the_replay_alarm_query_is_the_one_in_the_documented_contributor_event(template):
    event = load_fixture("events", "contributor_alarm")
    alarm = _alarm_named(template, event["detail"]["alarmName"])

    assert (
        alarm["Metrics"][0]["Expression"]
        == event["detail"]["configuration"]["metrics"][0]["expression"]
    )
