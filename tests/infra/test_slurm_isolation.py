"""Slurm clusters in the stack: `sdc:slurmControllers` checked early, and the functions that
isolate or release nodes may run AWS-RunShellScript on those controllers only."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sdc_remediation.infra.stack.functions import SPECS
from sdc_remediation.infra.stack.settings import DeploymentSettings, SettingsError
from sdc_remediation.infra.stack.synth import synthesize_once
from sdc_remediation.infra.stack.template import ACCOUNT, REGION
from tests.infra.conftest import CLUSTER_ID
from tests.infra.template_tools import actions, resolved, statements_of_function

CONTROLLER = "i-0c0000000000000c1"
SLURM_CONTEXT: dict[str, Any] = {
    "sdc:clusters": {"ml-slurm-1": CLUSTER_ID, "ml-cluster-1": "ab12cd34ef56"},
    "sdc:slurmControllers": {"ml-slurm-1": CONTROLLER},
    "sdc:nodeIsolation": {"ml-cluster-1": "ml-eks-1"},
}
NODE_FUNCTIONS = {s.logical_id for s in SPECS if s.kubernetes}

pytestmark = pytest.mark.synth


@pytest.fixture(scope="module")
def slurm_template(lambda_asset) -> dict[str, Any]:
    synthesized = synthesize_once(SLURM_CONTEXT, code_asset=lambda_asset)
    assert synthesized.nag_findings == []
    return synthesized.template


def _ssm_statements(template: dict[str, Any], function_id: str) -> list[dict[str, Any]]:
    return [
        s
        for s in statements_of_function(template, function_id)
        if any(a.startswith("ssm:") and a != "ssm:GetParameter" for a in actions(s))
    ]


def test_send_command_is_the_run_shell_document_to_the_configured_controllers_only(slurm_template):
    for function_id in NODE_FUNCTIONS:
        (send,) = [
            s
            for s in _ssm_statements(slurm_template, function_id)
            if "ssm:SendCommand" in actions(s)
        ]
        resources = set(resolved(slurm_template, send["Resource"]))
        assert resources == {
            f"arn:aws:ssm:{REGION}::document/AWS-RunShellScript",
            f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/{CONTROLLER}",
        }, function_id


def test_only_the_functions_that_isolate_or_release_may_send_commands(slurm_template):
    senders = {
        s.logical_id
        for s in SPECS
        if any(
            "ssm:SendCommand" in actions(x) for x in _ssm_statements(slurm_template, s.logical_id)
        )
    }
    assert (
        senders
        == NODE_FUNCTIONS
        == {
            "IsolateNodeFunction",
            "CloseIncidentFunction",
            "ReconcileFunction",
        }
    )


def test_the_functions_are_told_the_controller_in_node_isolation(slurm_template):
    env = slurm_template["Resources"]["IsolateNodeFunction"]["Properties"]["Environment"]
    isolation = json.loads(env["Variables"]["NODE_ISOLATION"])
    assert isolation["ml-slurm-1"] == {"isolate": True, "slurm_controller": CONTROLLER}
    assert isolation["ml-cluster-1"]["eks_cluster"] == "ml-eks-1"


def test_without_slurm_controllers_no_function_may_send_commands(template):
    for function_id in NODE_FUNCTIONS:
        assert _ssm_statements(template, function_id) == []


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"sdc:slurmControllers": {"ml-slurm-1": "controller-1"}}, "not an instance id"),
        ({"sdc:slurmControllers": {"ml-other": CONTROLLER}}, "not in sdc:clusters"),
        (
            {"sdc:nodeIsolation": {"ml-slurm-1": "ml-eks-1"}},
            "a cluster has one orchestrator",
        ),
    ],
    ids=["bad-instance-id", "unknown-cluster", "both-orchestrators"],
)
def test_a_bad_slurm_controller_setting_is_refused_naming_the_key(changes, message):
    with pytest.raises(SettingsError, match=message):
        DeploymentSettings.from_context({**SLURM_CONTEXT, **changes})
