"""The outside validators of `make lint` (infra/stack/validate.py) on the synthesized templates: each
finds nothing unacknowledged, each can find something, and every acknowledgement is narrow,
reasoned and true."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import botocore.session
import pytest

from sdc_remediation.infra.stack.functions import ACTIONS_NEWER_THAN_IAM_LINT, ALL_FUNCTIONS, SPECS
from sdc_remediation.infra.stack.template import pipeline_functions, resources_of_type
from sdc_remediation.infra.stack.validate import (
    Finding,
    IamAcknowledgement,
    iam_acknowledgements,
    judge,
    policy_documents,
    run_asl_validator,
    run_checkov,
    run_parliament,
    validate,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def verdict(template, variant_template):
    """All three validators on a template with clusters and node isolation (`template`) and on
    one with no cluster (`variant_template`), as `make lint` runs them."""
    return validate({"clusters": template, "no-clusters": variant_template})


def test_no_validator_finds_anything_unacknowledged(verdict):
    assert [str(finding) for finding in verdict.findings] == []


def test_every_validator_judged_both_templates(verdict, template):
    # The acknowledged findings show that parliament and checkov did read both templates.
    judged = {(finding.validator, finding.template) for finding in verdict.acknowledged}
    grants = json.dumps(template)

    assert {("parliament", "clusters"), ("checkov", "clusters")} <= judged
    assert {("parliament", "no-clusters"), ("checkov", "no-clusters")} <= judged
    assert len(policy_documents(template)) >= len(SPECS) + 3
    assert "sagemaker:BatchReplaceClusterNodes" in grants and "eks:DescribeCluster" in grants


def test_the_acknowledgements_are_few_and_each_gives_a_reason(verdict):
    kinds = {(finding.validator, finding.code) for finding in verdict.acknowledged}

    assert kinds == {
        ("parliament", "RESOURCE_MISMATCH"),
        ("parliament", "UNKNOWN_ACTION"),
        ("parliament", "RESOURCE_STAR"),
        ("checkov", "CKV_AWS_115"),
        ("checkov", "CKV_AWS_116"),
        ("checkov", "CKV_AWS_117"),
        ("checkov", "CKV_AWS_119"),
        ("checkov", "CKV_AWS_158"),
        ("checkov", "CKV_AWS_173"),
        ("checkov", "CKV_AWS_27"),
    }
    for finding in verdict.acknowledged:
        assert len(finding.acknowledged or "") > 80, finding


def test_unknown_actions_are_acknowledged_only_for_operations_botocore_knows(verdict):
    sagemaker = botocore.session.get_session().get_service_model("sagemaker")
    unknown = {
        action
        for finding in verdict.acknowledged
        if finding.code == "UNKNOWN_ACTION"
        for action in finding.actions
    }

    assert unknown == set(ACTIONS_NEWER_THAN_IAM_LINT)
    for action in unknown:
        service, operation = action.split(":")
        assert service == "sagemaker"
        assert operation in sagemaker.operation_names, action


def test_the_functions_that_act_on_nodes_or_take_events_in_have_a_concurrency_cap_and_no_other_does(
    template,
):
    functions = pipeline_functions(template)
    capped = {
        logical_id: resource["Properties"].get("ReservedConcurrentExecutions")
        for logical_id, resource in functions.items()
    }

    assert capped == {
        spec.logical_id: (5 if spec.acts_on_nodes else 10 if spec.intake else None)
        for spec in ALL_FUNCTIONS
    }
    assert {spec.module for spec in SPECS if spec.intake} == {"store_report", "open_incident"}
    # Lambda keeps 100 of the account's concurrency unreserved; the default quota is 1000, and
    # docs/deploy.md promises a deploy wherever it is at least 150.
    assert sum(cap for cap in capped.values() if cap) + 100 <= 150
    assert {spec.module for spec in SPECS if spec.acts_on_nodes} == {
        "isolate_node",
        "start_health_check",
        "replace_node",
        "reconcile",
        "reboot_node",
        "close_incident",
    }


# -- each validator can find something ---------------------------------------------------------


def test_asl_validator_reports_a_definition_that_breaks_the_language(template, tmp_path):
    broken = copy.deepcopy(template)
    machine = resources_of_type(broken, "AWS::StepFunctions::StateMachine")
    logical_id = next(iter(machine))
    definition = broken["Resources"][logical_id]["Properties"]
    definition["DefinitionString"] = json.dumps(
        {"StartAt": "Nowhere", "States": {"Done": {"Type": "Succeed", "Next": "Done"}}}
    )

    findings = run_asl_validator("broken", broken, tmp_path)

    assert [(f.validator, f.where, f.code) for f in findings] == [
        ("asl-validator", logical_id, "invalid")
    ]


def test_parliament_reports_an_unknown_action_and_a_resource_of_the_wrong_type(tmp_path):
    template = _with_policy(
        [
            {"Effect": "Allow", "Action": "dynamodb:PutItems", "Resource": "*"},
            {
                "Effect": "Allow",
                "Action": "sns:Publish",
                "Resource": "arn:aws:dynamodb:us-west-2:123456789012:table/t",
            },
        ]
    )

    findings = run_parliament("made", template, tmp_path)

    codes = {(f.code, f.actions) for f in findings}
    assert ("UNKNOWN_ACTION", ("dynamodb:PutItems",)) in codes
    assert ("RESOURCE_MISMATCH", ("sns:Publish",)) in codes


def test_parliament_reports_a_condition_key_the_action_does_not_support(tmp_path):
    template = _with_policy(
        [
            {
                "Effect": "Allow",
                "Action": "sns:Publish",
                "Resource": "arn:aws:sns:us-west-2:123456789012:topic",
                "Condition": {"StringEquals": {"dynamodb:LeadingKeys": "x"}},
            }
        ]
    )

    findings = run_parliament("made", template, tmp_path)

    assert "UNKNOWN_CONDITION_FOR_ACTION" in {f.code for f in findings}


def test_checkov_reports_a_function_whose_acknowledgement_is_removed(template, tmp_path):
    stripped = copy.deepcopy(template)
    function = stripped["Resources"]["DecideFunction"]
    function["Metadata"].pop("checkov")

    findings = [f for f in run_checkov("stripped", stripped, tmp_path) if f.acknowledged is None]

    assert {(f.where, f.code) for f in findings} == {
        ("DecideFunction", "CKV_AWS_115"),
        ("DecideFunction", "CKV_AWS_116"),
        ("DecideFunction", "CKV_AWS_117"),
        ("DecideFunction", "CKV_AWS_173"),
    }


# -- acknowledgements stay narrow ---------------------------------------------------------------


def test_an_iam_acknowledgement_covers_only_its_actions_on_its_policy():
    ack = IamAcknowledgement("Policy", "UNKNOWN_ACTION", frozenset({"sagemaker:Foo"}), "why")

    def finding(where: str, code: str, *actions: str) -> Finding:
        return Finding("parliament", "t", where, code, "", actions)

    assert ack.covers(finding("Policy", "UNKNOWN_ACTION", "sagemaker:Foo"))
    assert not ack.covers(finding("Policy", "UNKNOWN_ACTION", "sagemaker:Foo", "sagemaker:Bar"))
    assert not ack.covers(finding("Other", "UNKNOWN_ACTION", "sagemaker:Foo"))
    assert not ack.covers(finding("Policy", "RESOURCE_MISMATCH", "sagemaker:Foo"))
    assert not ack.covers(finding("Policy", "UNKNOWN_ACTION"))


def test_a_new_unknown_action_in_an_acknowledged_policy_is_still_a_finding(template):
    policy = next(
        ack.logical_id for ack in iam_acknowledgements(template) if ack.issue == "UNKNOWN_ACTION"
    )
    typo = Finding("parliament", "t", policy, "UNKNOWN_ACTION", "", ("sagemaker:DescribeClustr",))

    verdict = judge(template, [typo])

    assert verdict.findings == [typo]


def test_a_missing_validator_fails_loudly_instead_of_passing(monkeypatch, template):
    import sdc_remediation.infra.stack.validate

    monkeypatch.setattr(
        sdc_remediation.infra.stack.validate, "CHECKOV", Path("/nonexistent/checkov")
    )

    with pytest.raises(sdc_remediation.infra.stack.validate.ToolFailed, match="not installed"):
        validate({"clusters": template}, ["checkov"])


def _with_policy(statements: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "Resources": {
            "MadePolicy": {
                "Type": "AWS::IAM::Policy",
                "Properties": {
                    "PolicyDocument": {"Version": "2012-10-17", "Statement": statements},
                    "PolicyName": "made",
                },
            }
        }
    }
