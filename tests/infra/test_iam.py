"""Least privilege: every permission names its resource unless the action cannot be scoped."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from sdc_remediation.infra.local.grants import (
    Call,
    Need,
    allowed,
    function_statements,
    managed_policy_statements,
    required,
)
from sdc_remediation.infra.stack.functions import PAGE, SPECS
from sdc_remediation.infra.stack.template import ACCOUNT, REGION, Resolver, resources_of_type
from sdc_remediation.lambdas.adapters.dynamodb.incidents import (
    DynamoIncidentStore,
    DynamoOpenIncidents,
)
from sdc_remediation.lambdas.models.incident import IncidentState
from tests.infra.conftest import CLUSTER_ARN, CLUSTER_ID
from tests.infra.template_tools import (
    actions,
    all_statements,
    as_list,
    resolved,
    statements_by_role,
    statements_of_function,
)

FUNCTIONS = [spec.logical_id for spec in SPECS]
REMEDIATION_ARN = "arn:aws:states:us-west-2:123456789012:stateMachine:SdcRemediation-remediation"
APPROVAL_ARN = "arn:aws:states:us-west-2:123456789012:stateMachine:SdcRemediation-approval"

UNSCOPABLE = {
    # X-Ray: no resource-level permissions.
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
    # CloudWatch Logs vended log delivery (state machine logging): no resource-level permissions.
    "logs:CreateLogDelivery",
    "logs:GetLogDelivery",
    "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies",
    "logs:DescribeLogGroups",
    # PutMetricData: no resource-level permissions (scoped by the cloudwatch:namespace condition).
    "cloudwatch:PutMetricData",
}


def _granting(statements: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    return [s for s in statements if any(a.startswith(prefix) for a in actions(s))]


def _holders(template: dict[str, Any], action: str) -> set[str]:
    return {
        fn
        for fn in FUNCTIONS
        if any(action in actions(s) for s in statements_of_function(template, fn))
    }


SUFFIX_WILDCARDS = {
    "AuditAnchorAppendOnly": ":log-stream:*",
    "BindDecisionToApproval": "-approval:*",
    "FollowApproval": "-approval:*",
    "ReadRemediationExecutions": "-remediation:*",
}
"""Statements whose resources end in a wildcard below one named parent: the anchor group's own
log streams (named when first written), the approval state machine's executions (named by
whoever approves) and the remediation machine's (named after incidents; reconcile reads them)."""


def _without_suffix_wildcards(statement: dict[str, Any]) -> Any:
    suffix = SUFFIX_WILDCARDS.get(statement.get("Sid", ""))
    if suffix is None:
        return statement["Resource"]
    return json.loads(json.dumps(statement["Resource"]).replace(suffix, ":named"))


def test_a_star_resource_is_only_granted_for_actions_that_cannot_be_scoped(template):
    for statement in all_statements(template):
        if statement["Effect"] != "Allow":
            continue
        resources = json.dumps(_without_suffix_wildcards(statement))
        if "*" in resources:
            assert as_list(statement["Resource"]) == ["*"], statement
            assert actions(statement) <= UNSCOPABLE, statement
        assert not any("*" in a for a in actions(statement)), statement


def test_no_function_role_carries_a_managed_policy(template):
    for logical_id, role in resources_of_type(template, "AWS::IAM::Role").items():
        assert "ManagedPolicyArns" not in role["Properties"], logical_id


@pytest.mark.parametrize("function_id", FUNCTIONS)
def test_the_audit_table_is_append_only_for_every_function(template, function_id):
    audit = [
        s
        for s in statements_of_function(template, function_id)
        if {"Fn::GetAtt": ["AuditTable", "Arn"]} in as_list(s["Resource"])
        and s.get("Sid") not in ("AuditTableScan", "AuditSubjectsNotItsOwn")
    ]

    assert audit, f"{function_id} cannot write the audit log"
    for statement in audit:
        assert actions(statement) == {"dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:Query"}


def test_nothing_may_update_or_delete_audit_entries(template):
    for statement in all_statements(template):
        touches_audit = "AuditTable" in json.dumps(statement["Resource"])
        if touches_audit:
            assert not actions(statement) & {
                "dynamodb:UpdateItem",
                "dynamodb:DeleteItem",
                "dynamodb:BatchWriteItem",
                "dynamodb:PartiQLUpdate",
                "dynamodb:PartiQLDelete",
                "dynamodb:DeleteTable",
            }


