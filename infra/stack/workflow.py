"""The remediation state machine (Standard): health check → approval → replacement → close.

Its definition is built in definitions.py; this construct gives it a log group (ALL events,
without execution data: the task token must not land in logs), X-Ray tracing, and a role that
may invoke exactly the functions the definition names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from sdc_remediation.infra.stack.definitions import REMEDIATION_STEPS, remediation_definition
from sdc_remediation.infra.stack.dependencies import depend_on_role_policy_only
from sdc_remediation.infra.stack.log_groups import retained_log_group
from sdc_remediation.infra.stack.nag import acknowledge
from sdc_remediation.infra.stack.settings import DeploymentSettings

REMEDIATION_LOGICAL_ID: Final = "RemediationStateMachine"
APPROVAL_LOGICAL_ID: Final = "ApprovalStateMachine"


def remediation_name(stack_name: str) -> str:
    return f"{stack_name}-remediation"


def approval_name(stack_name: str) -> str:
    return f"{stack_name}-approval"


def executions_arn(scope: Construct, name: str) -> str:
    """`arn:<partition>:states:<region>:<account>:execution:<name>:*`: every execution of the
    state machine called `name`."""
    return Stack.of(scope).format_arn(
        service="states",
        resource="execution",
        resource_name=f"{name}:*",
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )


def state_machine_arn(scope: Construct, name: str) -> str:
    """The ARN of the state machine called `name` in this stack's account and region.

    The state machines carry fixed names so that their ARNs are known before they exist. That
    breaks what would otherwise be a dependency cycle (remediation → request_approval, whose
    environment names the approval state machine → decide → decide's role, which may answer
    the remediation's task), and gives approvers' IAM policies a stable ARN to name."""
    return Stack.of(scope).format_arn(
        service="states",
        resource="stateMachine",
        resource_name=name,
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )


def standard_state_machine(
    scope: Construct,
    construct_id: str,
    *,
    logical_id: str,
    name: str,
    definition: Mapping[str, Any],
    invokes: Sequence[lambda_.IFunction],
    log_retention_days: int,
) -> sfn.StateMachine:
    """A Standard state machine from an ASL document, logged and traced, invoking `invokes`.

    `json.dumps`, not `Stack.to_json_string`: the latter drops `null` values (the contract's
    `"error": null`); the only tokens in the document are ARNs, which need no escaping."""
    log_group = retained_log_group(scope, f"{construct_id}Logs", log_retention_days)
    machine = sfn.StateMachine(
        scope,
        construct_id,
        state_machine_name=name,
        state_machine_type=sfn.StateMachineType.STANDARD,
        definition_body=sfn.DefinitionBody.from_string(json.dumps(definition)),
        logs=sfn.LogOptions(
            destination=log_group,
            level=sfn.LogLevel.ALL,
            include_execution_data=False,
        ),
        tracing_enabled=True,
    )
    cfn = machine.node.default_child
    assert isinstance(cfn, sfn.CfnStateMachine)
    cfn.override_logical_id(logical_id)
    machine.add_to_role_policy(
        iam.PolicyStatement(
            sid="InvokeWorkflowFunctions",
            actions=["lambda:InvokeFunction"],
            resources=[fn.function_arn for fn in invokes],
        )
    )
    depend_on_role_policy_only(machine, machine.role)
    acknowledge(
        machine.role,
        "AwsSolutions-IAM5[Resource::*]",
        "Added by CDK for logging and tracing: the CloudWatch Logs log-delivery "
        "actions (logs:CreateLogDelivery, logs:PutResourcePolicy, ...) and X-Ray "
        "(xray:PutTraceSegments, ...) support no resource-level permissions, so they "
        "need '*'. Lambda invocation names each function ARN.",
    )
    return machine


@dataclass(frozen=True)
class RemediationWorkflowProps:
    name: str
    """The state machine's fixed name (`remediation_name`)."""
    definition: Mapping[str, Any]
    """Its ASL document (`definitions.remediation_definition`)."""
    invokes: Sequence[lambda_.IFunction]
    """The functions the definition invokes: its role may invoke exactly these."""
    log_retention_days: int

    @classmethod
    def from_settings(
        cls,
        settings: DeploymentSettings,
        *,
        functions: Mapping[str, lambda_.IFunction],
        approval_state_machine_arn: str,
    ) -> RemediationWorkflowProps:
        """The definition of `settings`' waits and polls over the `REMEDIATION_STEPS` of
        `functions` (handler module → function)."""
        used = {module: functions[module] for module in REMEDIATION_STEPS}
        return cls(
            name=remediation_name(settings.stack_name),
            definition=remediation_definition(
                {module: fn.function_arn for module, fn in used.items()},
                settings,
                approval_state_machine_arn,
            ),
            invokes=tuple(used.values()),
            log_retention_days=settings.log_retention_days,
        )


class RemediationWorkflow(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, props: RemediationWorkflowProps
    ) -> None:
        super().__init__(scope, construct_id)
        self.state_machine = standard_state_machine(
            self,
            "StateMachine",
            logical_id=REMEDIATION_LOGICAL_ID,
            name=props.name,
            definition=props.definition,
            invokes=props.invokes,
            log_retention_days=props.log_retention_days,
        )
