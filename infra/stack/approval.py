"""The approval state machine (Standard): `{incident_id, decision, comment, identity_proof}` →
decide.

Starting an execution of it is the approval: a console action or `sdc approve`, guarded by IAM
(`states:StartExecution` on this one ARN = who may approve) and recorded (execution history,
CloudTrail). `decide` reads the execution back (DescribeExecution on this state machine's
executions only) to bind the decision to it. A second state machine, because the console has no
button that completes a waiting callback task, and starting an execution is one IAM can guard.

Step Functions has no resource-based policy, so who may start it is decided by the approvers'
own IAM policies: the stack offers one, `ApproverPolicy`, to attach to approvers. With
`sdc:approvers` set, its allow holds only for principals whose `aws:PrincipalArn` matches one
of the patterns, and `decide` checks the same patterns against the principal STS names.
It also lets them invoke the dashboard's page of open incidents (`incidents_page`, and no
other function): the console runs a custom widget with the viewer's own credentials.

Approvers may read an incident (GetItem) but never a task token: whoever holds the token of
the waiting approval can answer it with SendTaskSuccess, past `decide`. The pipeline keeps
each token in an item of its own under `TOKEN#` (lambdas/adapters/dynamodb/incidents.py); the
read is allowed only for partition keys outside it (`dynamodb:LeadingKeys`), and a Deny takes
the keyed reads of those items (GetItem, BatchGetItem, Query: `TOKEN_READS`) from whoever
the policy is attached to, whatever else they are granted. A Scan has no `LeadingKeys`: a
principal granted a Scan of the incidents table elsewhere can still read every item.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from sdc_remediation.infra.stack.definitions import approval_definition
from sdc_remediation.infra.stack.nag import acknowledge, acknowledge_iam_lint
from sdc_remediation.infra.stack.settings import DeploymentSettings
from sdc_remediation.infra.stack.workflow import (
    APPROVAL_LOGICAL_ID,
    approval_name,
    executions_arn,
    standard_state_machine,
)
from sdc_remediation.lambdas.adapters.dynamodb.keys import TASK_TOKEN_PREFIX

TOKEN_READS = ("dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query")
"""The reads of an item by its key (TransactGetItems is authorized as GetItem of each item):
denied to approvers on the task tokens' items."""

DESCRIBE_EXECUTION = (
    "DescribeExecution takes a Standard execution (arn:...:execution:<machine>:<name>) or an "
    "Express one; the linter expects the Express format too. The approval state machine is "
    "Standard, so its executions are the only resource type that applies, and naming them "
    "keeps the grant to this one state machine."
)


@dataclass(frozen=True)
class ApprovalWorkflowProps:
    name: str
    """The state machine's fixed name (`workflow.approval_name`)."""
    decide: lambda_.IFunction
    """The one function it invokes; it may read back the executions that invoke it."""
    incidents_table_arn: str
    """Approvers may read an incident (GetItem) before they decide, never a task token's item."""
    page: lambda_.IFunction
    """The dashboard's page of open incidents: a custom widget, which the console invokes with
    the viewer's own credentials, so approvers may invoke it (and no other function)."""
    approvers: Sequence[str]
    """ARN patterns the approver policy is limited to (`sdc:approvers`); empty: no limit."""
    log_retention_days: int

    @classmethod
    def from_settings(
        cls,
        settings: DeploymentSettings,
        *,
        decide: lambda_.IFunction,
        page: lambda_.IFunction,
        incidents_table_arn: str,
    ) -> ApprovalWorkflowProps:
        return cls(
            name=approval_name(settings.stack_name),
            decide=decide,
            page=page,
            incidents_table_arn=incidents_table_arn,
            approvers=settings.approvers,
            log_retention_days=settings.log_retention_days,
        )


class ApprovalWorkflow(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, props: ApprovalWorkflowProps
    ) -> None:
        super().__init__(scope, construct_id)
        decide = props.decide
        self.state_machine = standard_state_machine(
            self,
            "StateMachine",
            logical_id=APPROVAL_LOGICAL_ID,
            name=props.name,
            definition=approval_definition(decide.function_arn),
            invokes=[decide],
            log_retention_days=props.log_retention_days,
        )
        executions = executions_arn(self, props.name)
        every_execution = (
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:"
            f"<AWS::AccountId>:execution:{props.name}:*]"
        )
        decide.add_to_role_policy(
            iam.PolicyStatement(
                sid="BindDecisionToApproval",
                actions=["states:DescribeExecution"],
                resources=[executions],
            )
        )
        assert decide.role is not None
        decide_policy = decide.role.node.try_find_child("DefaultPolicy")
        assert isinstance(decide_policy, iam.Policy)
        acknowledge_iam_lint(
            decide_policy, "RESOURCE_MISMATCH", ["states:DescribeExecution"], DESCRIBE_EXECUTION
        )
        acknowledge(
            decide.role,
            every_execution,
            "decide describes the approval execution that invoked it, whose name the approver "
            "chose; the grant is every execution of the approval state machine, and nothing "
            "else (another state machine's execution is refused as AccessDenied).",
        )
        conditions = (
            {"StringLike": {"aws:PrincipalArn": list(props.approvers)}} if props.approvers else None
        )
        tokens = f"{TASK_TOKEN_PREFIX}*"
        not_a_token = {"ForAllValues:StringNotLike": {"dynamodb:LeadingKeys": [tokens]}}
        self.approver_policy = iam.ManagedPolicy(
            self,
            "ApproverPolicy",
            description="Attach to approvers: start the SDC approval state machine (approve, "
            "reboot, reject, reset), follow the approval execution, see the page of open "
            "incidents",
            statements=[
                iam.PolicyStatement(
                    sid="StartApproval",
                    actions=["states:StartExecution"],
                    resources=[self.state_machine.state_machine_arn],
                    conditions=conditions,
                ),
                iam.PolicyStatement(
                    sid="FollowApproval",
                    actions=["states:DescribeExecution"],
                    resources=[executions],
                    conditions=conditions,
                ),
                iam.PolicyStatement(
                    sid="ReadTheIncidentFirst",
                    actions=["dynamodb:GetItem"],
                    resources=[props.incidents_table_arn],
                    conditions={**(conditions or {}), **not_a_token},
                ),
                iam.PolicyStatement(
                    sid="SeeTheIncidentsPage",
                    actions=["lambda:InvokeFunction"],
                    resources=[props.page.function_arn],
                    conditions=conditions,
                ),
                iam.PolicyStatement(
                    sid="NeverTheTaskToken",
                    effect=iam.Effect.DENY,
                    actions=list(TOKEN_READS),
                    resources=[props.incidents_table_arn],
                    conditions={
                        "ForAnyValue:StringLike": {"dynamodb:LeadingKeys": [tokens]},
                    },
                ),
            ],
        )
        acknowledge(
            self.approver_policy,
            every_execution,
            "An approver follows the approval execution they started, whose name they chose; "
            "the grant is the executions of the approval state machine only.",
        )
        acknowledge_iam_lint(
            self.approver_policy,
            "RESOURCE_MISMATCH",
            ["states:DescribeExecution"],
            DESCRIBE_EXECUTION,
        )
