"""Node isolation in the stack: access entries per EKS cluster for the functions that patch
nodes, eks:DescribeCluster scoped to those clusters, and nothing of it when not configured."""

from __future__ import annotations

import json

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_iam as iam

from sdc_remediation.infra.stack.functions import SPECS
from sdc_remediation.infra.stack.node_isolation import (
    ADMIN_VIEW_POLICY,
    CLUSTER_ADMIN_POLICY,
    KUBERNETES_GROUP,
    READER_GROUP,
    RECOVERY_GROUP,
    NodeIsolationAccess,
    NodeIsolationAccessProps,
)
from sdc_remediation.infra.stack.settings import DeploymentSettings, SettingsError
from sdc_remediation.infra.stack.template import resources_of_type
from tests.infra.template_tools import actions, resolved, statements_of_function

KUBERNETES_FUNCTIONS = {s.logical_id for s in SPECS if s.kubernetes}
CLAIM_CHECKERS = {s.logical_id for s in SPECS if s.checks_claims}
READERS = {s.logical_id for s in SPECS if (s.checks_claims or s.reads_nodes) and not s.kubernetes}


def _entries(template):
    return [r["Properties"] for r in resources_of_type(template, "AWS::EKS::AccessEntry").values()]


def test_the_functions_that_patch_nodes_are_isolate_node_close_incident_and_reconcile():
    assert {"IsolateNodeFunction", "CloseIncidentFunction", "ReconcileFunction"} == (
        KUBERNETES_FUNCTIONS
    )


def test_each_patching_function_role_gets_an_access_entry_mapped_to_the_rbac_group(template):
    entries = _entries(template)

    roles = {
        template["Resources"][fn]["Properties"]["Role"]["Fn::GetAtt"][0]
        for fn in KUBERNETES_FUNCTIONS
    }
    patching = [e for e in entries if e["KubernetesGroups"] == [KUBERNETES_GROUP]]
    assert {e["PrincipalArn"]["Fn::GetAtt"][0] for e in patching} == roles
    for entry in patching:
        assert entry["ClusterName"] == "ml-eks-1"
        assert "AccessPolicies" not in entry
        assert entry["Type"] == "STANDARD"


def test_the_functions_that_read_nodes_without_patching_them():
    assert {
        "OpenIncidentFunction",
        "StoreReportFunction",
        "RequestApprovalFunction",
        "DecideFunction",
    } == READERS


def test_the_functions_that_check_claims_are_the_intake_functions_and_decide():
    # decide: a `proceed` checks the held job's claims before anything acts
    assert {"OpenIncidentFunction", "StoreReportFunction", "DecideFunction"} == CLAIM_CHECKERS


def test_the_claim_checking_functions_get_read_only_access_entries_and_no_patching_group(
    template,
):
    readers = [e for e in _entries(template) if e["KubernetesGroups"] == [READER_GROUP]]

    roles = {template["Resources"][fn]["Properties"]["Role"]["Fn::GetAtt"][0] for fn in READERS}
    assert {e["PrincipalArn"]["Fn::GetAtt"][0] for e in readers} == roles
    patching = [e for e in _entries(template) if e["KubernetesGroups"] == [KUBERNETES_GROUP]]
    assert not roles & {e["PrincipalArn"]["Fn::GetAtt"][0] for e in patching}
    assert {len(e["KubernetesGroups"]) for e in _entries(template)} == {1}


def test_only_the_functions_with_kubernetes_access_may_describe_the_eks_cluster(template):
    for logical_id in [s.logical_id for s in SPECS]:
        statements = statements_of_function(template, logical_id)
        eks = [s for s in statements if any(a.startswith("eks:") for a in actions(s))]
        if logical_id not in KUBERNETES_FUNCTIONS | READERS:
            assert eks == [], logical_id
            continue
        (statement,) = eks
        assert actions(statement) == {"eks:DescribeCluster"}
        (resource,) = _list(resolved(template, statement["Resource"]))
        assert ":eks:" in resource
        assert resource.endswith(":cluster/ml-eks-1")


