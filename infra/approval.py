"""The approval state machine (Standard): `{incident_id, decision, comment}` → decide.

Starting an execution of it is the approval: a console action, guarded by IAM
(`states:StartExecution` on this one ARN = who may approve) and recorded (execution history,
CloudTrail). See DESIGN.md §2 for why a second state machine.
"""

from __future__ import annotations

from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.definitions import approval_definition
from infra.settings import Settings
from infra.workflow import APPROVAL_LOGICAL_ID, approval_name, standard_state_machine


class ApprovalWorkflow(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        decide: lambda_.IFunction,
    ) -> None:
        super().__init__(scope, construct_id)
        self.state_machine = standard_state_machine(
            self,
            "StateMachine",
            logical_id=APPROVAL_LOGICAL_ID,
            name=approval_name(settings),
            definition=approval_definition(decide.function_arn),
            invokes=[decide],
            settings=settings,
        )
