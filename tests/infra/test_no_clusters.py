"""An empty `sdc:clusters` refuses to deploy unless dry run or `sdc:acknowledgeNoClusters`: the
template carries a parameter and a CloudFormation rule that fails until it is acknowledged.
(CloudFormation evaluates the rule; here its shape is checked, and that it appears exactly when
the settings say so.)"""

from __future__ import annotations

from typing import Any

import pytest

from sdc_remediation.infra.stack.no_clusters import ACKNOWLEDGED, MESSAGE, PARAMETER, RULE
from sdc_remediation.infra.stack.settings import DeploymentSettings
from sdc_remediation.infra.stack.synth import synthesize_once


@pytest.mark.parametrize(
    ("context", "refused"),
    [
        ({}, True),
        ({"sdc:dryRun": True}, False),
        ({"sdc:acknowledgeNoClusters": True}, False),
        ({"sdc:acknowledgeNoClusters": "false"}, True),
        ({"sdc:clusters": {"ml-cluster-1": "ab12cd34ef56"}}, False),
    ],
)
def test_only_an_empty_unacknowledged_cluster_list_outside_dry_run_is_refused(context, refused):
    assert DeploymentSettings.from_context(context).refuses_to_deploy is refused


def test_a_bad_acknowledgement_value_names_the_key():
    from sdc_remediation.lambdas.models.errors import SettingsError

    with pytest.raises(SettingsError, match="sdc:acknowledgeNoClusters='maybe': expected true"):
        DeploymentSettings.from_context({"sdc:acknowledgeNoClusters": "maybe"})


@pytest.fixture(scope="module")
def default_template(lambda_asset) -> dict[str, Any]:
    """What `cdk.json`'s own context (no cluster) synthesizes."""
    return synthesize_once({}, code_asset=lambda_asset).template


def test_the_default_context_synthesizes_a_rule_that_refuses_the_deployment(default_template):
    # Then the rule holds only when the parameter says yes, and the parameter defaults to no
    rule = default_template["Rules"][RULE]
    (assertion,) = rule["Assertions"]
    assert assertion["Assert"] == {"Fn::Equals": [{"Ref": PARAMETER}, ACKNOWLEDGED]}
    assert assertion["AssertDescription"] == MESSAGE
    assert "RuleCondition" not in rule  # always applies
    parameter = default_template["Parameters"][PARAMETER]
    assert parameter["Default"] == "no" and parameter["AllowedValues"] == ["no", "yes"]
    # and the message names every way out
    for way_out in ("sdc:clusters", "sdc:dryRun=true", "sdc:acknowledgeNoClusters=true",
                    "--parameters AcknowledgeNoClusters=yes"):  # fmt: skip
        assert way_out in MESSAGE


def test_an_acknowledged_empty_cluster_list_deploys_without_the_rule(lambda_asset):
    template = synthesize_once(
        {"sdc:acknowledgeNoClusters": True}, code_asset=lambda_asset
    ).template

    assert RULE not in template.get("Rules", {})
    assert PARAMETER not in template.get("Parameters", {})


def test_neither_dry_run_nor_a_cluster_list_gets_the_rule(template, variant_template):
    # variant_template: dry run, no cluster; template: two clusters
    for synthesized in (template, variant_template):
        assert RULE not in synthesized.get("Rules", {})
        assert PARAMETER not in synthesized.get("Parameters", {})