def test_incidents_grants_name_the_table_and_its_index_and_never_scan(template):
    for statement in _granting(all_statements(template), "dynamodb:"):
        if statement["Effect"] == "Deny":  # takes away, grants nothing
            continue
        if statement.get("Sid") == "ReadTheIncidentFirst":  # the approvers' policy: one read
            assert actions(statement) == {"dynamodb:GetItem"}
            assert resolved(template, statement["Resource"]) == "<IncidentsTable>"
            continue
        if statement.get("Sid") == "OpenIncidentsByState":  # the dashboard's page: the index
            assert actions(statement) == {"dynamodb:Query"}
            assert resolved(template, statement["Resource"]) == "<IncidentsTable>/index/by_state"
            continue
        if "IncidentsTable" in json.dumps(statement["Resource"]):
            assert resolved(template, statement["Resource"]) == [
                "<IncidentsTable>",
                "<IncidentsTable>/index/by_state",
            ]
            assert "dynamodb:Scan" not in actions(statement)


def test_the_page_may_only_query_the_by_state_index_and_write_its_own_logs(template):
    """The dashboard's page: no item of the table (never a task token's `TOKEN#` item, which
    the index never holds), no audit, no events, no topic, nothing that decides."""
    granted = [
        s for s in statements_of_function(template, PAGE.logical_id) if s["Effect"] == "Allow"
    ]
    reads = [
        s for s in granted if actions(s) & {a for a in actions(s) if a.startswith("dynamodb:")}
    ]

    assert [(actions(s), resolved(template, s["Resource"])) for s in reads] == [
        ({"dynamodb:Query"}, "<IncidentsTable>/index/by_state")
    ]
    assert set().union(*(actions(s) for s in granted)) == {
        "dynamodb:Query",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
    }


def test_hyperpod_actions_are_scoped_to_the_configured_clusters(template):
    expected = [CLUSTER_ARN, f"arn:aws:sagemaker:us-west-2:123456789012:cluster/{CLUSTER_ID}"]
    statements = _granting(all_statements(template), "sagemaker:")

    assert statements
    for statement in statements:
        assert resolved(template, statement["Resource"]) == expected


def test_only_start_health_check_and_reconcile_start_health_checks_only_replace_node_replaces_and_only_reboot_node_reboots(
    template,
):
    assert _holders(template, "sagemaker:StartClusterHealthCheck") == {
        "StartHealthCheckFunction",
        "ReconcileFunction",  # a node back from a reboot that never ended is checked before release
    }
    assert _holders(template, "sagemaker:BatchReplaceClusterNodes") == {"ReplaceNodeFunction"}
    assert _holders(template, "sagemaker:BatchRebootClusterNodes") == {"RebootNodeFunction"}
    assert _holders(template, "sagemaker:DescribeClusterNode") == {
        "OpenIncidentFunction",
        "StoreReportFunction",
        "StartHealthCheckFunction",
        "CheckHealthFunction",
        "ReplaceNodeFunction",
        "CheckReplacementFunction",
        "RebootNodeFunction",
        "CheckRebootFunction",
        "ReconcileFunction",
        "DecideFunction",  # a `proceed` checks the held job's nodes again
        "IsolateNodeFunction",  # a Slurm node's name is its host name (PrivateDnsHostname)
    }


def test_without_configured_clusters_no_function_may_touch_hyperpod(variant_template):
    assert _granting(all_statements(variant_template), "sagemaker:") == []


def test_only_the_intake_functions_decide_and_reconcile_start_the_remediation_and_only_that_machine(
    template,
):
    # reconcile starts an execution that an opened incident never got (after its grace period)
    starters = {
        "OpenIncidentFunction",
        "StoreReportFunction",
        "DecideFunction",
        "ReconcileFunction",
    }
    assert _holders(template, "states:StartExecution") == starters
    for function_id in starters:
        (statement,) = _granting(statements_of_function(template, function_id), "states:Start")

        assert resolved(template, statement["Resource"]) == REMEDIATION_ARN


def test_only_decide_answers_the_waiting_task_and_only_on_the_remediation_machine(template):
    for action in ("states:SendTaskSuccess", "states:SendTaskFailure"):
        assert _holders(template, action) == {"DecideFunction"}
    (statement,) = _granting(statements_of_function(template, "DecideFunction"), "states:Send")

    assert actions(statement) == {"states:SendTaskSuccess", "states:SendTaskFailure"}
    assert resolved(template, statement["Resource"]) == REMEDIATION_ARN


