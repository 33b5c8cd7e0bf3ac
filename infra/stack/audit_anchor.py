"""The audit anchor: a CloudWatch Logs group every stored audit entry's hash is appended to.

The audit table's hash chain proves order, not authenticity: whoever may PutItem on it can
rewrite an entry and recompute the chain. The functions may only create log streams in this
group and put log events into them: no DeleteLogStream, DeleteLogGroup, PutRetentionPolicy or
DeleteRetentionPolicy is granted to them, so what they anchored stays as written, and
`sdc audit verify` checks every chain against it. The group is kept for ten years and retained
when the stack is deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct

from sdc_remediation.infra.stack.nag import acknowledge, acknowledge_checkov
from sdc_remediation.lambdas.metric_names import PIPELINE_NAMESPACE, SERVICE_DIMENSION, SERVICE_NAME
from sdc_remediation.lambdas.metric_names import PipelineMetric as M

APPEND_ACTIONS: Final = ("logs:CreateLogStream", "logs:PutLogEvents")
READ_ACTIONS: Final = ("logs:FilterLogEvents",)
LOGICAL_ID: Final = "AuditAnchorLogGroup"
CHECK_EVERY: Final = Duration.hours(1)
BROKEN_CHAINS_ALARM: Final = "audit-chains-broken"
BROKEN_CHAINS_WHAT_TO_DO: Final = (
    "The scheduled audit check found audit chains that do not verify against the audit "
    "anchor: an entry rewritten, a tail or a subject removed, or an entry written around the "
    "pipeline. Run `sdc audit verify --all` for each chain's first bad entry, and see the "
    'verify_audit function\'s log; docs/operate.md, "When the pipeline alarms".'
)


def anchor_log_group_name(stack_name: str) -> str:
    return f"/{stack_name}/audit-anchor"


@dataclass(frozen=True)
class AuditAnchorLogProps:
    stack_name: str
    """Names the log group (`/<stack>/audit-anchor`) and the broken-chains alarm."""


class AuditAnchorLog(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, props: AuditAnchorLogProps) -> None:
        super().__init__(scope, construct_id)
        self.props = props
        self.log_group = logs.LogGroup(
            self,
            "LogGroup",
            log_group_name=anchor_log_group_name(props.stack_name),
            retention=logs.RetentionDays.TEN_YEARS,
            removal_policy=RemovalPolicy.RETAIN,
        )
        cfn = self.log_group.node.default_child
        assert isinstance(cfn, logs.CfnLogGroup)
        cfn.override_logical_id(LOGICAL_ID)
        acknowledge_checkov(
            self.log_group,
            "CKV_AWS_158",
            "Encrypted at rest by CloudWatch Logs' own keys: the anchor holds audit subjects, "
            "sequence numbers and SHA-256 hashes, no secret. Its protection is that the "
            "writers may only append (IAM), not confidentiality.",
        )

    @property
    def name(self) -> str:
        return self.log_group.log_group_name

    def grant_append(self, grantee: iam.IGrantable) -> None:
        """Create a stream of its own and put events: nothing that changes or deletes."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid="AuditAnchorAppendOnly",
                actions=list(APPEND_ACTIONS),
                resources=[
                    self.log_group.log_group_arn,
                    f"{self.log_group.log_group_arn.removesuffix(':*')}:log-stream:*",
                ],
            )
        )
        if isinstance(grantee, iam.Role | lambda_.Function):
            acknowledge(
                grantee.role if isinstance(grantee, lambda_.Function) and grantee.role else grantee,
                f"AwsSolutions-IAM5[Resource::<{LOGICAL_ID}.Arn>:log-stream:*]",
                "Each function instance writes its audit hashes to a log stream of its own, "
                "named when it first writes (a date and a random id), so the streams cannot "
                "be listed in advance; the grant is still one log group, append only.",
            )

    def grant_read(self, grantee: iam.IGrantable) -> None:
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid="AuditAnchorRead",
                actions=list(READ_ACTIONS),
                resources=[self.log_group.log_group_arn],
            )
        )

    def check_on_schedule(
        self, scope: Construct, fn: lambda_.IFunction, topic: sns.ITopic
    ) -> cloudwatch.Alarm:
        """Run `fn` (verify_audit) every CHECK_EVERY; alarm on the topic when it finds a broken
        chain (its gauge above 0)."""
        rule = events.Rule(
            scope,
            "AuditCheckSchedule",
            description="Check every audit chain against the audit anchor",
            schedule=events.Schedule.rate(CHECK_EVERY),
        )
        rule.add_target(targets.LambdaFunction(fn, retry_attempts=2))
        broken = cloudwatch.Metric(
            namespace=PIPELINE_NAMESPACE,
            metric_name=M.AUDIT_CHAINS_BROKEN.value,
            dimensions_map={SERVICE_DIMENSION: SERVICE_NAME},
            statistic="Maximum",
            period=CHECK_EVERY,
        )
        alarm = cloudwatch.Alarm(
            scope,
            "AuditChainsBrokenAlarm",
            alarm_name=f"{self.props.stack_name}-{BROKEN_CHAINS_ALARM}",
            alarm_description=BROKEN_CHAINS_WHAT_TO_DO,
            metric=broken,
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        alarm.add_alarm_action(cw_actions.SnsAction(topic))
        return alarm
