"""Synthesize once and share the template.

Building the Lambda asset (pip, warm cache: a few seconds the first time, a hash check after)
and an in-process synth (~10 s, the jsii/Node round trips) are the slow parts, so each context
is synthesized once and kept until its inputs change (`sdc_remediation.infra.stack.synth.synthesize_once`), and the
tests share two of them: `template` with clusters, e-mail and a two-hour approval timeout, and
`variant_template` with a prefix, another namespace, dry-run, no clusters and short waits
(the one the moto executions run)."""

from __future__ import annotations

from typing import Any

import pytest

from sdc_remediation.infra.stack.asset import LambdaAsset, build_lambda_asset
from sdc_remediation.infra.stack.synth import Synthesized, synthesize_once

CLUSTER_ARN = "arn:aws:sagemaker:us-west-2:111122223333:cluster/ab12cd34ef56"
CLUSTER_ID = "0123456789ab"
WORKSPACE_ARN = (
    "arn:aws:aps:us-west-2:111122223333:workspace/ws-0fc3b6e2-7d41-4a9b-8c55-2e1f0a9d3b77"
)
WORKSPACE_ID = "ws-9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d"
DASHBOARD = "https://g-1a2b3c4d5e.grafana-workspace.us-west-2.amazonaws.com/d/gpu-health"

CONTEXT: dict[str, Any] = {
    "sdc:clusters": {"ml-cluster-1": CLUSTER_ARN, "ml-cluster-2": CLUSTER_ID},
    "sdc:approvalTimeoutSeconds": 7200,
    "sdc:notificationEmail": "oncall@example.com",
    "sdc:logRetentionDays": 30,
    "sdc:nodeIsolation": {"ml-cluster-1": "ml-eks-1"},
    "sdc:telemetry": {
        "ml-cluster-1": {"workspace": WORKSPACE_ARN, "dashboard": DASHBOARD},
        "ml-cluster-2": {"workspace": WORKSPACE_ID, "dashboard": None, "nodeLabel": "node"},
    },
}

VARIANT_CONTEXT: dict[str, Any] = {
    "sdc:stackName": "SdcTest",
    "sdc:alarmNamePrefix": "prod",
    "sdc:namespace": "ML/SDC",
    "sdc:dryRun": True,
    "sdc:healthChecks": ["InstanceStress", "MultiNodeTrainingValidation"],
    "sdc:approvalTimeoutSeconds": 2,
    "sdc:healthCheckPollSeconds": 1,
    "sdc:healthCheckMaxPolls": 3,
    "sdc:replacementPollSeconds": 1,
    "sdc:replacementMaxPolls": 2,
    "sdc:replaceRetrySeconds": 1,
    "sdc:replaceMaxRetries": 1,
}


@pytest.fixture(scope="session")
def lambda_asset() -> LambdaAsset:
    return build_lambda_asset()


@pytest.fixture(scope="session")
def synthesized(lambda_asset: LambdaAsset) -> Synthesized:
    return synthesize_once(CONTEXT, code_asset=lambda_asset)


@pytest.fixture(scope="session")
def template(synthesized: Synthesized) -> dict[str, Any]:
    return synthesized.template


@pytest.fixture(scope="session")
def variant_synthesized(lambda_asset: LambdaAsset) -> Synthesized:
    return synthesize_once(VARIANT_CONTEXT, code_asset=lambda_asset)


@pytest.fixture(scope="session")
def variant_template(variant_synthesized: Synthesized) -> dict[str, Any]:
    return variant_synthesized.template