def test_only_reconcile_reads_the_remediation_machine_s_executions(template):
    readers = {
        fn
        for fn in FUNCTIONS
        for s in statements_of_function(template, fn)
        if "states:DescribeExecution" in actions(s) and "-remediation:" in json.dumps(s["Resource"])
    }
    assert readers == {"ReconcileFunction"}
    (statement,) = _granting(statements_of_function(template, "ReconcileFunction"), "states:Desc")

    assert actions(statement) == {"states:DescribeExecution"}
    execution_prefix = REMEDIATION_ARN.replace(":stateMachine:", ":execution:")
    assert resolved(template, statement["Resource"]) == f"{execution_prefix}:*"


def test_the_state_machine_arns_granted_are_the_deployed_ones(template):
    name = template["Resources"]["RemediationStateMachine"]["Properties"]["StateMachineName"]

    assert REMEDIATION_ARN.endswith(f":stateMachine:{name}")


def test_publishing_is_limited_to_the_topic_and_its_key(template):
    publishers = _holders(template, "sns:Publish")
    assert publishers == {
        "OpenIncidentFunction",
        "StoreReportFunction",
        "RequestApprovalFunction",
        "CloseIncidentFunction",
        "DecideFunction",
        "ReconcileFunction",
    }
    for fn in publishers:
        statements = statements_of_function(template, fn)
        (publish,) = _granting(statements, "sns:")
        (key,) = _granting(statements, "kms:")
        assert publish["Resource"] == {"Ref": "NotificationTopic"}
        assert actions(key) == {"kms:GenerateDataKey", "kms:Decrypt"}
        assert key["Resource"]["Fn::GetAtt"][0].startswith("NotificationsTopicKey")


def test_the_pause_switch_is_read_only_with_get_parameter_on_its_one_arn(template):
    readers = _holders(template, "ssm:GetParameter")

    assert readers == {
        "OpenIncidentFunction",
        "StoreReportFunction",
        "IsolateNodeFunction",
        "StartHealthCheckFunction",
        "CheckHealthFunction",
        "ReplaceNodeFunction",
        "RebootNodeFunction",
        "DecideFunction",
        "ReconcileFunction",
    }
    name = template["Resources"]["PauseSwitchParameter"]["Properties"]["Name"]
    assert name == "/SdcRemediation/paused"
    for fn in readers:
        (statement,) = _granting(statements_of_function(template, fn), "ssm:")
        assert actions(statement) == {"ssm:GetParameter"}
        # `parameter` + the parameter's own name, which starts with "/"
        arn = resolved(template, statement["Resource"])
        assert arn == "arn:aws:ssm:us-west-2:123456789012:parameter<PauseSwitchParameter>"


def test_no_function_may_change_the_pause_switch(template):
    for statement in all_statements(template):
        assert not {a for a in actions(statement) if a.startswith("ssm:")} - {"ssm:GetParameter"}


def test_state_machines_invoke_exactly_the_functions_their_definitions_name(template):
    by_role = statements_by_role(template)
    for logical_id in ("RemediationStateMachine", "ApprovalStateMachine"):
        role_id = template["Resources"][logical_id]["Properties"]["RoleArn"]["Fn::GetAtt"][0]
        (invoke,) = _granting(by_role[role_id], "lambda:")
        definition = json.dumps(template["Resources"][logical_id]["Properties"]["DefinitionString"])
        named = {fn for fn in FUNCTIONS if json.dumps({"Fn::GetAtt": [fn, "Arn"]}) in definition}

        assert {r["Fn::GetAtt"][0] for r in as_list(invoke["Resource"])} == named


def _training_policy(template: dict[str, Any]) -> dict[str, Any]:
    (policy,) = (
        p
        for p in resources_of_type(template, "AWS::IAM::ManagedPolicy").values()
        if "Approver" not in json.dumps(p["Properties"].get("Description", ""))
        and "approvers" not in json.dumps(p["Properties"].get("Description", ""))
    )
    return policy


def test_decide_describes_only_executions_of_the_approval_machine(template):
    (statement,) = _granting(statements_of_function(template, "DecideFunction"), "states:Describe")

    assert actions(statement) == {"states:DescribeExecution"}
    assert resolved(template, statement["Resource"]) == (
        APPROVAL_ARN.replace(":stateMachine:", ":execution:") + ":*"
    )


