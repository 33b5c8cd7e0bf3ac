"""The audit anchor: a CloudWatch Logs group every stored audit entry's hash is appended to.

The audit table's hash chain proves order, not authenticity: whoever may PutItem on it can
rewrite an entry and recompute the chain. The functions may only create log streams in this
group and put log events into them: no DeleteLogStream, DeleteLogGroup, PutRetentionPolicy or
DeleteRetentionPolicy is granted to them, so what they anchored stays as written, and
`sdc audit verify` checks every chain against it. The group is kept for ten years and retained
when the stack is deleted.
"""

from __future__ import annotations

from typing import Final

from aws_cdk import RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.nag import acknowledge, acknowledge_checkov
from infra.settings import Settings

APPEND_ACTIONS: Final = ("logs:CreateLogStream", "logs:PutLogEvents")
READ_ACTIONS: Final = ("logs:FilterLogEvents",)
LOGICAL_ID: Final = "AuditAnchorLogGroup"


def anchor_log_group_name(settings: Settings) -> str:
    return f"/{settings.stack_name}/audit-anchor"


class AuditAnchorLog(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(
            self,
            "LogGroup",
            log_group_name=anchor_log_group_name(settings),
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
