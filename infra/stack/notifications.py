"""Notifications: the encrypted SNS topic for approval requests and outcomes, and the alarms on
the pipeline itself: a dead-letter queue holds something (a malformed event never disappears
silently), a remediation execution failed or timed out, a function raised an error."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from aws_cdk import Aws, Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from sdc_remediation.infra.stack.nag import acknowledge_iam_lint

PUBLISH_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")
"""What a publisher needs on the topic's key (SNS encrypts with a data key it asks KMS for)."""

MAX_ALARM_METRICS: Final = 10
"""CloudWatch's limit of metrics in one metric math alarm."""
FAILED_EXECUTIONS_ALARM: Final = "remediation-failed"
FUNCTION_ERRORS_ALARM: Final = "function-errors"
INTAKE_ERRORS_ALARM: Final = "intake-errors"
"""Suffixes of the pipeline alarms' names (`<stack>-<suffix>`)."""
ALARM_PERIOD: Final = Duration.minutes(5)
RUNBOOK: Final = 'docs/operate.md, "When the pipeline alarms"'

FAILED_EXECUTIONS_WHAT_TO_DO: Final = (
    "A remediation execution failed or timed out: its incident closed as failed, or not at all. "
    "Open the RemediationStateMachineConsole output (Executions, filter Failed / Timed out); "
    "each execution is named after its incident id. `sdc status` lists the last failures, "
    "`sdc show <incident id>` the error and the audit trail. The node may still be cordoned: "
    f"the closing notice says so. Runbook: {RUNBOOK}."
)
FUNCTION_ERRORS_WHAT_TO_DO: Final = (
    "A pipeline function raised an error (a retried throttle counts too). The dashboard's "
    "DashboardUrl output, widget Function errors, names the function; its log group "
    "/aws/lambda/<function> has the error (JSON logs, the incident id as correlation id). "
    "`sdc status` shows whether an incident failed or an event went to a dead-letter queue. "
    "decide is left out: it refuses bad approvals by raising, by design (the approver sees "
    f"why). Runbook: {RUNBOOK}."
)


def intake_errors_what_to_do(functions: Iterable[str]) -> str:
    """What the intake-errors alarm says, naming the functions it sums."""
    return (
        f"A function that takes reports, alarms or alerts in ({', '.join(sorted(functions))}) "
        "raised an error: any training pod can cause one with a malformed report or datapoint, "
        "so this alarm is apart from function-errors, which a node-action failure raises. The "
        "dashboard's DashboardUrl output, widget Function errors, names the function; its log "
        "group has the error. `sdc status` shows whether an event went to a dead-letter queue "
        f"(failed alarms, failed reports). Runbook: {RUNBOOK}."
    )


@dataclass(frozen=True)
class NotificationsProps:
    stack_name: str
    """The pipeline alarms are named `<stack>-<suffix>`."""
    email: str | None = None
    """Subscribed to the topic when set (`sdc:notificationEmail`)."""


