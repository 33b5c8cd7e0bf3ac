"""A team's own CDK app, as a platform engineer would write it: a stack of its own (a queue
and a topic of the team's, left as the team made them), and the pipeline as a construct in
another stack of the app, configured by typed props."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import App, Stack
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs

from sdc_remediation.infra.construct import SdcRemediation, SdcRemediationProps
from sdc_remediation.infra.stack.asset import LambdaAsset

TEAM_STACK = "TeamTraining"
PLATFORM_STACK = "MlPlatform"
CLUSTER_ID = "ab12cd34ef56"


def team_app(outdir: Path, code_asset: LambdaAsset, *, inside: bool = False) -> App:
    """The app; with `inside`, a queue that breaks the AwsSolutions rules is put inside the
    pipeline's construct, where its checks must find it."""
    app = App(outdir=str(outdir), context={"aws:cdk:disable-asset-staging": True})
    team = Stack(app, TEAM_STACK)
    sqs.Queue(team, "Jobs")  # no DLQ, no TLS-only policy: the team's, not checked by the pipeline
    sns.Topic(team, "Announcements")
    platform = Stack(app, PLATFORM_STACK)
    pipeline = SdcRemediation(
        platform,
        "Sdc",
        props=SdcRemediationProps(
            stack_name="MlPlatformSdc",
            clusters={"ml-cluster-1": CLUSTER_ID},
            approval_timeout_seconds=7200,
            approver_time_zone="Europe/Berlin",
            health_checks=("InstanceStress",),
            dry_run=True,
            code_asset=code_asset,
        ),
    )
    if inside:
        sqs.Queue(pipeline, "Unchecked")
    return app
