"""Each storage port's contract, run twice: on the in-memory fake the unit tests use and on the
DynamoDB adapter in moto, with the tables created from the synthesized template.

The template is synthesized once per session (the local run's, cached in-process, so suites that
stand the stack up share it); each test module gets one moto account with the tables made from
it, and each DynamoDB case starts from empty tables. A case that passes on one implementation and
fails on the other is the fake drifting from DynamoDB, or the adapter from its port.
"""

from __future__ import annotations

import os

os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import boto3
import pytest
from moto import mock_aws

from infra.local.template import create_tables
from lambdas.adapters.dynamodb import DynamoAuditLog, DynamoIncidentStore
from lambdas.logic.ports import AuditLog, GuardStore, HistoryStore, IncidentStore, ReportStore
from tests.unit.fakes import InMemoryAuditLog, InMemoryIncidentStore

REGION = "us-west-2"
INCIDENTS_TABLE = "IncidentsTable"
AUDIT_TABLE = "AuditTable"
"""Logical ids of the template's tables (infra/storage.py fixes them)."""

FAKE_CREDENTIALS = {
    "AWS_DEFAULT_REGION": REGION,
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}


class IncidentsTable(IncidentStore, ReportStore, GuardStore, HistoryStore, Protocol):
    """Every port kept on the incidents table: what both the fake and the adapter implement."""


@dataclass
class Tables:
    """The template's tables in one moto account."""

    client: Any
    names: dict[str, str]

    def truncate(self) -> None:
        """Delete every item, so that a case sees only what it wrote."""
        for name in self.names.values():
            keys = [k["AttributeName"] for k in self._key_schema(name)]
            scan: dict[str, Any] = {"TableName": name}
            while True:
                page = self.client.scan(**scan)
                for item in page["Items"]:
                    self.client.delete_item(TableName=name, Key={k: item[k] for k in keys})
                if "LastEvaluatedKey" not in page:
                    break
                scan["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _key_schema(self, name: str) -> list[dict[str, str]]:
        return list(self.client.describe_table(TableName=name)["Table"]["KeySchema"])


@pytest.fixture(scope="session")
def template() -> dict[str, Any]:
    from infra.local.run import synthesized_template  # CDK loads only when a case needs it

    return synthesized_template()


@pytest.fixture(scope="module")
def tables(template: dict[str, Any]) -> Iterator[Tables]:
    with pytest.MonkeyPatch.context() as monkeypatch, mock_aws():
        for key, value in FAKE_CREDENTIALS.items():
            monkeypatch.setenv(key, value)
        session = boto3.session.Session(region_name=REGION)
        names = create_tables(session, template)
        yield Tables(session.client("dynamodb"), names)


@pytest.fixture(params=["fake", pytest.param("dynamodb", marks=pytest.mark.synth)])
def impl(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _dynamo_tables(request: pytest.FixtureRequest) -> Tables:
    """Asked for lazily: the fake's cases need neither the synth nor moto."""
    found: Tables = request.getfixturevalue("tables")
    found.truncate()
    return found


@pytest.fixture
def store(impl: str, request: pytest.FixtureRequest) -> IncidentsTable:
    """The incidents table's ports: the fake, or the DynamoDB adapter on empty tables."""
    if impl == "fake":
        return InMemoryIncidentStore()
    found = _dynamo_tables(request)
    return DynamoIncidentStore(found.names[INCIDENTS_TABLE], lambda: found.client)


@pytest.fixture
def audit(impl: str, request: pytest.FixtureRequest) -> AuditLog:
    if impl == "fake":
        return InMemoryAuditLog()
    found = _dynamo_tables(request)
    return DynamoAuditLog(found.names[AUDIT_TABLE], lambda: found.client)
