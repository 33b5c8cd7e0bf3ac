"""The pause switch: one SSM String parameter an operator flips without a deploy.

    aws ssm put-parameter --overwrite --name /SdcRemediation/paused --value true    # pause
    aws ssm put-parameter --overwrite --name /SdcRemediation/paused --value false   # resume

The functions that act (open_incident, store_report, start_health_check, replace_node) read it
on every call with `ssm:GetParameter` on this one ARN. `true`, any unknown value, or a read
failure count as paused: new incidents are recorded as `held`, nothing acts.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_iam as iam
from aws_cdk import aws_ssm as ssm
from constructs import Construct


@dataclass(frozen=True)
class PauseSwitchProps:
    parameter_name: str
    """The SSM parameter's name, starting with `/` (`Settings.pause_parameter_name`)."""


class PauseSwitch(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, props: PauseSwitchProps) -> None:
        super().__init__(scope, construct_id)
        self.parameter = ssm.StringParameter(
            self,
            "Parameter",
            parameter_name=props.parameter_name,
            string_value="false",
            description="SDC remediation pause switch: true = new incidents are held and "
            "nothing acts; false = running. Flip it without a deploy.",
        )
        cfn = self.parameter.node.default_child
        assert isinstance(cfn, ssm.CfnParameter)
        cfn.override_logical_id("PauseSwitchParameter")

    @property
    def name(self) -> str:
        return self.parameter.parameter_name

    def grant_read(self, grantee: iam.IGrantable) -> None:
        """`ssm:GetParameter` on this one parameter: nothing else (no GetParameters,
        GetParameterHistory or DescribeParameters, which `grant_read` would add)."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadPauseSwitch",
                actions=["ssm:GetParameter"],
                resources=[self.parameter.parameter_arn],
            )
        )
