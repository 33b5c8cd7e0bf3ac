"""Hardware alerts: for each cluster of `sdc:telemetry`, the alerting rules in its Amazon Managed
Service for Prometheus workspace (`AWS::APS::RuleGroupsNamespace`) and the workspace's alert
manager definition, which sends every alert to this stack's hardware alert topic.

CloudFormation has the alert manager definition only as a property of `AWS::APS::Workspace`,
and the workspace is the HyperPod observability add-on's, not this stack's: the definition is
set through the service's own API by a custom resource (`CreateAlertManagerDefinition` on
create, so a workspace that already has one is refused loudly, never overwritten;
`PutAlertManagerDefinition` on update; `DeleteAlertManagerDefinition` on delete), with exactly
those three actions on exactly the configured workspaces.

The topic is encrypted with the notification topic's key; its policy lets the Prometheus service
(`aps.amazonaws.com`) publish only for the configured workspaces (`aws:SourceArn`) of this account
(`aws:SourceAccount`), and denies `sns:Publish` to every other caller, principals of the account
included: the intake takes what arrives on the topic as the workspaces' alerts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from aws_cdk import Aws, CfnResource, Duration, Stack
from aws_cdk import aws_aps as aps
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import custom_resources as cr
from constructs import Construct

from sdc_remediation.infra.stack.alert_manager import alert_manager_definition
from sdc_remediation.infra.stack.alert_rules import Thresholds, rules_yaml
from sdc_remediation.infra.stack.functions import workspace_arn
from sdc_remediation.infra.stack.log_groups import retained_log_group
from sdc_remediation.infra.stack.nag import acknowledge, acknowledge_checkov
from sdc_remediation.infra.stack.settings import TelemetrySource
from sdc_remediation.infra.stack.template import DEPLOY_TIME_FUNCTION

PROMETHEUS_SERVICE: Final = "aps.amazonaws.com"
DEFINITION_ACTIONS: Final = (
    "aps:CreateAlertManagerDefinition",
    "aps:PutAlertManagerDefinition",
    "aps:DeleteAlertManagerDefinition",
)
PUBLISH_KEY_ACTIONS: Final = ("kms:GenerateDataKey*", "kms:Decrypt")
MAX_NAMESPACE_NAME: Final = 64
TOPIC_LOGICAL_ID: Final = "HardwareAlertTopic"
DEPLOY_TIME_CHECKOV: Final = {
    "CKV_AWS_115": "it runs once per deployment, for CloudFormation only: no concurrency to cap",
    "CKV_AWS_116": "CloudFormation is its only caller and fails the deployment on its error",
    "CKV_AWS_117": "it calls only the aps API, whose public endpoint it reaches outside any VPC",
    "CKV_AWS_173": "its environment holds no secret, only what CDK sets for its SDK",
}
"""checkov's findings on CDK's AwsCustomResource function, and why each does not apply."""


@dataclass(frozen=True)
class WorkspaceTarget:
    """A telemetry cluster's workspace, as the stack addresses it."""

    source: TelemetrySource
    arn: str
    region: str


@dataclass(frozen=True)
class HardwareAlertsProps:
    stack_name: str
    workspaces: Sequence[WorkspaceTarget]
    thresholds: Thresholds
    key: kms.IKey
    """The notification topic's key: the hardware alert topic is encrypted with it too."""
    log_retention_days: int


def namespace_name(stack_name: str) -> str:
    """The rule groups namespace's name in each workspace: one per stack, so two deployments
    on one workspace do not replace each other's rules."""
    return f"{stack_name}-gpu-hardware"[:MAX_NAMESPACE_NAME]


