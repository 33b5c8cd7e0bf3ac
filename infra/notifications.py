"""Notifications: the encrypted SNS topic for approval requests and outcomes, and the alarms that
say a dead-letter queue holds something (a malformed event never disappears silently)."""

from __future__ import annotations

from aws_cdk import Aws, Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.nag import acknowledge_iam_lint
from infra.settings import Settings

PUBLISH_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")
"""What a publisher needs on the topic's key (SNS encrypts with a data key it asks KMS for)."""


class Notifications(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings) -> None:
        super().__init__(scope, construct_id)

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

        if settings.notification_email:
            self.topic.add_subscription(
                subscriptions.EmailSubscription(settings.notification_email)
            )

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

    def alarm_when_not_empty(self, construct_id: str, queue: sqs.IQueue, what: str) -> None:
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
