"""Where a deployment is: its stack's Outputs (docs/deploy.md, "What gets created"), read from
CloudFormation or from a JSON file. The operator CLI finds the tables and the approval state
machine through them, so it needs no setting of its own.

Every `SdcRemediation` construct, in the standalone stack or in a team's own, publishes all its
addresses as one JSON object under the output key `SdcDeployment` (`DEPLOYMENT_OUTPUT`): a key
CDK does not hash, so `sdc` finds a construct in any stack by the stack's name. A stack holds at
most one construct (two are refused at synth). The one-output-per-address names
(`IncidentsTableName`, ...) are read where `SdcDeployment` is absent (a deployment from before
it, or a hand-written file).

Importing this module loads neither the CDK nor the Lambda runtime libraries.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from botocore.exceptions import ClientError

from sdc_remediation.infra.stack.outputs import (
    APPROVAL_STATE_MACHINE,
    AUDIT_ANCHOR,
    AUDIT_TABLE,
    DASHBOARD_URL,
    DEAD_LETTER_QUEUES,
    DEPLOYMENT_OUTPUT,
    DRY_RUN,
    INCIDENTS_TABLE,
    NOTIFICATION_TOPIC,
    OUTPUT_NAMES,
    PAUSE_PARAMETER,
    RECONCILE_FUNCTION,
)
from sdc_remediation.lambdas.models.settings import Settings

__all__ = [
    "APPROVAL_STATE_MACHINE",
    "AUDIT_ANCHOR",
    "AUDIT_TABLE",
    "DASHBOARD_URL",
    "DEAD_LETTER_QUEUES",
    "DEFAULT_STACK",
    "DEPLOYMENT_OUTPUT",
    "DRY_RUN",
    "INCIDENTS_TABLE",
    "NOTIFICATION_TOPIC",
    "OUTPUT_NAMES",
    "PAUSE_PARAMETER",
    "RECONCILE_FUNCTION",
    "Deployment",
    "DeploymentError",
    "addresses",
    "from_file",
    "from_stack",
]

DEFAULT_STACK: Final = "SdcRemediation"
"""The standalone app's stack; the output names are the construct's (`sdc_remediation.infra.stack.outputs`)."""


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


def addresses(outputs: Mapping[str, Any], source: str) -> dict[str, str] | None:
    """A stack's outputs (output key → value) as the construct's addresses: the JSON object of
    `SdcDeployment` where the stack has it, else the outputs named by `OUTPUT_NAMES`; None when
    it has neither (not a deployment of this pipeline)."""
    published = outputs.get(DEPLOYMENT_OUTPUT)
    if published is not None:
        try:
            found = json.loads(published) if isinstance(published, str) else published
        except ValueError:
            found = None
        if not isinstance(found, dict):
            raise DeploymentError(
                f"{source}: the output {DEPLOYMENT_OUTPUT} is not a JSON object of addresses"
            )
        return {str(k): str(v) for k, v in found.items() if v is not None}
    if OUTPUT_NAMES & outputs.keys():
        return {str(k): str(v) for k, v in outputs.items() if v is not None}
    return None


def from_stack(cloudformation: Any, stack_name: str | None = None) -> Deployment:
    """The addresses in the Outputs of `stack_name` (default `DEFAULT_STACK`; DescribeStacks with
    a cloudformation client): the standalone stack, or any stack that holds the construct."""
    stack_name = stack_name or DEFAULT_STACK
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
    source = f"stack {stack_name}"
    outputs = {o["OutputKey"]: str(o["OutputValue"]) for o in stacks[0].get("Outputs") or []}
    found = addresses(outputs, source)
    if found is None:
        raise DeploymentError(
            f"{source} holds no SDC remediation deployment (no output {DEPLOYMENT_OUTPUT}): "
            "pass the --stack NAME that holds the SdcRemediation construct"
        )
    return Deployment(source, found)


def from_file(path: Path, stack_name: str | None = None) -> Deployment:
    """The addresses in a JSON file: the file `cdk deploy --outputs-file` writes (stack name →
    output key → value; the stack holding the construct is picked with `stack_name`, and needs
    no picking when it is the only one), or one stack's outputs as one object."""
    source = f"outputs file {path}"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise DeploymentError(f"cannot read {source}: {err.strerror or err}") from err
    except ValueError as err:
        raise DeploymentError(f"{source} is not JSON: {err}") from err
    if not isinstance(data, dict):
        raise DeploymentError(f"{source} is not a JSON object of outputs")
    flat = addresses(data, source)
    if flat is not None:
        return Deployment(source, flat)
    stacks = {
        str(name): found
        for name, outputs in data.items()
        if isinstance(outputs, dict)
        and (found := addresses(outputs, f"stack {name} in {source}")) is not None
    }
    if stack_name is not None:
        if stack_name not in stacks:
            held = ", ".join(sorted(stacks)) or "none"
            raise DeploymentError(
                f"{source} has no deployment in stack {stack_name} (stacks with one: {held})"
            )
        return Deployment(f"stack {stack_name} in {source}", stacks[stack_name])
    if len(stacks) == 1:
        ((name, found),) = stacks.items()
        return Deployment(f"stack {name} in {source}", found)
    if stacks:
        raise DeploymentError(
            f"{source} holds deployments in stacks {', '.join(sorted(stacks))}: "
            "pick one with --stack NAME"
        )
    raise DeploymentError(
        f"{source} holds no deployment: no stack's outputs have {DEPLOYMENT_OUTPUT} or any of "
        f"{', '.join(sorted(OUTPUT_NAMES))}"
    )
