"""cdk-nag AwsSolutions and cfn-lint on the synthesized templates."""

from __future__ import annotations

import json
from typing import Any

import cfnlint.api
import pytest

pytestmark = pytest.mark.synth  # every test reads a template, some through getfixturevalue

ACKNOWLEDGED = {
    "AwsSolutions-IAM5[Resource::*]",
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:"
    "execution:SdcRemediation-remediation:*]",
    "AwsSolutions-IAM5[Resource::<AuditAnchorLogGroup.Arn>:log-stream:*]",
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:"
    "execution:SdcRemediation-approval:*]",
    "AwsSolutions-L1",
    "AwsSolutions-SQS3",
}
"""Every acknowledgment the stack makes; a new one must be added here on purpose."""


def _acknowledgments(template: dict[str, Any]) -> list[dict[str, str]]:
    return [
        rule
        for resource in template["Resources"].values()
        for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
    ]


@pytest.mark.parametrize("which", ["synthesized", "variant_synthesized"])
def test_cdk_nag_finds_nothing_unacknowledged(request, which):
    synthesized = request.getfixturevalue(which)

    assert synthesized.nag_findings == []


def test_every_acknowledgment_is_expected_and_reasoned(template):
    rules = _acknowledgments(template)

    assert {rule["id"] for rule in rules} == ACKNOWLEDGED
    for rule in rules:
        assert len(rule["reason"]) > 80, rule


@pytest.mark.parametrize("which", ["template", "variant_template"])
def test_cfn_lint_reports_nothing(request, which):
    template = request.getfixturevalue(which)

    matches = cfnlint.api.lint(json.dumps(template), regions=["us-east-1", "us-west-2"])

    assert [str(m) for m in matches] == []
