"""The pipeline as a construct library (#36): `SdcRemediation` in a team's own app, beside a
stack of the team's; cdk-nag's checks applied by the construct to its own tree; typed props
checked as the `sdc:*` context keys are, with the same messages."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack

from sdc_remediation.infra.cli import deployment
from sdc_remediation.infra.construct import CONTEXT_FIELDS, SdcRemediation, SdcRemediationProps
from sdc_remediation.infra.stack.settings import CONTEXT_KEYS, DeploymentSettings
from sdc_remediation.lambdas.models.errors import SettingsError
from tests.infra.team_app import PLATFORM_STACK, TEAM_STACK, team_app
from tests.infra.template_tools import deploy_outputs, resolved


def test_every_context_key_is_a_props_field():
    fields = {f.name for f in dataclasses.fields(SdcRemediationProps)} - {"code_asset"}

    assert set(CONTEXT_FIELDS) == set(CONTEXT_KEYS)
    assert set(CONTEXT_FIELDS.values()) == fields


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("sdc:approvalTimeoutSeconds", 0),
        ("sdc:approverTimeZone", "Mars/Olympus_Mons"),
        ("sdc:clusters", {"bad_name": "ab12cd34ef56"}),
        ("sdc:healthChecks", ["InstanceStress", "Nope"]),
        ("sdc:logRetentionDays", 10),
        ("sdc:approvers", ["arn:aws:iam::123456789012:user/a,b"]),
        ("sdc:nodeIsolation", {"ml-cluster-1": "ml-eks-1"}),  # not in sdc:clusters: a total
    ],
)
def test_a_bad_props_value_is_refused_with_the_context_keys_own_message(key, value):
    with pytest.raises(SettingsError) as from_context:
        DeploymentSettings.from_context({key: value})

    with pytest.raises(SettingsError) as from_props:
        SdcRemediationProps(**{CONTEXT_FIELDS[key]: value})

    assert str(from_props.value) == str(from_context.value)


def test_props_given_as_python_sequences_mean_what_the_context_lists_mean():
    props = SdcRemediationProps(
        clusters={"ml-cluster-1": "ab12cd34ef56"},
        health_checks=("InstanceStress",),
        approvers=("arn:aws:iam::123456789012:role/Oncall*",),
    )

    assert props.settings == DeploymentSettings.from_context(
        {
            "sdc:clusters": {"ml-cluster-1": "ab12cd34ef56"},
            "sdc:healthChecks": ["InstanceStress"],
            "sdc:approvers": ["arn:aws:iam::123456789012:role/Oncall*"],
        }
    )
    assert SdcRemediationProps().settings == DeploymentSettings()


def test_the_app_context_gives_the_props_and_an_unknown_key_is_still_refused():
    props = SdcRemediationProps.from_context(
        {"sdc:dryRun": "true", "sdc:notificationEmail": None, "@aws-cdk/core:flag": True}
    )

    assert props.dry_run == "true" and props.settings.dry_run is True
    with pytest.raises(SettingsError, match="unknown context key"):
        SdcRemediationProps.from_context({"sdc:approvalTimeout": 60})


def _synth(outdir: Path, asset: Any, *, inside: bool = False) -> dict[str, Any]:
    assembly = team_app(outdir, asset, inside=inside).synth()
    return {stack.stack_name: stack.template for stack in assembly.stacks}


def _report(outdir: Path) -> dict[str, Any]:
    path = outdir / "validation-report.json"
    return json.loads(path.read_text()) if path.is_file() else {"pluginReports": []}


@pytest.mark.synth
def test_a_team_app_with_the_construct_beside_its_own_stack_synthesizes_nag_clean(
    tmp_path, lambda_asset
):
    templates = _synth(tmp_path, lambda_asset)

    assert set(templates) == {TEAM_STACK, PLATFORM_STACK}
    violations = [v for r in _report(tmp_path)["pluginReports"] for v in r["violations"]]
    assert violations == []  # the team's queue breaks two rules: not the pipeline's to check
    resources = templates[PLATFORM_STACK]["Resources"].values()
    functions = [r for r in resources if r["Type"] == "AWS::Lambda::Function"]
    machines = [r for r in resources if r["Type"] == "AWS::StepFunctions::StateMachine"]
    assert len(functions) >= 13 and len(machines) == 2
    names = {json.dumps(m["Properties"].get("StateMachineName")) for m in machines}
    assert names == {'"MlPlatformSdc-remediation"', '"MlPlatformSdc-approval"'}
    env = functions[0]["Properties"]["Environment"]["Variables"]
    assert (env["APPROVER_TIME_ZONE"], env["DRY_RUN"]) == ("Europe/Berlin", "true")
    acknowledged = [
        r for r in resources if "rules_to_suppress" in json.dumps(r.get("Metadata", {}))
    ]
    assert acknowledged  # the construct's acknowledgments travel with its resources
    team = templates[TEAM_STACK]["Resources"].values()
    assert {r["Type"] for r in team} == {"AWS::SQS::Queue", "AWS::SNS::Topic"}


@pytest.mark.synth
def test_the_construct_checks_what_is_put_inside_it(tmp_path, lambda_asset):
    with pytest.raises(RuntimeError, match="ValidationFailed: ERROR The SQS queue"):
        _synth(tmp_path, lambda_asset, inside=True)

    found = {
        (v["ruleName"], c["constructPath"])
        for r in _report(tmp_path)["pluginReports"]
        for v in r["violations"]
        for c in v["violatingConstructs"]
    }
    assert ("AwsSolutions-SQS3", f"{PLATFORM_STACK}/Sdc/Unchecked/Resource") in found
    assert not [path for _, path in found if path.startswith(TEAM_STACK)]


def _platform(app: App, stack: str, asset: Any) -> Stack:
    platform = Stack(app, stack)
    props = SdcRemediationProps(stack_name=f"{stack}Sdc", dry_run=True, code_asset=asset)
    SdcRemediation(platform, "Sdc", props=props)
    return platform


@pytest.mark.synth
def test_a_second_construct_in_one_stack_is_refused_in_one_line(tmp_path, lambda_asset):
    # Given a stack that already holds the construct
    app = App(outdir=str(tmp_path))
    platform = _platform(app, PLATFORM_STACK, lambda_asset)

    # When a second is put into the same stack
    with pytest.raises(SettingsError) as refused:
        SdcRemediation(platform, "Again", props=SdcRemediationProps(code_asset=lambda_asset))

    # Then it is refused before the CDK sees a clash, in one line naming both
    assert str(refused.value).splitlines() == [
        f"stack {PLATFORM_STACK} already holds the SdcRemediation construct "
        f"{PLATFORM_STACK}/Sdc: one stack holds one; put {PLATFORM_STACK}/Again in a stack of "
        "its own"
    ]


@pytest.mark.synth
def test_each_construct_of_an_app_is_found_by_its_stacks_name(tmp_path, lambda_asset):
    # Given an app with the construct in two stacks and the outputs file a deploy writes for it
    app = App(outdir=str(tmp_path), context={"aws:cdk:disable-asset-staging": True})
    for stack in ("PlatformA", "PlatformB"):
        _platform(app, stack, lambda_asset)
    templates = {s.stack_name: s.template for s in app.synth().stacks}
    written = tmp_path / "cdk-outputs.json"
    written.write_text(json.dumps({name: deploy_outputs(t) for name, t in templates.items()}))

    # When each is looked up by its stack's name
    found = {name: deployment.from_file(written, name) for name in templates}

    # Then each gives its own tables and state machines; the keys CDK hashed are not needed
    for name, template in templates.items():
        outputs = template["Outputs"]
        assert "IncidentsTableName" not in outputs  # hashed: SdcIncidentsTableName<hash>
        assert found[name].incidents_table == resolved(
            template,
            next(o for k, o in outputs.items() if k.startswith("SdcIncidentsTable"))["Value"],
        )
        assert found[name].approval_state_machine_arn.endswith(f":{name}Sdc-approval")
    with pytest.raises(deployment.DeploymentError, match="pick one with --stack NAME"):
        deployment.from_file(written)