class HardwareAlerts(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, props: HardwareAlertsProps) -> None:
        super().__init__(scope, construct_id)
        arns = sorted({w.arn for w in props.workspaces})
        self.topic = sns.Topic(
            self,
            "Topic",
            display_name="SDC hardware alerts",
            master_key=props.key,
            enforce_ssl=True,
        )
        cfn_topic = self.topic.node.default_child
        assert isinstance(cfn_topic, sns.CfnTopic)
        cfn_topic.override_logical_id(TOPIC_LOGICAL_ID)
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="PrometheusWorkspacesPublish",
                principals=[iam.ServicePrincipal(PROMETHEUS_SERVICE)],
                actions=["sns:Publish", "sns:GetTopicAttributes"],
                resources=[self.topic.topic_arn],
                conditions={
                    "ArnEquals": {"aws:SourceArn": arns},
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                },
            )
        )
        # An Allow alone lets any principal of the account whose own policy allows
        # `sns:Publish` deliver alerts too (same-account access needs either policy): these
        # denials leave the configured workspaces, through the Prometheus service, the only
        # senders (a principal of the account carries no `aws:SourceArn`).
        for sid, condition in (
            ("OnlyTheWorkspacesPublish", {"ArnNotEquals": {"aws:SourceArn": arns}}),
            (
                "OnlyThisAccountsWorkspacesPublish",
                {"StringNotEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            ),
        ):
            self.topic.add_to_resource_policy(
                iam.PolicyStatement(
                    sid=sid,
                    effect=iam.Effect.DENY,
                    principals=[iam.AnyPrincipal()],
                    actions=["sns:Publish"],
                    resources=[self.topic.topic_arn],
                    conditions=condition,
                )
            )
        props.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="PrometheusWorkspacesPublish",
                principals=[iam.ServicePrincipal(PROMETHEUS_SERVICE)],
                actions=list(PUBLISH_KEY_ACTIONS),
                resources=["*"],
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            )
        )
        self.namespaces: dict[str, aps.CfnRuleGroupsNamespace] = {}
        self.definitions: dict[str, cr.AwsCustomResource] = {}
        log_group = retained_log_group(self, "DefinitionLogs", props.log_retention_days)
        # The deploy-time function's own role: its logs and, per workspace, the definition
        # actions; no managed policy (CDK's default role would carry AWSLambdaBasicExecutionRole).
        self.role = iam.Role(
            self,
            "DefinitionRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Sets the alert manager definitions of the telemetry workspaces "
            "while the stack deploys",
        )
        log_group.grant_write(self.role)
        for index, target in enumerate(props.workspaces):
            self._workspace(index, target, props, log_group)
        self._deploy_time_function()

    def deliver_to(self, intake: lambda_.IFunction) -> None:
        """Every notification of the topic goes to the claims intake (`store_report`), which
        SNS invokes asynchronously: its retries and failure queue apply."""
        self.topic.add_subscription(subscriptions.LambdaSubscription(intake))

    def _workspace(
        self,
        index: int,
        target: WorkspaceTarget,
        props: HardwareAlertsProps,
        log_group: logs.ILogGroup,
    ) -> None:
        cluster = target.source.cluster
        self.namespaces[cluster] = aps.CfnRuleGroupsNamespace(
            self,
            f"Rules{index}",
            name=namespace_name(props.stack_name),
            workspace=target.arn,
            data=rules_yaml(
                cluster, node_label=target.source.node_label, thresholds=props.thresholds
            ),
        )
        definition = alert_manager_definition(cluster, self.topic.topic_arn, target.region)
        workspace = {"workspaceId": target.source.workspace_id}
        physical = cr.PhysicalResourceId.of(target.source.workspace_id)

        def amp(action: str, parameters: dict[str, str], *, keeps: bool) -> cr.AwsSdkCall:
            return cr.AwsSdkCall(
                service="amp",
                action=action,
                parameters=parameters,
                region=target.region,
                physical_resource_id=physical if keeps else None,
            )

        self.definitions[cluster] = cr.AwsCustomResource(
            self,
            f"AlertManager{index}",
            resource_type="Custom::AlertManagerDefinition",
            on_create=amp(
                "CreateAlertManagerDefinition", {**workspace, "data": definition}, keeps=True
            ),
            on_update=amp(
                "PutAlertManagerDefinition", {**workspace, "data": definition}, keeps=True
            ),
            on_delete=amp("DeleteAlertManagerDefinition", workspace, keeps=False),
            policy=cr.AwsCustomResourcePolicy.from_statements(
                [iam.PolicyStatement(actions=list(DEFINITION_ACTIONS), resources=[target.arn])]
            ),
            install_latest_aws_sdk=False,
            role=self.role,
            log_group=log_group,
            timeout=Duration.minutes(2),
        )

    def _deploy_time_function(self) -> None:
        """CDK's function behind the custom resources: its dependencies tidied, what the
        checkers say of it acknowledged with reasons."""
        provider = Stack.of(self).node.try_find_child(DEPLOY_TIME_FUNCTION)
        function = provider.node.default_child if provider is not None else None
        if provider is None or not isinstance(function, CfnResource):
            return
        acknowledge(
            provider,
            "AwsSolutions-L1",
            "The runtime of CDK's AwsCustomResource function is CDK's choice, pinned by the "
            "aws-cdk-lib version; it runs only while the stack deploys.",
        )
        # CDK makes the function depend on its role, which its Role GetAtt already does
        # (cfn-lint W3005); the dependency on the role's policy (its logs) stays.
        policy = self.role.node.try_find_child("DefaultPolicy")
        assert policy is not None and isinstance(policy.node.default_child, CfnResource)
        function.add_override(
            "DependsOn", [Stack.of(self).get_logical_id(policy.node.default_child)]
        )
        for check, reason in DEPLOY_TIME_CHECKOV.items():
            acknowledge_checkov(function, check, f"CDK's AwsCustomResource function: {reason}.")


def workspace_targets(stack: Stack, sources: Sequence[TelemetrySource]) -> list[WorkspaceTarget]:
    """Each telemetry cluster's workspace: its ARN (completed with the stack's account and
    region when only the id was given) and the region its API is called in."""
    return [
        WorkspaceTarget(source, workspace_arn(stack, source), source.region or stack.region)
        for source in sources
    ]