def test_every_function_may_only_append_to_the_audit_anchor(template):
    for fn in FUNCTIONS:
        granted = _granting(statements_of_function(template, fn), "logs:")
        anchor = [s for s in granted if s.get("Sid") == "AuditAnchorAppendOnly"]

        assert [actions(s) for s in anchor] == [{"logs:CreateLogStream", "logs:PutLogEvents"}]
        assert not any(
            a.startswith("logs:Delete") or "Retention" in a for s in granted for a in actions(s)
        )


def test_the_training_policy_allows_only_sdc_metrics_and_sdc_reports(template):
    policy = _training_policy(template)
    metrics, events = policy["Properties"]["PolicyDocument"]["Statement"]

    assert actions(metrics) == {"cloudwatch:PutMetricData"}
    assert metrics["Condition"] == {"StringEquals": {"cloudwatch:namespace": "SDC/Training"}}
    assert actions(events) == {"events:PutEvents"}
    assert resolved(template, events["Resource"]) == (
        "arn:aws:events:us-west-2:123456789012:event-bus/default"
    )
    assert events["Condition"] == {"StringEquals": {"events:source": "sdc.trainer"}}


def test_the_training_policy_follows_the_namespace(variant_template):
    policy = _training_policy(variant_template)
    metrics = policy["Properties"]["PolicyDocument"]["Statement"][0]

    assert metrics["Condition"] == {"StringEquals": {"cloudwatch:namespace": "ML/SDC"}}


def _approver_policy(template: dict[str, Any]) -> dict[str, Any]:
    (policy,) = (
        p
        for logical_id, p in resources_of_type(template, "AWS::IAM::ManagedPolicy").items()
        if logical_id.startswith("ApprovalApproverPolicy")
    )
    return policy


def test_the_approver_policy_starts_only_the_approval_machine(template):
    statements = _approver_policy(template)["Properties"]["PolicyDocument"]["Statement"]
    (start,) = [s for s in statements if "states:StartExecution" in actions(s)]

    assert resolved(template, start["Resource"]) == APPROVAL_ARN
    assert "Condition" not in start  # no sdc:approvers in this context: anyone it is attached to


def test_the_approver_policy_may_invoke_the_page_function_and_no_other(template):
    """The page is a custom widget: the console invokes its function with the viewer's own
    credentials, so an approver sees it only with lambda:InvokeFunction on it."""
    statements = _approver_policy(template)["Properties"]["PolicyDocument"]["Statement"]
    lambdas = [s for s in statements if any(a.startswith("lambda:") for a in actions(s))]

    (invoke,) = lambdas
    assert (invoke["Effect"], actions(invoke)) == ("Allow", {"lambda:InvokeFunction"})
    assert invoke["Resource"] == {"Fn::GetAtt": [PAGE.logical_id, "Arn"]}
    assert "Condition" not in invoke  # no sdc:approvers in this context


def test_the_approver_policy_is_limited_to_the_approver_patterns(lambda_asset):
    from sdc_remediation.infra.stack.synth import synthesize_once

    patterns = ["arn:aws:iam::111122223333:role/SdcApprover*"]
    template = synthesize_once(
        {"sdc:approvers": patterns, "sdc:approvalsRequired": 2}, code_asset=lambda_asset
    ).template

    for statement in _approver_policy(template)["Properties"]["PolicyDocument"]["Statement"]:
        if statement["Effect"] == "Allow":
            limit = statement["Condition"]["StringLike"]
            assert limit == {"aws:PrincipalArn": patterns}


INCIDENTS = "sdc-incidents"
WAITING = "sdc-ml-cluster-1-i-0aa00000000000001-20261130T081504"
APPROVER = "arn:aws:iam::111122223333:role/SdcApprover-oncall"


class ApproverReads:
    """A DynamoDB client that records the reads the incidents store makes and finds nothing."""

    def __init__(self) -> None:
        self.calls: list[Call] = []

    def get_item(self, **params: Any) -> dict[str, Any]:
        self.calls.append(Call("approver", "dynamodb", "GetItem", params))
        return {}


def approver_answers(template: dict[str, Any], read: Callable[[DynamoIncidentStore], object]):
    """IAM's answer to each read `read` makes through the incidents store, for a principal
    with the synthesized `ApproverPolicy` attached (the grants evaluator)."""
    resolve = Resolver(template)
    resolve.refs["IncidentsTable"] = INCIDENTS
    resolve.attrs[("IncidentsTable", "Arn")] = (
        f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{INCIDENTS}"
    )
    (statements,) = [
        found
        for logical_id, found in managed_policy_statements(template, resolve).items()
        if logical_id.startswith("ApprovalApproverPolicy")
    ]
    client = ApproverReads()
    read(DynamoIncidentStore(INCIDENTS, lambda: client))
    principal = (("aws:PrincipalArn", (APPROVER,)),)
    return [
        (dict(need.context)["dynamodb:LeadingKeys"][0], allowed(statements, need))
        for call in client.calls
        for need in required(call, {}, {INCIDENTS: "pk"})
        for need in [Need(need.action, need.resource, need.context + principal)]
    ]


