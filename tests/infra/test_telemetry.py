"""Hardware telemetry in the synthesized stack: only request_approval and the two intake
functions (for the training watch's evidence alone: a straggler's corroboration) may query, only
the configured workspaces, and their environment says where they are in the lambdas' own
format."""

from __future__ import annotations

import json

from sdc_remediation.lambdas.models.settings import Settings as FunctionSettings
from tests.infra.conftest import DASHBOARD, WORKSPACE_ARN, WORKSPACE_ID
from tests.infra.template_tools import actions, all_statements, resolved, statements_of_function

FUNCTIONS = "AWS::Lambda::Function"


def _aps_statements(template):
    """The statements that let a role query a workspace (the hardware alerts' deploy-time role
    may set alert manager definitions, and query nothing)."""
    return [s for s in all_statements(template) if "aps:QueryMetrics" in actions(s)]


def _environment(template, function_id):
    return template["Resources"][function_id]["Properties"]["Environment"]["Variables"]


QUERYING = {
    "RequestApprovalFunction",
    "StoreReportFunction",
    "OpenIncidentFunction",
    "ReconcileFunction",  # a watch claim the rate bound held, taken again: its telemetry
}


def test_only_the_querying_functions_may_query_and_only_the_configured_workspaces(template):
    statements = _aps_statements(template)

    holders = {
        function_id
        for function_id in QUERYING
        for s in statements_of_function(template, function_id)
        if s in statements
    }
    assert holders == QUERYING
    assert len(statements) == len(QUERYING)
    for statement in statements:
        assert actions(statement) == {"aps:QueryMetrics"}
        assert sorted(resolved(template, statement["Resource"])) == sorted(
            [WORKSPACE_ARN, f"arn:aws:aps:us-west-2:123456789012:workspace/{WORKSPACE_ID}"]
        )


def test_only_the_querying_functions_are_told_where_the_workspaces_are(template):
    holders = {
        logical_id
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == FUNCTIONS
        and "TELEMETRY" in resource["Properties"].get("Environment", {}).get("Variables", {})
    }

    assert holders == QUERYING


def test_the_environment_names_each_workspaces_query_url_region_dashboard_and_node_label(template):
    variables = {
        name: resolved(template, value)
        for name, value in _environment(template, "RequestApprovalFunction").items()
    }

    settings = FunctionSettings.from_env(variables)

    by_arn = settings.telemetry_for("ml-cluster-1")
    by_id = settings.telemetry_for("ml-cluster-2")
    assert by_arn is not None and by_id is not None
    assert by_arn.workspace_id == WORKSPACE_ARN.rsplit("/", 1)[-1]
    assert by_arn.query_url == (
        f"https://aps-workspaces.us-west-2.amazonaws.com/workspaces/{by_arn.workspace_id}"
    )
    assert (by_arn.region, by_arn.dashboard, by_arn.node_label) == ("us-west-2", DASHBOARD, None)
    # an id is in the stack's own region (the resolver's placeholder region)
    assert (
        by_id.query_url
        == f"https://aps-workspaces.us-west-2.amazonaws.com/workspaces/{WORKSPACE_ID}"
    )
    assert (by_id.region, by_id.dashboard, by_id.node_label) == ("us-west-2", None, "node")
    assert json.loads(variables["TELEMETRY"]).keys() == {"ml-cluster-1", "ml-cluster-2"}


def test_without_telemetry_nothing_may_query_and_no_function_is_told_of_a_workspace(
    variant_template,
):
    assert _aps_statements(variant_template) == []
    assert "TELEMETRY" not in _environment(variant_template, "RequestApprovalFunction")
