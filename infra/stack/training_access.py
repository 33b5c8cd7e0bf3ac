"""The managed policy a training job's role needs for the emitter, and nothing more."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from constructs import Construct

from sdc_remediation.infra.stack.nag import acknowledge
from trainer_emitter.contract import REPORT_SOURCE


@dataclass(frozen=True)
class TrainingAccessProps:
    namespace: str
    """The SDC metrics' CloudWatch namespace (`sdc:namespace`): the only one it may put into."""


class TrainingAccess(Construct):
    """`cloudwatch:PutMetricData` into the SDC namespace only, and `events:PutEvents` of
    `sdc.trainer` events onto the default bus only. Attach it to the training roles (for
    HyperPod EKS: the pods' IRSA / Pod Identity role)."""

    def __init__(self, scope: Construct, construct_id: str, *, props: TrainingAccessProps) -> None:
        super().__init__(scope, construct_id)
        default_bus = f"arn:{Aws.PARTITION}:events:{Aws.REGION}:{Aws.ACCOUNT_ID}:event-bus/default"
        self.policy = iam.ManagedPolicy(
            self,
            "EmitterPolicy",
            description="What the SDC trainer emitter needs: SDC metrics and SDC Report events",
            statements=[
                iam.PolicyStatement(
                    sid="PutSdcMetrics",
                    actions=["cloudwatch:PutMetricData"],
                    resources=["*"],
                    conditions={"StringEquals": {"cloudwatch:namespace": props.namespace}},
                ),
                iam.PolicyStatement(
                    sid="PutSdcReports",
                    actions=["events:PutEvents"],
                    resources=[default_bus],
                    conditions={"StringEquals": {"events:source": REPORT_SOURCE}},
                ),
            ],
        )
        acknowledge(
            self.policy,
            "AwsSolutions-IAM5[Resource::*]",
            "cloudwatch:PutMetricData supports no resource-level permissions, so "
            "its resource is '*'; the statement is limited to the SDC namespace by the "
            "cloudwatch:namespace condition.",
        )
