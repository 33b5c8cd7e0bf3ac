"""The local stand-in for alarm evaluation turns metric data into documented contributor events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from sdc_remediation.infra.local.evaluator import Evaluator, MuteRule
from sdc_remediation.infra.local.template import LocalStack
from sdc_remediation.infra.stack.template import REGION
from sdc_remediation.lambdas.models.events import parse_mute_detail
from tests.conftest import load_fixture
from trainer_emitter.contract import NAMESPACE, Metric, metrics_insights_query

NOW = datetime.now(UTC).replace(microsecond=0)


def alarm_properties(metric: Metric) -> dict:
    return {
        "AlarmName": metric.alarm_name,
        "AlarmDescription": metric.description,
        "ComparisonOperator": "GreaterThanThreshold",
        "Threshold": 0,
        "EvaluationPeriods": 1,
        "Metrics": [
            {
                "Id": "q1",
                "Expression": metrics_insights_query(metric),
                "Period": 60,
                "ReturnData": True,
            }
        ],
    }


@pytest.fixture
def evaluator(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        session = boto3.session.Session(region_name=REGION)
        stack = LocalStack(template={}, alarms={m.alarm_name: alarm_properties(m) for m in Metric})
        yield Evaluator(stack, session), session.client("cloudwatch")


def put(cloudwatch, metric: Metric, dimensions: dict[str, str], value: float = 1.0) -> None:
    cloudwatch.put_metric_data(
        Namespace=NAMESPACE,
        MetricData=[
            {
                "MetricName": metric.value,
                "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions.items()],
                "Timestamp": NOW,
                "Value": value,
                "Unit": "Count",
            }
        ],
    )


def test_a_datapoint_above_the_threshold_becomes_one_contributor_alarm_event_of_the_documented_shape(
    evaluator,
):
    evaluate, cloudwatch = evaluator
    put(
        cloudwatch,
        Metric.REPLAY_MISMATCH,
        {"ClusterName": "ml-cluster-1", "InstanceId": "i-0abc1234def567890"},
    )

    (event,) = evaluate.evaluate(NOW)

    documented = load_fixture("events", "contributor_alarm")
    assert event.keys() == documented.keys()
    assert event["detail"].keys() == documented["detail"].keys()
    assert (
        event["detail"]["alarmContributor"]["attributes"]
        == documented["detail"]["alarmContributor"]["attributes"]
    )
    assert event["detail"]["configuration"] == documented["detail"]["configuration"]
    assert event["detail"]["state"]["value"] == "ALARM"


def test_a_contributor_already_in_alarm_raises_no_second_event(evaluator):
    evaluate, cloudwatch = evaluator
    put(
        cloudwatch,
        Metric.DIVERGENT_TENSORS,
        {"ClusterName": "c1", "InstanceId": "i-0aa00000000000001"},
    )
    evaluate.evaluate(NOW)

    assert evaluate.evaluate(NOW) == []


def test_when_the_data_stops_the_contributor_returns_to_ok(evaluator):
    evaluate, cloudwatch = evaluator
    put(
        cloudwatch,
        Metric.NONFINITE_GRAD,
        {"ClusterName": "c1", "InstanceId": "i-0aa00000000000001"},
    )
    evaluate.evaluate(NOW)

    (event,) = evaluate.evaluate(NOW + timedelta(minutes=3))

    assert event["detail"]["state"]["value"] == "OK"


def test_a_metric_with_an_extra_dimension_is_invisible_to_the_schema_query(evaluator):
    evaluate, cloudwatch = evaluator
    put(
        cloudwatch,
        Metric.REPLAY_MISMATCH,
        {"ClusterName": "c1", "InstanceId": "i-0aa00000000000001", "service": "trainer"},
    )

    assert evaluate.evaluate(NOW) == []


def test_each_instance_is_its_own_contributor(evaluator):
    evaluate, cloudwatch = evaluator
    for instance in ("i-0aa00000000000001", "i-0bb00000000000002"):
        put(cloudwatch, Metric.REPLAY_MISMATCH, {"ClusterName": "c1", "InstanceId": instance})

    events = evaluate.evaluate(NOW)

    assert sorted(e["detail"]["alarmContributor"]["attributes"]["InstanceId"] for e in events) == [
        "i-0aa00000000000001",
        "i-0bb00000000000002",
    ]
    assert len({e["detail"]["alarmContributor"]["id"] for e in events}) == 2


def test_a_muted_alarm_s_event_carries_the_documented_mute_detail(evaluator):
    local, cloudwatch = evaluator
    local.mute(MuteRule("gpu-maintenance", NOW - timedelta(minutes=5), NOW + timedelta(hours=1)))
    put(cloudwatch, Metric.REPLAY_MISMATCH, {"ClusterName": "ml-cluster-1", "InstanceId": "i-0b"})

    (event,) = local.evaluate(NOW)

    documented = load_fixture("events", "contributor_alarm_muted")["detail"]["muteDetail"]
    assert event["detail"]["muteDetail"].keys() == documented.keys()
    mute = parse_mute_detail(event["detail"]["muteDetail"])
    assert mute.rule_name == "gpu-maintenance"
    assert mute.window_end == NOW + timedelta(hours=1)


def test_an_alarm_outside_its_mute_window_is_not_muted(evaluator):
    local, cloudwatch = evaluator
    local.mute(MuteRule("last-week", NOW - timedelta(days=8), NOW - timedelta(days=7)))
    put(cloudwatch, Metric.REPLAY_MISMATCH, {"ClusterName": "ml-cluster-1", "InstanceId": "i-0b"})

    (event,) = local.evaluate(NOW)

    assert "muteDetail" not in event["detail"]
