"""The detection alarms: one CloudWatch Metrics Insights alarm per SDC metric, each with one
contributor per (ClusterName, InstanceId), so every suspect instance alarms on its own and
EventBridge gets a "CloudWatch Alarm Contributor State Change" per instance."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from trainer_emitter.contract import PERIOD_SECONDS, Metric, metrics_insights_query


def alarm_name(metric: Metric, prefix: str = "") -> str:
    """The deployed alarm name: the contract's, with the optional deployment prefix
    (`contract.metric_for_alarm_name` maps both forms back to the metric)."""
    return f"{prefix}-{metric.alarm_name}" if prefix else metric.alarm_name


def detection_query(metric: Metric, namespace: str) -> cloudwatch.MathExpression:
    """The Metrics Insights query of `metric`'s alarm, one series per (ClusterName, InstanceId).
    The dashboard plots exactly this (infra/stack/dashboard.py), so it shows what the alarm sees."""
    return cloudwatch.MathExpression(
        expression=metrics_insights_query(metric, namespace),
        using_metrics={},
        period=Duration.seconds(PERIOD_SECONDS),
        label=metric.value,
    )


@dataclass(frozen=True)
class ContributorAlarmsProps:
    namespace: str
    """The SDC metrics' CloudWatch namespace (`sdc:namespace`)."""
    alarm_name_prefix: str = ""


class ContributorAlarms(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, props: ContributorAlarmsProps
    ) -> None:
        super().__init__(scope, construct_id)
        self.alarms: dict[Metric, cloudwatch.Alarm] = {}
        self.names: dict[Metric, str] = {}
        for metric in Metric:
            self.names[metric] = alarm_name(metric, props.alarm_name_prefix)
            self.alarms[metric] = detection_query(metric, props.namespace).create_alarm(
                self,
                metric.name.title().replace("_", ""),
                alarm_name=self.names[metric],
                alarm_description=metric.description,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                threshold=0,
                evaluation_periods=1,
                datapoints_to_alarm=1,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )

    @property
    def alarm_names(self) -> list[str]:
        """Plain strings, not `alarm.alarm_name` tokens: the rule pattern must list them."""
        return list(self.names.values())
