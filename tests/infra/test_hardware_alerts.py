"""The hardware alerts of the synthesized stack: per telemetry cluster a rule groups namespace in
its workspace and the workspace's alert manager definition, routing to the stack's hardware
alert topic, which only the Prometheus service may publish to, for those workspaces only. The
definition, as deployed, passes `amtool check-config` (Debian's prometheus-alertmanager)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from sdc_remediation.infra.stack.alert_manager import CLUSTER_ATTRIBUTE, TEMPLATE_FILE
from sdc_remediation.infra.stack.alert_rules import Thresholds, rules_yaml
from sdc_remediation.infra.stack.hardware_alerts import (
    DEFINITION_ACTIONS,
    TOPIC_LOGICAL_ID,
    namespace_name,
)
from sdc_remediation.infra.stack.template import ACCOUNT, REGION, Resolver, resources_of_type
from tests.infra.conftest import WORKSPACE_ARN, WORKSPACE_ID

pytestmark = pytest.mark.synth

AMTOOL_HINT = (
    "amtool is missing: install Debian's prometheus-alertmanager package as root "
    "(`apt-get install -y prometheus-alertmanager`; `make test` does it)"
)
WORKSPACES = {
    "ml-cluster-1": WORKSPACE_ARN,
    "ml-cluster-2": f"arn:aws:aps:{REGION}:{ACCOUNT}:workspace/{WORKSPACE_ID}",
}
TOPIC_ARN = f"arn:aws:sns:{REGION}:{ACCOUNT}:SdcRemediation-HardwareAlertTopic"


def resolver(template: dict[str, Any]) -> Resolver:
    return Resolver.of_arns(template, {TOPIC_LOGICAL_ID: TOPIC_ARN})


def namespaces(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    resolve = resolver(template)
    found = {}
    for resource in resources_of_type(template, "AWS::APS::RuleGroupsNamespace").values():
        props = resolve(resource["Properties"])
        cluster = yaml.safe_load(props["Data"])["groups"][0]["rules"][0]["labels"]["cluster"]
        found[cluster] = props
    return found


def definition_calls(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Cluster → {"Create"|"Update"|"Delete": the SDK call} of each alert manager definition."""
    resolve = resolver(template)
    found = {}
    for resource in resources_of_type(template, "Custom::AlertManagerDefinition").values():
        calls = {k: json.loads(resolve(resource["Properties"][k])) for k in ("Create", "Update")}
        calls["Delete"] = json.loads(resolve(resource["Properties"]["Delete"]))
        config = yaml.safe_load(
            yaml.safe_load(calls["Create"]["parameters"]["data"])["alertmanager_config"]
        )
        sns_config = config["receivers"][0]["sns_configs"][0]
        found[sns_config["attributes"][CLUSTER_ATTRIBUTE]] = calls
    return found


def test_each_telemetry_cluster_gets_the_rules_in_its_own_workspace(template):
    found = namespaces(template)

    assert set(found) == set(WORKSPACES)
    for cluster, props in found.items():
        assert props["Workspace"] == WORKSPACES[cluster]
        assert props["Name"] == namespace_name("SdcRemediation")
    assert found["ml-cluster-1"]["Data"] == rules_yaml("ml-cluster-1", thresholds=Thresholds())
    # ml-cluster-2's series name the node in the label its nodeLabel gives
    assert found["ml-cluster-2"]["Data"] == rules_yaml("ml-cluster-2", node_label="node")


def test_each_workspace_gets_an_alert_manager_definition_routing_to_the_topic(template):
    calls = definition_calls(template)

    assert set(calls) == set(WORKSPACES)
    for cluster, by_event in calls.items():
        workspace_id = WORKSPACES[cluster].rsplit("/", 1)[1]
        assert by_event["Create"]["action"] == "CreateAlertManagerDefinition"
        assert by_event["Update"]["action"] == "PutAlertManagerDefinition"
        assert by_event["Delete"]["action"] == "DeleteAlertManagerDefinition"
        assert {c["service"] for c in by_event.values()} == {"amp"}
        assert {c["parameters"]["workspaceId"] for c in by_event.values()} == {workspace_id}
        data = yaml.safe_load(by_event["Create"]["parameters"]["data"])
        sns_config = yaml.safe_load(data["alertmanager_config"])["receivers"][0]["sns_configs"][0]
        assert sns_config["topic_arn"] == TOPIC_ARN
        assert sns_config["sigv4"] == {"region": REGION}


def test_the_definitions_may_change_only_the_configured_workspaces(template):
    statements = [
        statement
        for logical_id, policy in resources_of_type(template, "AWS::IAM::Policy").items()
        if logical_id.startswith("HardwareAlertsAlertManager")
        for statement in resolver(template)(policy["Properties"]["PolicyDocument"])["Statement"]
    ]

    assert sorted(s["Resource"] for s in statements) == sorted(WORKSPACES.values())
    for statement in statements:
        assert sorted(statement["Action"]) == sorted(DEFINITION_ACTIONS)


def test_only_the_prometheus_service_publishes_to_the_topic_for_those_workspaces(template):
    policy = next(
        resolver(template)(p["Properties"]["PolicyDocument"])
        for p in resources_of_type(template, "AWS::SNS::TopicPolicy").values()
        if p["Properties"]["Topics"] == [{"Ref": TOPIC_LOGICAL_ID}]
    )
    allows = [s for s in policy["Statement"] if s["Effect"] == "Allow"]

    assert len(allows) == 1
    (allow,) = allows
    assert allow["Principal"] == {"Service": "aps.amazonaws.com"}
    assert "sns:Publish" in allow["Action"]
    assert sorted(allow["Condition"]["ArnEquals"]["aws:SourceArn"]) == sorted(WORKSPACES.values())
    assert allow["Condition"]["StringEquals"]["aws:SourceAccount"] == ACCOUNT


