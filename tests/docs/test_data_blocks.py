"""The blocks that restate code or configuration, compared with the code that owns it:
`make` lines, `cdk deploy -c` settings, JSON inputs and policies, YAML manifests and the state
machine as drawn. Each kind's last test asserts that every block of the kind was checked."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from sdc_remediation.infra.stack.settings import DeploymentSettings
from tests.conftest import REPO
from tests.docs.blocks import Block, blocks_of

# -- shared: the shell lines of a block ------------------------------------------------------


def shell_lines(text: str) -> Iterator[list[str]]:
    """Each command of a shell block as argv: continuations joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", text)
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            yield words


def ids(blocks: list[Block]) -> list[str]:
    return [b.id for b in blocks]


# -- make ------------------------------------------------------------------------------------

MAKE = blocks_of("make")


@pytest.mark.parametrize("block", MAKE, ids=ids(MAKE))
def test_every_make_line_names_a_target_make_can_plan(block):
    for argv in shell_lines(block.text):
        assert argv[0] == "make", f"{block.id}: {argv} is not a make line"

        planned = subprocess.run(
            ["make", "-n", *argv[1:]], cwd=REPO, capture_output=True, text=True, timeout=60
        )

        assert planned.returncode == 0, f"{block.id}: make -n {argv[1:]}: {planned.stderr}"
        assert "Nothing to be done" not in planned.stdout


# -- cdk-context -----------------------------------------------------------------------------

CDK_CONTEXT = blocks_of("cdk-context")


def context_of(argv: list[str]) -> dict[str, str]:
    """The `-c key=value` pairs of a `cdk deploy` line, or of `make deploy CDK_ARGS="..."`."""
    if argv[0] == "make":
        (cdk_args,) = [a.split("=", 1)[1] for a in argv if a.startswith("CDK_ARGS=")]
        argv = shlex.split(cdk_args)
    elif argv[:3] != ["npx", "cdk", "deploy"]:
        raise AssertionError(f"{argv} is neither `npx cdk deploy` nor `make deploy`")
    pairs = [argv[i + 1] for i, word in enumerate(argv) if word in ("-c", "--context")]
    return dict(pair.split("=", 1) for pair in pairs)


@pytest.mark.parametrize("block", CDK_CONTEXT, ids=ids(CDK_CONTEXT))
def test_every_documented_context_value_is_accepted_by_the_settings(block):
    contexts = [context_of(argv) for argv in shell_lines(block.text)]

    for context in contexts:
        # The CLI hands -c values over as strings; the settings parse the JSON ones
        settings = DeploymentSettings.from_context(context)

        assert context, f"{block.id}: a deploy line without -c"
        assert settings.clusters, f"{block.id}: a deployment that may act on no cluster"


def test_a_context_value_the_settings_refuse_fails_the_check():
    argv = next(shell_lines('npx cdk deploy -c \'sdc:clusters={"ml-cluster-1": "nope"}\''))

    with pytest.raises(ValueError, match="sdc:clusters"):
        DeploymentSettings.from_context(context_of(argv))


# -- json ------------------------------------------------------------------------------------

JSON = blocks_of("json")


def parsed(block: Block) -> Any:
    text = block.text.strip()
    # A fragment `"key": {...}` as it appears inside a larger document
    return json.loads("{" + text + "}" if text.startswith('"') else text)


def default_template() -> dict[str, Any]:
    from sdc_remediation.infra.stack.asset import build_lambda_asset
    from sdc_remediation.infra.stack.synth import synthesize_once

    return synthesize_once({}, code_asset=build_lambda_asset()).template


def check_training_policy(block: Block) -> None:
    from sdc_remediation.infra.stack.template import Resolver, placeholder_arns, resources_of_type

    template = default_template()
    (policy,) = (
        policy
        for logical_id, policy in resources_of_type(template, "AWS::IAM::ManagedPolicy").items()
        if logical_id.startswith("TrainingAccess")
    )
    where = {"region": "<region>", "account": "<account>"}
    resolve = Resolver.of_arns(template, placeholder_arns(template, **where), **where)
    deployed = resolve(policy["Properties"]["PolicyDocument"])
    documented = parsed(block)
    assert documented["Statement"] == deployed["Statement"], block.id
    assert documented["Version"] == deployed["Version"]


def check_decision(block: Block) -> None:
    from sdc_remediation.lambdas.models.payloads import Decision, parse_decision_request

    request = parse_decision_request({**parsed(block), "approval_execution_arn": "arn:x"})
    assert request.decision in {d.value for d in Decision}, block.id
    assert isinstance(request.comment, str) and request.comment
    assert re.fullmatch(r"(sdc|hold)-[\w-]+", request.incident_id)


def check_approval_input(block: Block) -> None:
    from sdc_remediation.infra.stack.definitions import _approval_states

    arn = "arn:aws:states:us-west-2:123456789012:stateMachine:SdcRemediation-approval"
    states = _approval_states({"request_approval": "fn"}, DeploymentSettings(), arn)
    hint = states["RequestApproval"]["Parameters"]["Payload"]["approval_input"]
    (documented,) = parsed(block).values()
    incident_id = documented["approve"]["incident_id"]

    # The state machine fills the incident id from its input (`incident_id.$`)
    def filled(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k.removesuffix(".$"): incident_id if k == "incident_id.$" else filled(v)
                for k, v in value.items()
            }
        return value

    assert documented == filled(hint), block.id