class Notifications(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, props: NotificationsProps) -> None:
        super().__init__(scope, construct_id)
        self.props = props

        self.key = kms.Key(
            self,
            "TopicKey",
            description="Encrypts the SDC remediation notification topic",
            enable_key_rotation=True,
        )
        acknowledge_iam_lint(
            self.key,
            "RESOURCE_STAR",
            ["kms:*"],
            "In a key policy, Resource '*' means this key and nothing else. The account "
            "statement (kms:*) is CDK's default key policy, which lets IAM policies govern the "
            "key; the CloudWatch statement lets the alarms publish to the encrypted topic.",
        )
        self.topic = sns.Topic(
            self,
            "Topic",
            display_name="SDC remediation",
            master_key=self.key,
            enforce_ssl=True,
        )
        cfn_topic = self.topic.node.default_child
        assert isinstance(cfn_topic, sns.CfnTopic)
        cfn_topic.override_logical_id("NotificationTopic")

        # CloudWatch alarms (the dead-letter queue alarms below) publish as the CloudWatch
        # service: it needs the key and, with a topic policy in place, an explicit allow.
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=list(PUBLISH_KEY_ACTIONS),
                resources=["*"],
            )
        )
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={
                    "ArnLike": {
                        "aws:SourceArn": f"arn:{Aws.PARTITION}:cloudwatch:{Aws.REGION}:"
                        f"{Aws.ACCOUNT_ID}:alarm:*"
                    },
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                },
            )
        )

        if props.email:
            self.topic.add_subscription(subscriptions.EmailSubscription(props.email))

    def grant_publish(self, grantee: iam.IGrantable) -> None:
        """sns:Publish on this topic and the two key actions publishing needs; nothing else."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid="PublishNotifications",
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
            )
        )
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid="EncryptNotifications",
                actions=list(PUBLISH_KEY_ACTIONS),
                resources=[self.key.key_arn],
            )
        )

    def alarm_when_not_empty(
        self, construct_id: str, queue: sqs.IQueue, what: str
    ) -> cloudwatch.Alarm:
        """An alarm on the topic as soon as `queue` holds a message."""
        alarm = cloudwatch.Alarm(
            self,
            construct_id,
            alarm_description=f"{what} Inspect the messages in the queue, fix, and redrive.",
            metric=queue.metric_approximate_number_of_messages_visible(
                period=Duration.minutes(5), statistic="Maximum"
            ),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        alarm.add_alarm_action(cw_actions.SnsAction(self.topic))
        return alarm

    def alarm_on_failed_executions(
        self, construct_id: str, state_machine: sfn.IStateMachine
    ) -> cloudwatch.Alarm:
        """An alarm on the topic when a remediation execution fails or times out (CloseFailed
        ends in a Fail state, so every incident closed as failed counts)."""
        expression = cloudwatch.MathExpression(
            expression="FILL(failed, 0) + FILL(timedOut, 0)",
            using_metrics={
                "failed": state_machine.metric_failed(period=ALARM_PERIOD, statistic="Sum"),
                "timedOut": state_machine.metric_timed_out(period=ALARM_PERIOD, statistic="Sum"),
            },
            period=ALARM_PERIOD,
            label="remediation executions failed or timed out",
        )
        return self._alarm(
            construct_id, expression, FAILED_EXECUTIONS_ALARM, FAILED_EXECUTIONS_WHAT_TO_DO
        )

    def alarm_on_function_errors(
        self,
        construct_id: str,
        functions: Mapping[str, lambda_.IFunction],
        name: str = FUNCTION_ERRORS_ALARM,
        what_to_do: str = FUNCTION_ERRORS_WHAT_TO_DO,
    ) -> list[cloudwatch.Alarm]:
        """Alarms on the topic when any of `functions` raises an error: one metric math alarm
        reads at most MAX_ALARM_METRICS metrics, so the functions are split over
        `<stack>-<name>`, `<stack>-<name>-2`, ..., in their order."""
        modules = list(functions)
        chunks = [
            modules[start : start + MAX_ALARM_METRICS]
            for start in range(0, len(modules), MAX_ALARM_METRICS)
        ]
        alarms = []
        for number, chunk in enumerate(chunks, start=1):
            using = {
                f"e{index}": functions[module].metric_errors(period=ALARM_PERIOD, statistic="Sum")
                for index, module in enumerate(chunk)
            }
            expression = cloudwatch.MathExpression(
                expression=" + ".join(f"FILL({name}, 0)" for name in using),
                using_metrics=using,
                period=ALARM_PERIOD,
                label=f"errors of {', '.join(chunk)}"[:255],
            )
            suffix = "" if number == 1 else f"-{number}"
            alarms.append(
                self._alarm(
                    f"{construct_id}{suffix.replace('-', '')}",
                    expression,
                    f"{name}{suffix}",
                    what_to_do,
                )
            )
        return alarms

    def alarm_on_metric(
        self, construct_id: str, metric: cloudwatch.IMetric, suffix: str, what_to_do: str
    ) -> cloudwatch.Alarm:
        """An alarm `<stack>-<suffix>` on the topic as soon as `metric` (a count) is above zero
        in a period."""
        return self._alarm(construct_id, metric, suffix, what_to_do)

    def _alarm(
        self, construct_id: str, metric: cloudwatch.IMetric, suffix: str, what_to_do: str
    ) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            self,
            construct_id,
            alarm_name=f"{self.props.stack_name}-{suffix}",
            alarm_description=what_to_do,
            metric=metric,
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        alarm.add_alarm_action(cw_actions.SnsAction(self.topic))
        return alarm