def _matches(operator: str, values: dict[str, Any], context: dict[str, str]) -> bool:
    """One IAM condition operator over the request context (a missing key matches a negated
    operator, never a positive one)."""
    negated = "Not" in operator
    for key, wanted in values.items():
        wanted = wanted if isinstance(wanted, list) else [wanted]
        if key not in context:
            if not negated:
                return False
            continue
        if (context[key] in wanted) == negated:
            return False
    return True


def may_publish(policy: dict[str, Any], principal: dict[str, str], context: dict[str, str]) -> bool:
    """The topic policy's answer to `sns:Publish` (an explicit Deny wins); a principal of the
    account allowed by its own policy is allowed unless the topic denies it."""

    def applies(statement: dict[str, Any]) -> bool:
        actions = (
            statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        )
        who = statement["Principal"]
        return (
            "sns:Publish" in actions
            and (who == {"AWS": "*"} or who == "*" or who == principal)
            and all(
                _matches(op, values, context)
                for op, values in statement.get("Condition", {}).items()
            )
        )

    statements = policy["Statement"]
    if any(s["Effect"] == "Deny" and applies(s) for s in statements):
        return False
    return principal.get("AWS") is not None or any(
        s["Effect"] == "Allow" and applies(s) for s in statements
    )


def test_nothing_but_the_configured_workspaces_may_deliver_alerts_to_the_topic(template):
    policy = next(
        resolver(template)(p["Properties"]["PolicyDocument"])
        for p in resources_of_type(template, "AWS::SNS::TopicPolicy").values()
        if p["Properties"]["Topics"] == [{"Ref": TOPIC_LOGICAL_ID}]
    )
    aps = {"Service": "aps.amazonaws.com"}
    secure = {"aws:SecureTransport": "true"}
    workspace = WORKSPACES["ml-cluster-1"]
    other = f"arn:aws:aps:{REGION}:{ACCOUNT}:workspace/ws-not-configured"

    assert may_publish(
        policy, aps, {**secure, "aws:SourceArn": workspace, "aws:SourceAccount": ACCOUNT}
    )
    assert not may_publish(
        policy, aps, {**secure, "aws:SourceArn": other, "aws:SourceAccount": ACCOUNT}
    )
    assert not may_publish(
        policy, aps, {**secure, "aws:SourceArn": workspace, "aws:SourceAccount": "999988887777"}
    )
    # a training pod's role of this account, allowed sns:Publish by its own policy
    assert not may_publish(policy, {"AWS": f"arn:aws:iam::{ACCOUNT}:role/training"}, secure)


def test_the_topic_is_encrypted_with_a_key_the_prometheus_service_may_use(template):
    topic = template["Resources"][TOPIC_LOGICAL_ID]["Properties"]
    key_id = topic["KmsMasterKeyId"]["Fn::GetAtt"][0]
    statements = template["Resources"][key_id]["Properties"]["KeyPolicy"]["Statement"]

    assert any(
        s.get("Principal") == {"Service": "aps.amazonaws.com"}
        and "kms:GenerateDataKey*" in s["Action"]
        for s in statements
    )


def test_a_deployment_without_telemetry_has_no_hardware_alerts(variant_template):
    for kind in ("AWS::APS::RuleGroupsNamespace", "Custom::AlertManagerDefinition"):
        assert resources_of_type(variant_template, kind) == {}
    assert TOPIC_LOGICAL_ID not in variant_template["Resources"]


def test_the_deployed_alert_manager_definition_passes_amtool(template, tmp_path: Path):
    amtool = shutil.which("amtool")
    if amtool is None:
        pytest.fail(AMTOOL_HINT)
    for cluster, calls in definition_calls(template).items():
        data = yaml.safe_load(calls["Create"]["parameters"]["data"])
        folder = tmp_path / cluster
        folder.mkdir()
        (folder / "alertmanager.yml").write_text(data["alertmanager_config"])
        (folder / TEMPLATE_FILE).write_text(data["template_files"][TEMPLATE_FILE])

        answer = subprocess.run(
            [amtool, "check-config", "alertmanager.yml"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

        assert answer.returncode == 0, answer.stdout + answer.stderr
        assert "SUCCESS" in answer.stdout


def test_the_topic_delivers_to_the_claims_intake_store_report_only(template):
    subscriptions = [
        s["Properties"]
        for s in resources_of_type(template, "AWS::SNS::Subscription").values()
        if s["Properties"]["TopicArn"] == {"Ref": TOPIC_LOGICAL_ID}
    ]
    permissions = [
        p["Properties"]
        for p in resources_of_type(template, "AWS::Lambda::Permission").values()
        if p["Properties"].get("SourceArn") == {"Ref": TOPIC_LOGICAL_ID}
    ]

    assert [(s["Protocol"], s["Endpoint"]) for s in subscriptions] == [
        ("lambda", {"Fn::GetAtt": ["StoreReportFunction", "Arn"]})
    ]
    assert [(p["Principal"], p["FunctionName"]) for p in permissions] == [
        ("sns.amazonaws.com", {"Fn::GetAtt": ["StoreReportFunction", "Arn"]})
    ]