def check_chat_notification(block: Block) -> None:
    """A notice as chat gets it: the documented custom notification shape, a kind we send."""
    import jsonschema

    from sdc_remediation.lambdas.models.notices import NoticeKind
    from tests.conftest import load_fixture

    document = parsed(block)
    schema = load_fixture("events", "chat_custom_notification.schema")
    jsonschema.Draft202012Validator(schema).validate(document)
    assert document["metadata"]["eventType"] in {k.event_type for k in NoticeKind}, block.id


def check_lifecycle_rule(block: Block) -> None:
    """An EventBridge pattern on the lifecycle events: our source and detail-type, and only
    fields and values the event's schema has."""
    from sdc_remediation.lambdas.models.lifecycle_event import (
        LIFECYCLE_DETAIL_TYPE,
        LIFECYCLE_SOURCE,
        SCHEMA_FILE,
    )

    pattern = parsed(block)
    schema = json.loads((REPO / SCHEMA_FILE).read_text())
    assert pattern["source"] == [LIFECYCLE_SOURCE], block.id
    assert pattern["detail-type"] == [LIFECYCLE_DETAIL_TYPE], block.id
    states = set(schema["$defs"]["state"]["enum"])
    for field, values in pattern.get("detail", {}).items():
        assert field in schema["properties"], f"{block.id}: no field {field} in the event"
        if field in ("new_state", "old_state"):
            assert set(values) <= states, block.id


JSON_CHECKS = {
    "training-policy": check_training_policy,
    "decision": check_decision,
    "approval-input": check_approval_input,
    "chat-notification": check_chat_notification,
    "lifecycle-rule": check_lifecycle_rule,
}


NEEDS_TEMPLATE = {"training-policy"}
"""The JSON checks that compare with a synthesized template (marked `synth`)."""


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(b, marks=[pytest.mark.synth] if b.argument in NEEDS_TEMPLATE else [])
        for b in JSON
    ],
    ids=ids(JSON),
)
def test_every_json_block_matches_what_the_code_builds(block):
    JSON_CHECKS[block.argument](block)


def test_every_json_check_is_used_by_a_block():
    assert {b.argument for b in JSON} == set(JSON_CHECKS)


# -- yaml ------------------------------------------------------------------------------------

YAML = blocks_of("yaml")


def check_pod_env(block: Block) -> None:
    """The pod's environment names only variables the emitter reads."""
    from trainer_emitter import emitter, rankmap

    env = yaml.safe_load(block.text)["env"]
    read = set(re.findall(r'"((?:SDC|AWS|NODE)_[A-Z_]+)"', _source(emitter) + _source(rankmap)))
    assert {e["name"] for e in env} <= read, block.id
    assert {"NODE_NAME", "SDC_CLUSTER_NAME"} <= {e["name"] for e in env}
    (node,) = [e for e in env if e["name"] == "NODE_NAME"]
    assert node["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}


def check_rbac(block: Block) -> None:
    """The manifest grants the stack's Kubernetes groups what the adapter's error hint names, and
    binds an admission policy to each that lets it change only what its functions change."""
    from sdc_remediation.infra.stack.node_isolation import KUBERNETES_GROUP, RECOVERY_GROUP
    from sdc_remediation.lambdas.adapters.kubernetes import RBAC_HINT

    documents = list(yaml.safe_load_all(block.text))
    role, binding, *admission = documents
    assert (role["kind"], binding["kind"]) == ("ClusterRole", "ClusterRoleBinding"), block.id
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert [s["name"] for s in binding["subjects"]] == [KUBERNETES_GROUP, RECOVERY_GROUP]
    assert RECOVERY_GROUP in RBAC_HINT
    # reconcile retakes a rate-held report on a sdc:jobPods cluster: it lists the job's pods
    assert re.search(r'#\s*resources: \["pods"\]\s*\n\s*#\s*verbs: \["get", "list"\]', block.text)
    for rule in role["rules"]:
        named = re.search(r"allowing ([\w, ]+) on (\w+)", RBAC_HINT)
        assert named, RBAC_HINT
        assert set(rule["verbs"]) == set(re.split(r", | and ", named[1])), block.id
        assert rule["resources"] == [named[2]]
    policies = {d["metadata"]["name"]: d for d in admission if d["kind"] == POLICY}
    bindings = [d["spec"] for d in admission if d["kind"] == POLICY + "Binding"]
    assert {d["kind"] for d in admission} == {POLICY, POLICY + "Binding"}, block.id
    assert {b["policyName"]: b["validationActions"] for b in bindings} == {
        name: ["Deny"] for name in policies
    }
    assert {_policy_group(p) for p in policies.values()} == {KUBERNETES_GROUP, RECOVERY_GROUP}
    for policy in policies.values():
        check_node_update_policy(policy, free=_free_to_change()[_policy_group(policy)])


POLICY = "ValidatingAdmissionPolicy"
NODE_METADATA_A_CLIENT_SETS = ("labels", "annotations", "ownerReferences", "finalizers")
"""The node's metadata fields an update may change (the rest is immutable or the server's:
name, uid, resourceVersion, creationTimestamp, deletion*, generation, managedFields...)."""


def _free_to_change() -> dict[str, set[str]]:
    from sdc_remediation.infra.stack.node_isolation import KUBERNETES_GROUP, RECOVERY_GROUP

    # taints and the health label are compared too, through the policies' variables
    return {KUBERNETES_GROUP: {"spec.unschedulable"}, RECOVERY_GROUP: set()}


def _policy_group(policy: dict[str, Any]) -> str:
    (condition,) = policy["spec"]["matchConditions"]
    found = re.fullmatch(r"'([\w-]+)' in request\.userInfo\.groups", condition["expression"])
    assert found, condition
    return found[1]


def check_node_update_policy(policy: dict[str, Any], *, free: set[str]) -> None:
    """An admissionregistration.k8s.io/v1 policy on every update of a node, failing closed, that
    compares each field of the node a client may set (every field of `V1NodeSpec`, the
    official client's) between `object` and `oldObject`, but those `free` to change."""
    from kubernetes.client import V1NodeSpec

    spec = policy["spec"]
    name = policy["metadata"]["name"]
    assert policy["apiVersion"] == "admissionregistration.k8s.io/v1", name
    assert spec["failurePolicy"] == "Fail", name
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}
    ]
    compared = " ".join(
        [v["expression"] for v in spec["validations"]]
        + [v["expression"] for v in spec.get("variables", [])]
    )
    fields = [f"spec.{f}" for f in V1NodeSpec.attribute_map.values()] + [
        f"metadata.{f}" for f in NODE_METADATA_A_CLIENT_SETS
    ]
    whole_spec = "object.spec == oldObject.spec" in compared
    for field in fields:
        if field in free or (whole_spec and field.startswith("spec.")):
            continue
        assert f"object.{field}" in compared and f"oldObject.{field}" in compared, (name, field)


