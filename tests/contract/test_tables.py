"""The tables the contract runs on are the template's: nothing about them is copied by hand."""

from __future__ import annotations

from typing import Any

import pytest

from sdc_remediation.infra.stack.template import resources_of_type
from tests.contract.conftest import AUDIT_TABLE, INCIDENTS_TABLE, Tables


@pytest.mark.parametrize("logical_id", [INCIDENTS_TABLE, AUDIT_TABLE])
def test_each_table_has_the_templates_keys_indexes_and_ttl(
    template: dict[str, Any], tables: Tables, logical_id: str
):
    declared = resources_of_type(template, "AWS::DynamoDB::Table")[logical_id]["Properties"]
    name = tables.names[logical_id]

    described = tables.client.describe_table(TableName=name)["Table"]
    ttl = tables.client.describe_time_to_live(TableName=name)["TimeToLiveDescription"]

    assert described["KeySchema"] == declared["KeySchema"]
    assert _sorted(described["AttributeDefinitions"]) == _sorted(declared["AttributeDefinitions"])
    assert _indexes(described) == _indexes(declared)
    declared_ttl = declared.get("TimeToLiveSpecification", {})
    assert ttl.get("AttributeName") == declared_ttl.get("AttributeName")
    assert (ttl["TimeToLiveStatus"] == "ENABLED") == bool(declared_ttl.get("Enabled"))


def test_the_contract_covers_every_table_of_the_template(template: dict[str, Any]):
    assert set(resources_of_type(template, "AWS::DynamoDB::Table")) == {
        INCIDENTS_TABLE,
        AUDIT_TABLE,
    }


def _sorted(definitions: list[dict[str, str]]) -> list[dict[str, str]]:
    return sorted(definitions, key=lambda d: d["AttributeName"])


def _indexes(table: dict[str, Any]) -> dict[str, Any]:
    return {
        g["IndexName"]: (g["KeySchema"], g["Projection"]["ProjectionType"])
        for g in table.get("GlobalSecondaryIndexes", [])
    }
