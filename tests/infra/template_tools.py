"""Small readers over a synthesized template (plain dicts), shared by the infra tests."""

from __future__ import annotations

import json
from typing import Any

from sdc_remediation.infra.stack.template import (
    Resolver,
    placeholder_arns,
    resources_of_type,
    state_machine_definitions,
)


def only(template: dict[str, Any], resource_type: str) -> tuple[str, dict[str, Any]]:
    (item,) = resources_of_type(template, resource_type).items()
    return item


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def statements_by_role(template: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Role logical id → every Allow/Deny statement of the inline policies attached to it."""
    by_role: dict[str, list[dict[str, Any]]] = {}
    for _, policy in resources_of_type(template, "AWS::IAM::Policy").items():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        for role in policy["Properties"].get("Roles", []):
            by_role.setdefault(role["Ref"], []).extend(statements)
    return by_role


def statements_of_function(template: dict[str, Any], function_id: str) -> list[dict[str, Any]]:
    role_id = template["Resources"][function_id]["Properties"]["Role"]["Fn::GetAtt"][0]
    return statements_by_role(template)[role_id]


def all_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    statements = []
    for resource_type in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        for _, policy in resources_of_type(template, resource_type).items():
            statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return statements


def actions(statement: dict[str, Any]) -> set[str]:
    return set(as_list(statement["Action"]))


def resolved(template: dict[str, Any], value: Any) -> Any:
    """`value` with Ref / GetAtt / Fn::Join resolved: placeholder ARNs for functions and state
    machines, `<logical id>` for anything else (tables, topics, keys, queues), and
    `<logical id>.<attribute>` for the attributes queues and alarms are referred by."""
    arns = placeholder_arns(template)
    everything = {logical_id: f"<{logical_id}>" for logical_id in template["Resources"]}
    attributes = {
        f"{logical_id}.{attribute}": f"<{logical_id}.{attribute}>"
        for logical_id in template["Resources"]
        for attribute in ("QueueName", "TopicName")
    }
    return Resolver.of_arns(template, {**everything, **attributes, **arns})(value)


def definition(template: dict[str, Any], logical_id: str) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(state_machine_definitions(template)[logical_id])
    return parsed


def dashboard_widgets(template: dict[str, Any]) -> list[dict[str, Any]]:
    """The widgets of the template's one dashboard: its DashboardBody (an Fn::Join of JSON text
    and references) resolved as `resolved` does, then parsed."""
    _, dashboard = only(template, "AWS::CloudWatch::Dashboard")
    body = json.loads(resolved(template, dashboard["Properties"]["DashboardBody"]))
    widgets: list[dict[str, Any]] = body["widgets"]
    return widgets


def widget_titled(template: dict[str, Any], prefix: str) -> dict[str, Any]:
    (widget,) = [
        w
        for w in dashboard_widgets(template)
        if str(w["properties"].get("title", "")).startswith(prefix)
    ]
    return widget


def deploy_outputs(template: dict[str, Any]) -> dict[str, str]:
    """The stack's outputs as `cdk deploy --outputs-file` writes them for it (output key →
    value), the values resolved to placeholders."""
    return {key: str(resolved(template, o["Value"])) for key, o in template["Outputs"].items()}