def check_rbac_readers(block: Block) -> None:
    """The readers' manifest grants the stack's read-only group get and list on nodes only (the
    pods rule, for sdc:jobPods, is shown commented out), as the adapter's error hint names."""
    from sdc_remediation.infra.stack.node_isolation import READER_GROUP
    from sdc_remediation.lambdas.adapters.kubernetes import RBAC_HINT

    role, binding = yaml.safe_load_all(block.text)
    assert (role["kind"], binding["kind"]) == ("ClusterRole", "ClusterRoleBinding"), block.id
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert [s["name"] for s in binding["subjects"]] == [READER_GROUP]
    assert [(r["resources"], set(r["verbs"])) for r in role["rules"]] == [
        (["nodes"], {"get", "list"})
    ]
    assert f"group {READER_GROUP} with get and list on nodes" in RBAC_HINT


def _source(module: Any) -> str:
    import inspect

    return inspect.getsource(module)


YAML_CHECKS = {"pod-env": check_pod_env, "rbac": check_rbac, "rbac-readers": check_rbac_readers}


@pytest.mark.parametrize("block", YAML, ids=ids(YAML))
def test_every_yaml_block_matches_the_names_the_code_uses(block):
    YAML_CHECKS[block.argument](block)


def test_every_yaml_check_is_used_by_a_block():
    assert {b.argument for b in YAML} == set(YAML_CHECKS)


# -- states ----------------------------------------------------------------------------------

STATES = blocks_of("states")
WORD = re.compile(r"\b[A-Z][A-Za-z]+\??")
CAMEL = re.compile(r"[A-Z][a-z]+(?:[A-Z][a-z]+)+\??")
NOT_STATES = {"TimeoutSeconds", "NodeRecovery", "HyperPod", "NotFound"}
"""Camel-case words of the drawings that are ASL fields, HyperPod names or statuses."""


def remediation_states() -> set[str]:
    from sdc_remediation.infra.stack.template import state_machine_definitions

    definition = json.loads(
        state_machine_definitions(default_template())["RemediationStateMachine"]
    )
    return set(definition["States"])


@pytest.mark.synth
@pytest.mark.parametrize("block", STATES, ids=ids(STATES))
def test_the_drawn_state_machine_is_the_synthesized_one(block):
    states = remediation_states()
    words = set(WORD.findall(block.text))
    # a camel-case word must be a state; a plain word (Closed, Decision?) counts where it is one
    drawn = {w for w in words if CAMEL.fullmatch(w) or w in states} - NOT_STATES

    assert drawn - states == set(), f"{block.id} draws states the machine does not have"
    assert states - drawn == set(), f"{block.id} leaves out states of the machine"


# -- every block of these kinds was checked -------------------------------------------------


def test_each_kind_of_this_module_has_blocks():
    assert MAKE and CDK_CONTEXT and JSON and YAML and STATES
