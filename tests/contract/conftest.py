"""Each storage port's contract, run twice: on the in-memory fake the unit tests use and on the
port's DynamoDB adapter in moto, with the tables created from the synthesized template.

The template is synthesized once per session (the local run's, cached in-process, so suites that
stand the stack up share it); each test module gets one moto account with the tables made from
it, and each DynamoDB case starts from empty tables. The ports kept on the incidents table share its
state: a case that asks for two of them (a create that takes a guard slot, and the guard's
state) gets both on the same fake, or both adapters on the same table. A case that passes on
one implementation and fails on the other is the fake drifting from DynamoDB, or the adapter
from its port.
"""

from __future__ import annotations

import os

os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import boto3
import pytest
from moto import mock_aws

from sdc_remediation.infra.local.memory import InMemoryAuditLog, InMemoryIncidentStore
from sdc_remediation.infra.local.template import create_tables
from sdc_remediation.lambdas.adapters._aws import DynamoTable
from sdc_remediation.lambdas.adapters.dynamodb.audit import DynamoAuditLog
from sdc_remediation.lambdas.adapters.dynamodb.guard import DynamoGuardStore
from sdc_remediation.lambdas.adapters.dynamodb.history import DynamoHistoryStore
from sdc_remediation.lambdas.adapters.dynamodb.incidents import DynamoIncidentStore
from sdc_remediation.lambdas.adapters.dynamodb.reports import DynamoReportStore
from sdc_remediation.lambdas.logic.ports import (
    AuditLog,
    GuardStore,
    HistoryStore,
    IncidentStore,
    ReportStore,
)

REGION = "us-west-2"
INCIDENTS_TABLE = "IncidentsTable"
AUDIT_TABLE = "AuditTable"
"""Logical ids of the template's tables (infra/stack/storage.py fixes them)."""

T = TypeVar("T", bound=DynamoTable)

FAKE_CREDENTIALS = {
    "AWS_DEFAULT_REGION": REGION,
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}


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
    from sdc_remediation.infra.local.run import (
        synthesized_template,  # CDK loads only when a case needs it
    )

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


@pytest.fixture
def empty_tables(tables: Tables) -> Tables:
    """The module's tables, emptied once for the case (however many ports it asks for)."""
    tables.truncate()
    return tables


@pytest.fixture
def fake_table() -> InMemoryIncidentStore:
    """The fake of the incidents table: one per case, behind every port the case asks for."""
    return InMemoryIncidentStore()


def _on_table(request: pytest.FixtureRequest, logical_id: str, adapter: type[T]) -> T:
    """`adapter` on the emptied table `logical_id`. Asked for lazily: the fake's cases need
    neither the synth nor moto."""
    found: Tables = request.getfixturevalue("empty_tables")
    return adapter(found.names[logical_id], lambda: found.client)


@pytest.fixture
def incidents(impl: str, request: pytest.FixtureRequest) -> IncidentStore:
    if impl == "fake":
        return request.getfixturevalue("fake_table")
    return _on_table(request, INCIDENTS_TABLE, DynamoIncidentStore)


@pytest.fixture
def reports(impl: str, request: pytest.FixtureRequest) -> ReportStore:
    if impl == "fake":
        return request.getfixturevalue("fake_table")
    return _on_table(request, INCIDENTS_TABLE, DynamoReportStore)


@pytest.fixture
def guard(impl: str, request: pytest.FixtureRequest) -> GuardStore:
    if impl == "fake":
        return request.getfixturevalue("fake_table")
    return _on_table(request, INCIDENTS_TABLE, DynamoGuardStore)


@pytest.fixture
def history(impl: str, request: pytest.FixtureRequest) -> HistoryStore:
    if impl == "fake":
        return request.getfixturevalue("fake_table")
    return _on_table(request, INCIDENTS_TABLE, DynamoHistoryStore)


@pytest.fixture
def audit(impl: str, request: pytest.FixtureRequest) -> AuditLog:
    if impl == "fake":
        return InMemoryAuditLog()
    return _on_table(request, AUDIT_TABLE, DynamoAuditLog)