def test_the_functions_with_kubernetes_access_are_told_which_clusters_to_isolate(template):
    for logical_id in KUBERNETES_FUNCTIONS | CLAIM_CHECKERS:
        env = template["Resources"][logical_id]["Properties"]["Environment"]["Variables"]
        assert json.loads(env["NODE_ISOLATION"]) == {
            "ml-cluster-1": {"isolate": True, "eks_cluster": "ml-eks-1"}
        }
    env = template["Resources"]["CheckHealthFunction"]["Properties"]["Environment"]["Variables"]
    assert "NODE_ISOLATION" not in env


def test_without_node_isolation_there_is_no_access_entry_and_no_eks_permission(variant_template):
    assert _entries(variant_template) == []
    for logical_id in KUBERNETES_FUNCTIONS | CLAIM_CHECKERS:
        statements = statements_of_function(variant_template, logical_id)
        assert not [s for s in statements if any(a.startswith("eks:") for a in actions(s))]


@pytest.mark.synth
def test_the_cluster_admin_policy_is_only_associated_when_opted_in():
    app = App()
    stack = Stack(app, "Probe")
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    settings = DeploymentSettings.from_context(
        {
            "sdc:clusters": {"ml-cluster-1": "ab12cd34ef56"},
            "sdc:nodeIsolation": {"ml-cluster-1": "ml-eks-1"},
            "sdc:nodeIsolationAccess": "clusterAdminPolicy",
        }
    )
    reader = iam.Role(stack, "Reader", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    NodeIsolationAccess(
        stack,
        "Access",
        props=NodeIsolationAccessProps.from_settings(settings, roles=[role], readers=[reader]),
    )

    template = app.synth().get_stack_by_name("Probe").template
    entry, reads = _entries(template)
    assert "KubernetesGroups" not in entry and "KubernetesGroups" not in reads
    assert entry["AccessPolicies"] == [
        {"PolicyArn": CLUSTER_ADMIN_POLICY, "AccessScope": {"Type": "cluster"}}
    ]
    assert reads["AccessPolicies"] == [
        {"PolicyArn": ADMIN_VIEW_POLICY, "AccessScope": {"Type": "cluster"}}
    ]


@pytest.mark.parametrize(
    ("context", "says"),
    [
        ({"sdc:nodeIsolation": {"other-cluster": "ml-eks-1"}}, "not in sdc:clusters"),
        ({"sdc:nodeIsolation": {"ml-cluster-1": "bad name!"}}, "not an EKS cluster name"),
        ({"sdc:nodeIsolation": ["ml-cluster-1"]}, "an object"),
        ({"sdc:nodeIsolationAccess": "admin"}, "group or clusterAdminPolicy"),
    ],
)
def test_bad_node_isolation_context_is_refused_naming_the_key(context, says):
    with pytest.raises(SettingsError, match=says):
        DeploymentSettings.from_context(
            {"sdc:clusters": {"ml-cluster-1": "ab12cd34ef56"}, **context}
        )


def _list(value):
    return value if isinstance(value, list) else [value]


# -- recovery through HyperPod's node health label -------------------------------------------

RECOVERING_FUNCTIONS = {s.logical_id for s in SPECS if s.recovers}


@pytest.fixture(scope="module")
def labelled_template(lambda_asset):
    from sdc_remediation.infra.stack.synth import synthesize_once
    from tests.infra.conftest import CONTEXT

    context = {**CONTEXT, "sdc:recoveryThroughNodeLabel": ["ml-cluster-1"]}
    return synthesize_once(context, code_asset=lambda_asset).template


def test_the_functions_that_recover_nodes_are_reboot_node_and_replace_node():
    assert {"RebootNodeFunction", "ReplaceNodeFunction"} == RECOVERING_FUNCTIONS


def _roles(template, functions):
    return {template["Resources"][fn]["Properties"]["Role"]["Fn::GetAtt"][0] for fn in functions}


def _mapped(template, group):
    return {
        e["PrincipalArn"]["Fn::GetAtt"][0]
        for e in _entries(template)
        if e["KubernetesGroups"] == [group]
    }


def test_label_recovery_maps_the_recovering_functions_to_the_recovery_group_only(
    labelled_template,
):
    patching = KUBERNETES_FUNCTIONS | RECOVERING_FUNCTIONS

    assert _mapped(labelled_template, RECOVERY_GROUP) == _roles(
        labelled_template, RECOVERING_FUNCTIONS
    )
    assert _mapped(labelled_template, KUBERNETES_GROUP) == _roles(
        labelled_template, KUBERNETES_FUNCTIONS
    )
    for logical_id in patching:
        env = labelled_template["Resources"][logical_id]["Properties"]["Environment"]["Variables"]
        assert json.loads(env["NODE_ISOLATION"]) == {
            "ml-cluster-1": {"isolate": True, "eks_cluster": "ml-eks-1", "recovery": "node_label"}
        }
        (statement,) = [
            s
            for s in statements_of_function(labelled_template, logical_id)
            if any(a.startswith("eks:") for a in actions(s))
        ]
        assert actions(statement) == {"eks:DescribeCluster"}


def test_without_label_recovery_the_recovering_functions_get_no_kubernetes_access(template):
    assert _mapped(template, RECOVERY_GROUP) == set()
    for logical_id in RECOVERING_FUNCTIONS:
        env = template["Resources"][logical_id]["Properties"]["Environment"]["Variables"]
        assert "NODE_ISOLATION" not in env
        statements = statements_of_function(template, logical_id)
        assert not [s for s in statements if any(a.startswith("eks:") for a in actions(s))]


def test_label_recovery_for_a_cluster_without_isolation_is_refused():
    with pytest.raises(SettingsError, match="sdc:recoveryThroughNodeLabel names ml-cluster-2"):
        DeploymentSettings.from_context(
            {
                "sdc:clusters": {"ml-cluster-1": "ab12cd34ef56", "ml-cluster-2": "0123456789ab"},
                "sdc:nodeIsolation": {"ml-cluster-1": "ml-eks-1"},
                "sdc:recoveryThroughNodeLabel": ["ml-cluster-2"],
            }
        )


def test_job_pods_reach_the_functions_with_the_clusters_node_isolation():
    settings = DeploymentSettings.from_context(
        {
            "sdc:clusters": {"ml-cluster-1": "ab12cd34ef56"},
            "sdc:nodeIsolation": {"ml-cluster-1": "ml-eks-1"},
            "sdc:jobPods": {"ml-cluster-1": "training.kubeflow.org/job-name"},
        }
    )

    assert json.loads(settings.node_isolation_env()) == {
        "ml-cluster-1": {
            "isolate": True,
            "eks_cluster": "ml-eks-1",
            "job_pods": "training.kubeflow.org/job-name",
        }
    }


@pytest.mark.parametrize(
    ("job_pods", "says"),
    [
        ({"ml-cluster-2": "training.kubeflow.org/job-name"}, "not in sdc:nodeIsolation"),
        ({"ml-cluster-1": "job name"}, "is not a label key"),
    ],
)
def test_bad_job_pods_context_is_refused_naming_why(job_pods, says):
    with pytest.raises(SettingsError, match=says):
        DeploymentSettings.from_context(
            {
                "sdc:clusters": {"ml-cluster-1": "ab12cd34ef56", "ml-cluster-2": "ab12cd34ef57"},
                "sdc:nodeIsolation": {"ml-cluster-1": "ml-eks-1"},
                "sdc:jobPods": job_pods,
            }
        )