def test_an_approver_may_read_the_incident(template):
    answers = approver_answers(template, lambda store: store.get(WAITING))

    assert answers == [(f"INCIDENT#{WAITING}", True)]


def test_an_approver_may_not_read_the_task_token_the_pipeline_keeps(template):
    answers = approver_answers(template, lambda store: store.task_token(WAITING))

    assert answers[0] == (f"TOKEN#{WAITING}", False)


def test_approvers_limited_by_pattern_read_the_incident_and_never_the_task_token(lambda_asset):
    from sdc_remediation.infra.stack.synth import synthesize_once

    patterns = ["arn:aws:iam::111122223333:role/SdcApprover*"]
    template = synthesize_once(
        {"sdc:approvers": patterns, "sdc:approvalsRequired": 2}, code_asset=lambda_asset
    ).template

    answers = approver_answers(
        template, lambda store: (store.get(WAITING), store.task_token(WAITING))
    )

    assert answers[:2] == [(f"INCIDENT#{WAITING}", True), (f"TOKEN#{WAITING}", False)]


def test_only_the_scheduled_audit_check_scans_the_audit_table(template):
    assert _holders(template, "dynamodb:Scan") == {"VerifyAuditFunction"}


@pytest.mark.parametrize(
    ("function_id", "denied"),
    [
        ("OpenIncidentFunction", ["decision#*"]),
        ("DecideFunction", ["event#*"]),
        ("ReplaceNodeFunction", ["event#*", "decision#*"]),
    ],
)
def test_a_function_may_not_write_audit_subjects_it_never_audits(template, function_id, denied):
    (deny,) = [
        s
        for s in statements_of_function(template, function_id)
        if s.get("Sid") == "AuditSubjectsNotItsOwn"
    ]

    assert (deny["Effect"], actions(deny)) == ("Deny", {"dynamodb:PutItem"})
    assert deny["Condition"] == {"ForAnyValue:StringLike": {"dynamodb:LeadingKeys": denied}}


class PageReads:
    """A DynamoDB client that records the queries the page's reader makes and finds nothing."""

    def __init__(self) -> None:
        self.calls: list[Call] = []

    def query(self, **params: Any) -> dict[str, Any]:
        self.calls.append(Call(PAGE.module, "dynamodb", "Query", params))
        return {"Items": []}


def page_answers(template: dict[str, Any], calls: list[Call]) -> list[tuple[str, bool]]:
    """IAM's answer to each call, for the page function's synthesized role."""
    resolve = Resolver(template)
    resolve.refs["IncidentsTable"] = INCIDENTS
    resolve.attrs[("IncidentsTable", "Arn")] = (
        f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{INCIDENTS}"
    )
    statements = function_statements(template, resolve)[PAGE.module]
    return [
        (need.action, allowed(statements, need))
        for call in calls
        for need in required(call, {}, {INCIDENTS: "pk"})
    ]


def test_the_page_s_role_allows_every_read_its_reader_makes(template):
    client = PageReads()

    assert DynamoOpenIncidents(INCIDENTS, lambda: client).open_incidents() == []

    assert len(client.calls) == len([s for s in IncidentState if not s.terminal])
    assert set(page_answers(template, client.calls)) == {("dynamodb:Query", True)}


def test_the_page_s_role_may_not_read_a_task_token_or_any_item_of_the_table(template):
    token = Call(
        PAGE.module,
        "dynamodb",
        "GetItem",
        {"TableName": INCIDENTS, "Key": {"pk": {"S": f"TOKEN#{WAITING}"}, "sk": {"S": "TASK"}}},
    )
    on_table = Call(PAGE.module, "dynamodb", "Query", {"TableName": INCIDENTS})
    scan = Call(PAGE.module, "dynamodb", "Scan", {"TableName": INCIDENTS})

    assert page_answers(template, [token, on_table, scan]) == [
        ("dynamodb:GetItem", False),
        ("dynamodb:Query", False),
        ("dynamodb:Scan", False),
    ]
