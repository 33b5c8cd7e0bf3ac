"""Where a deployment is: its stack's Outputs (docs/deploy.md, "What gets created"), read from
CloudFormation or from a JSON file. The operator CLI finds the tables and the approval state
machine through them, so it needs no setting of its own.

Importing this module loads neither the CDK nor the Lambda runtime libraries.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from botocore.exceptions import ClientError

from lambdas.models.settings import Settings

DEFAULT_STACK: Final = "SdcRemediation"

INCIDENTS_TABLE: Final = "IncidentsTableName"
AUDIT_TABLE: Final = "AuditTableName"
APPROVAL_STATE_MACHINE: Final = "ApprovalStateMachineArn"
NOTIFICATION_TOPIC: Final = "NotificationTopicArn"
PAUSE_PARAMETER: Final = "PauseParameterName"
DRY_RUN: Final = "DryRun"
DASHBOARD_URL: Final = "DashboardUrl"
RECONCILE_FUNCTION: Final = "ReconcileFunctionName"
AUDIT_ANCHOR: Final = "AuditAnchorLogGroupName"
DEAD_LETTER_QUEUES: Final = {
    "UndeliveredEventsQueueUrl": "undelivered events",
    "FailedInvocationsQueueUrl": "failed alarms",
    "FailedReportsQueueUrl": "failed reports",
}
"""The dead-letter queues' URL outputs, and what `sdc status` calls them."""
OUTPUT_NAMES: Final = frozenset(
    {
        INCIDENTS_TABLE,
        AUDIT_TABLE,
        APPROVAL_STATE_MACHINE,
        NOTIFICATION_TOPIC,
        PAUSE_PARAMETER,
        DRY_RUN,
        DASHBOARD_URL,
        RECONCILE_FUNCTION,
        AUDIT_ANCHOR,
        *DEAD_LETTER_QUEUES,
        "ApproverPolicyArn",
        "ApprovalStateMachineConsole",
        "RemediationStateMachineConsole",
        "TrainingPolicyArn",
    }
)
"""The stack's CfnOutput ids (infra/stack/stack.py)."""


class DeploymentError(Exception):
    """The deployment cannot be found, or lacks an output: a one-line message for the user."""


@dataclass(frozen=True)
class Deployment:
    source: str
    """Where the outputs came from, for messages: "stack SdcRemediation", "outputs file x"."""
    outputs: Mapping[str, str]

    def output(self, name: str) -> str:
        value = self.outputs.get(name)
        if not value:
            raise DeploymentError(f"{self.source} has no output {name}")
        return value

    @property
    def incidents_table(self) -> str:
        return self.output(INCIDENTS_TABLE)

    @property
    def audit_table(self) -> str:
        return self.output(AUDIT_TABLE)

    @property
    def approval_state_machine_arn(self) -> str:
        return self.output(APPROVAL_STATE_MACHINE)

    def optional(self, name: str) -> str | None:
        """An output that older deployments may not have."""
        return self.outputs.get(name) or None

    def settings(self) -> Settings:
        """What the approval card builder reads (tables, topic, approval ARN); the rest keeps
        the defaults."""
        return Settings(
            incidents_table=self.incidents_table,
            audit_table=self.audit_table,
            topic_arn=self.outputs.get(NOTIFICATION_TOPIC) or "",
            approval_state_machine_arn=self.outputs.get(APPROVAL_STATE_MACHINE) or None,
        )


def from_stack(cloudformation: Any, stack_name: str) -> Deployment:
    """The Outputs of `stack_name` (DescribeStacks with a cloudformation client)."""
    try:
        response = cloudformation.describe_stacks(StackName=stack_name)
    except ClientError as err:
        message = str(err.response.get("Error", {}).get("Message", ""))
        if "does not exist" in message:
            region = cloudformation.meta.region_name
            raise DeploymentError(
                f"stack {stack_name} not found in {region}: pass --region, --stack NAME, "
                "or --outputs FILE"
            ) from err
        raise
    stacks = response.get("Stacks") or []
    if not stacks:
        raise DeploymentError(f"stack {stack_name} not found")
    outputs = {o["OutputKey"]: str(o["OutputValue"]) for o in stacks[0].get("Outputs") or []}
    return Deployment(f"stack {stack_name}", outputs)


def from_file(path: Path, stack_name: str = DEFAULT_STACK) -> Deployment:
    """A JSON object of output names → values. The file `cdk deploy --outputs-file` writes
    (the same object nested under the stack name) is read too."""
    source = f"outputs file {path}"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise DeploymentError(f"cannot read {source}: {err.strerror or err}") from err
    except ValueError as err:
        raise DeploymentError(f"{source} is not JSON: {err}") from err
    if isinstance(data, dict) and not OUTPUT_NAMES & data.keys():
        nested = [v for v in data.values() if isinstance(v, dict)]
        if isinstance(data.get(stack_name), dict):
            data = data[stack_name]
        elif len(nested) == 1:
            data = nested[0]
    if not isinstance(data, dict) or not OUTPUT_NAMES & data.keys():
        raise DeploymentError(
            f"{source} holds none of the stack's outputs ({', '.join(sorted(OUTPUT_NAMES))})"
        )
    return Deployment(source, {str(k): str(v) for k, v in data.items() if v is not None})
