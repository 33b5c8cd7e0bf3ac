"""EventBridge routing: contributor ALARM events of our alarms → open_incident, SDC Report events
→ store_report. Both targets retry and dead-letter into an encrypted, TLS-only queue."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from sdc_remediation.infra.stack.nag import SQS_MANAGED_ENCRYPTION, acknowledge, acknowledge_checkov
from sdc_remediation.lambdas.models.events import CONTRIBUTOR_DETAIL_TYPE, CONTRIBUTOR_SOURCE
from trainer_emitter.contract import REPORT_DETAIL_TYPE, REPORT_SOURCE

# The contributor rule routes AWS's event for one contributor of a Metrics Insights alarm, as
# the function parses it (`CONTRIBUTOR_*`); the alarm-level "CloudWatch Alarm State Change" names
# no instance and is not routed.

TARGET_MAX_EVENT_AGE: Final = Duration.hours(6)
TARGET_RETRY_ATTEMPTS: Final = 20


@dataclass(frozen=True)
class RoutingProps:
    alarm_names: Sequence[str]
    """The contributor alarms' names as plain strings: the rule's pattern lists them."""
    open_incident: lambda_.IFunction
    store_report: lambda_.IFunction


class Routing(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, props: RoutingProps) -> None:
        super().__init__(scope, construct_id)

        self.dead_letter_queue = sqs.Queue(
            self,
            "UndeliveredEventsQueue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        acknowledge(
            self.dead_letter_queue,
            "AwsSolutions-SQS3",
            "This queue is itself the dead-letter queue of both EventBridge "
            "targets; cdk-nag only recognises SQS redrive policies and Lambda "
            "DeadLetterConfig as DLQ use. Its depth alarms on the notification topic.",
        )
        acknowledge_checkov(self.dead_letter_queue, "CKV_AWS_27", SQS_MANAGED_ENCRYPTION)

        self.contributor_rule = events.Rule(
            self,
            "ContributorAlarmRule",
            description="SDC contributor alarms entering ALARM → open an incident",
            event_pattern=events.EventPattern(
                source=[CONTRIBUTOR_SOURCE],
                detail_type=[CONTRIBUTOR_DETAIL_TYPE],
                detail={"alarmName": list(props.alarm_names), "state": {"value": ["ALARM"]}},
            ),
        )
        self.contributor_rule.add_target(self._target(props.open_incident))

        self.report_rule = events.Rule(
            self,
            "ReportRule",
            description="SDC Report events from training jobs → store the evidence",
            event_pattern=events.EventPattern(
                source=[REPORT_SOURCE], detail_type=[REPORT_DETAIL_TYPE]
            ),
        )
        self.report_rule.add_target(self._target(props.store_report))

    def _target(self, fn: lambda_.IFunction) -> targets.LambdaFunction:
        return targets.LambdaFunction(
            fn,
            dead_letter_queue=self.dead_letter_queue,
            max_event_age=TARGET_MAX_EVENT_AGE,
            retry_attempts=TARGET_RETRY_ATTEMPTS,
        )
