"""A synthesized CloudFormation template, taken apart: resources by type, each function's
handler, placeholder ARNs, and the one resolver of the intrinsic functions CDK emits (`Ref`,
`Fn::GetAtt`, `Fn::Join`, `Fn::Sub`, `Fn::Select`, `Fn::Split`).

    definitions = state_machine_definitions(template)      # placeholder ARNs
    definitions["RemediationStateMachine"]                  # the ASL string, as deployed
    function_handlers(template)["OpenIncidentFunction"]     # "sdc_remediation.lambdas.handlers.open_incident.handler"

`state_machine_definitions` resolves with a mapping of logical id → ARN (default:
`placeholder_arns`, where a function's ARN ends in `function:<logical id>`), so the strings are
exactly what CloudFormation would deploy, with the ARNs of wherever they run (moto, say).
Logical ids of functions and state machines are fixed (`OpenIncidentFunction`,
`RemediationStateMachine`, ...), so the mapping is deterministic. The local run
(`sdc_remediation.infra.local.template`) resolves against the resources it creates in moto; `sdc_remediation.infra.stack.validate`
against placeholders. Nothing here loads CDK.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

ACCOUNT: Final = "123456789012"
REGION: Final = "us-west-2"
PARTITION: Final = "aws"
"""The placeholder account, region and partition: of the local run's moto account, and of
every template resolved without one of its own."""
PSEUDO = {
    "AWS::AccountId": ACCOUNT,
    "AWS::Region": REGION,
    "AWS::Partition": PARTITION,
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::StackName": "SdcRemediation",
    "AWS::NoValue": None,
}


class TemplateError(Exception):
    """The template holds something the local run cannot stand up; the message says what."""


def resources_of_type(template: Mapping[str, Any], resource_type: str) -> dict[str, Any]:
    return {
        logical_id: resource
        for logical_id, resource in template.get("Resources", {}).items()
        if resource.get("Type") == resource_type
    }


DEPLOY_TIME_FUNCTION: Final = "AWS679f53fac002430cb0da5b7982bd2287"
"""The construct id (and logical id prefix) CDK gives the one function behind every
`AwsCustomResource` of a stack: it runs only while the stack deploys (the hardware alerts' alert
manager definitions), so it is no pipeline function."""


def pipeline_functions(template: Mapping[str, Any]) -> dict[str, Any]:
    """The pipeline's Lambda functions: every function but the deploy-time one."""
    return {
        logical_id: resource
        for logical_id, resource in resources_of_type(template, "AWS::Lambda::Function").items()
        if not logical_id.startswith(DEPLOY_TIME_FUNCTION)
    }


def function_handlers(template: Mapping[str, Any]) -> dict[str, str]:
    """Pipeline function logical id → handler string (`sdc_remediation.lambdas.handlers.<module>.handler`)."""
    return {
        logical_id: resource["Properties"]["Handler"]
        for logical_id, resource in pipeline_functions(template).items()
    }


def placeholder_arns(
    template: Mapping[str, Any],
    *,
    partition: str = PARTITION,
    region: str = REGION,
    account: str = ACCOUNT,
) -> dict[str, str]:
    """ARNs for the functions (`...:function:<logical id>`) and state machines
    (`...:stateMachine:<name>`) of the template."""
    arns = {
        logical_id: f"arn:{partition}:lambda:{region}:{account}:function:{logical_id}"
        for logical_id in resources_of_type(template, "AWS::Lambda::Function")
    }
    for logical_id, resource in resources_of_type(
        template, "AWS::StepFunctions::StateMachine"
    ).items():
        name = resource["Properties"].get("StateMachineName", logical_id)
        arns[logical_id] = f"arn:{partition}:states:{region}:{account}:stateMachine:{name}"
    return arns


class Resolver:
    """Evaluates the intrinsic functions CDK emits, against the physical ids known so far."""

    def __init__(
        self,
        template: Mapping[str, Any],
        *,
        partition: str = PARTITION,
        region: str = REGION,
        account: str = ACCOUNT,
    ) -> None:
        self.template = template
        self.pseudo: dict[str, Any] = {
            **PSEUDO,
            "AWS::Partition": partition,
            "AWS::Region": region,
            "AWS::AccountId": account,
        }
        self.refs: dict[str, Any] = {}
        """Logical id → what `Ref` gives."""
        self.attrs: dict[tuple[str, str], Any] = {}
        """(logical id, attribute) → what `Fn::GetAtt` gives."""

    @classmethod
    def of_arns(
        cls, template: Mapping[str, Any], arns: Mapping[str, str], **where: str
    ) -> Resolver:
        """A resolver where `arns` maps a logical id to its Ref and its `Arn`, and
        `<logical id>.<attribute>` to any other attribute."""
        resolver = cls(template, **where)
        for key, value in arns.items():
            logical, _, attribute = key.partition(".")
            if attribute:
                resolver.attrs[(logical, attribute)] = value
            else:
                resolver.refs[logical] = value
                resolver.attrs[(logical, "Arn")] = value
        return resolver

    def __call__(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self(item) for item in node]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, value),) = node.items()
            if key == "Ref":
                return self._ref(value)
            if key == "Fn::GetAtt":
                logical, attr = value if isinstance(value, list) else value.split(".", 1)
                if (logical, attr) not in self.attrs:
                    raise TemplateError(f"Fn::GetAtt {logical}.{attr} is not known locally")
                return self.attrs[(logical, attr)]
            if key == "Fn::Join":
                sep, parts = value
                return sep.join(str(self(p)) for p in self(parts))
            if key == "Fn::Sub":
                return self._sub(value)
            if key == "Fn::Select":
                index, items = value
                return self(items)[int(self(index))]
            if key == "Fn::Split":
                sep, text = value
                return str(self(text)).split(sep)
        return {k: self(v) for k, v in node.items()}

    def _ref(self, name: str) -> Any:
        if name in self.pseudo:
            return self.pseudo[name]
        if name in self.refs:
            return self.refs[name]
        parameters = self.template.get("Parameters", {})
        if name in parameters and "Default" in parameters[name]:
            return parameters[name]["Default"]
        raise TemplateError(f"Ref {name} is not known locally")

    def _sub(self, value: Any) -> str:
        text, variables = (value, {}) if isinstance(value, str) else (value[0], self(value[1]))

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in variables:
                return str(variables[name])
            if "." in name:
                logical, attr = name.split(".", 1)
                return str(self.attrs[(logical, attr)])
            return str(self._ref(name))

        return re.sub(r"\$\{([^}!]+)\}", replace, text)


def state_machine_definitions(
    template: Mapping[str, Any],
    arns: Mapping[str, str] | None = None,
    *,
    partition: str = PARTITION,
    region: str = REGION,
    account: str = ACCOUNT,
) -> dict[str, str]:
    """State machine logical id (`RemediationStateMachine`, `ApprovalStateMachine`) → its
    DefinitionString with every reference resolved (`arns` defaults to `placeholder_arns`)."""
    where = {"partition": partition, "region": region, "account": account}
    arns = placeholder_arns(template, **where) if arns is None else arns
    resolve = Resolver.of_arns(template, arns, **where)
    definitions = {}
    for logical_id, resource in resources_of_type(
        template, "AWS::StepFunctions::StateMachine"
    ).items():
        resolved = resolve(resource["Properties"]["DefinitionString"])
        if not isinstance(resolved, str):
            raise TypeError(f"{logical_id}: DefinitionString did not resolve to a string")
        definitions[logical_id] = resolved
    return definitions
