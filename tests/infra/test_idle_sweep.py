"""Idle sweeps in the stack (`sdc:idleSweep`): off by default; when on, one schedule per swept
cluster invoking the sweep function with that cluster's request, and the function's grants
scoped to the swept clusters (and their Slurm controllers)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sdc_remediation.infra.stack.functions import SWEEP
from sdc_remediation.infra.stack.settings import DeploymentSettings as Settings
from sdc_remediation.infra.stack.settings import SettingsError
from sdc_remediation.infra.stack.synth import synthesize_once
from sdc_remediation.infra.stack.template import ACCOUNT, REGION
from sdc_remediation.lambdas.models.sweep import parse_sweep_request
from tests.infra.conftest import CLUSTER_ARN, CLUSTER_ID
from tests.infra.template_tools import actions, resolved, statements_of_function

CONTROLLER = "i-0c0000000000000c1"
OTHER = "cd34ef56ab12"
SWEEP_CONTEXT: dict[str, Any] = {
    "sdc:clusters": {
        "ml-cluster-1": CLUSTER_ARN,
        "ml-slurm-1": CLUSTER_ID,
        "ml-cluster-3": OTHER,
    },
    "sdc:nodeIsolation": {"ml-cluster-1": "ml-eks-1"},
    "sdc:slurmControllers": {"ml-slurm-1": CONTROLLER},
    "sdc:idleSweep": {
        "clusters": ["ml-cluster-1", "ml-slurm-1"],
        "everyMinutes": 120,
        "batchSize": 3,
        "maxSharePercent": 50,
        "minIdleNodes": 1,
    },
}

pytestmark = pytest.mark.synth


@pytest.fixture(scope="module")
def sweep_template(lambda_asset) -> dict[str, Any]:
    synthesized = synthesize_once(SWEEP_CONTEXT, code_asset=lambda_asset)
    assert synthesized.nag_findings == []
    return synthesized.template


def schedules(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Scheduler::Schedule"
    ]


def test_no_sweep_schedule_or_function_by_default(template):
    assert schedules(template) == []
    assert SWEEP.logical_id not in template["Resources"]


def test_each_swept_cluster_gets_a_schedule_at_the_set_rate(sweep_template):
    found = {
        json.loads(s["Target"]["Input"])["cluster_name"]: s["ScheduleExpression"]
        for s in schedules(sweep_template)
    }
    assert found == {"ml-cluster-1": "rate(120 minutes)", "ml-slurm-1": "rate(120 minutes)"}


def test_a_schedule_invokes_the_sweep_function_with_a_request_it_accepts(sweep_template):
    for schedule in schedules(sweep_template):
        target = schedule["Target"]
        assert resolved(sweep_template, target["Arn"]) == resolved(
            sweep_template, {"Fn::GetAtt": [SWEEP.logical_id, "Arn"]}
        )
        request = parse_sweep_request(json.loads(target["Input"]))
        assert (request.batch_size, request.max_share_percent, request.min_idle_nodes) == (3, 50, 1)


def test_the_scheduler_role_may_invoke_the_sweep_function_only(sweep_template):
    roles = [
        r
        for r in sweep_template["Resources"].values()
        if r["Type"] == "AWS::IAM::Role"
        and "scheduler.amazonaws.com" in json.dumps(r["Properties"]["AssumeRolePolicyDocument"])
    ]
    assert len(roles) == 1
    policies = [
        s
        for r in sweep_template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
        and "SchedulerRole" in json.dumps(r["Properties"]["Roles"])
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert [actions(s) for s in policies] == [{"lambda:InvokeFunction"}]
    assert resolved(sweep_template, policies[0]["Resource"]) == resolved(
        sweep_template, {"Fn::GetAtt": [SWEEP.logical_id, "Arn"]}
    )


def test_the_sweep_may_health_check_only_the_swept_clusters(sweep_template):
    (hyperpod,) = [
        s
        for s in statements_of_function(sweep_template, SWEEP.logical_id)
        if any(a.startswith("sagemaker:") for a in actions(s))
    ]
    assert "sagemaker:StartClusterHealthCheck" in actions(hyperpod)
    assert set(resolved(sweep_template, hyperpod["Resource"])) == {
        CLUSTER_ARN,
        f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/{CLUSTER_ID}",
    }


def test_the_sweep_sends_commands_only_to_the_swept_clusters_controllers(sweep_template):
    (send,) = [
        s
        for s in statements_of_function(sweep_template, SWEEP.logical_id)
        if "ssm:SendCommand" in actions(s)
    ]
    assert set(resolved(sweep_template, send["Resource"])) == {
        f"arn:aws:ssm:{REGION}::document/AWS-RunShellScript",
        f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/{CONTROLLER}",
    }


def test_one_sweep_runs_at_a_time(sweep_template):
    function = sweep_template["Resources"][SWEEP.logical_id]["Properties"]
    assert function["ReservedConcurrentExecutions"] == 1


def test_a_swept_cluster_outside_sdc_clusters_is_refused():
    with pytest.raises(SettingsError, match="not in sdc:clusters"):
        Settings.from_context({**SWEEP_CONTEXT, "sdc:idleSweep": {"clusters": ["ml-cluster-9"]}})


def test_a_swept_cluster_whose_orchestrator_the_pipeline_does_not_reach_is_refused():
    with pytest.raises(SettingsError, match="neither sdc:slurmControllers nor sdc:nodeIsolation"):
        Settings.from_context({**SWEEP_CONTEXT, "sdc:idleSweep": {"clusters": ["ml-cluster-3"]}})


def test_a_sweep_share_out_of_range_is_refused():
    with pytest.raises(SettingsError, match="maxSharePercent"):
        Settings.from_context(
            {
                **SWEEP_CONTEXT,
                "sdc:idleSweep": {"clusters": ["ml-slurm-1"], "maxSharePercent": 0},
            }
        )


def test_cfn_lint_reports_nothing_on_the_template_with_sweeps(sweep_template):
    import cfnlint.api

    matches = cfnlint.api.lint(json.dumps(sweep_template), regions=["us-east-1", "us-west-2"])

    assert [str(m) for m in matches] == []
