"""The incidents table and the audit table on moto, laid out as docs/pipeline.md says.

What the storage ports promise (locks, slots, versions, reports, audit seqs) is checked on the
adapter and the in-memory fake alike by tests/contract; this file keeps the layout itself and
the audit chain read back through the logic."""

from __future__ import annotations

import json

import pytest

from sdc_remediation.lambdas.adapters._aws import to_item
from sdc_remediation.lambdas.adapters.dynamodb.audit import DynamoAuditLog
from sdc_remediation.lambdas.adapters.dynamodb.incidents import DynamoIncidentStore
from sdc_remediation.lambdas.logic.core.audit import GENESIS, seal, verify_chain
from sdc_remediation.lambdas.models.incident import Incident, IncidentState, task_token_digest
from tests.integration.conftest import (
    AUDIT_TABLE,
    INCIDENTS_TABLE,
    SESSION,
    create_audit_table,
    create_incidents_table,
)

CLUSTER = "ml-cluster-1"
INSTANCE = "i-0abc1234def567890"


@pytest.fixture
def dynamodb(aws_env):
    client = SESSION.client("dynamodb")
    create_incidents_table(client)
    create_audit_table(client)
    return client


@pytest.fixture
def store(dynamodb) -> DynamoIncidentStore:
    return DynamoIncidentStore(INCIDENTS_TABLE, lambda: dynamodb)


@pytest.fixture
def audit(dynamodb) -> DynamoAuditLog:
    return DynamoAuditLog(AUDIT_TABLE, lambda: dynamodb)


def incident(incident_id: str = "sdc-1", **changes) -> Incident:
    values = {
        "incident_id": incident_id,
        "cluster_name": CLUSTER,
        "instance_id": INSTANCE,
        "state": IncidentState.OPENED,
        "created_at": "2026-11-30T08:15:05+00:00",
        "updated_at": "2026-11-30T08:15:05+00:00",
        "evidence": [{"kind": "alarm", "key": "alarm:e1", "step": 30, "window": [21, 30]}],
    }
    values.update(changes)
    return Incident(**values)


def test_creating_an_incident_writes_it_and_its_open_lock(store, dynamodb):
    store.create(incident())

    lock = dynamodb.get_item(
        TableName=INCIDENTS_TABLE,
        Key={"pk": {"S": f"OPEN#{CLUSTER}#{INSTANCE}"}, "sk": {"S": "LOCK"}},
    )["Item"]
    assert lock["incident_id"] == {"S": "sdc-1"}
    assert store.get("sdc-1") == incident()


def test_incidents_are_listed_by_state_through_the_gsi(store, dynamodb):
    store.create(incident())

    found = dynamodb.query(
        TableName=INCIDENTS_TABLE,
        IndexName="by_state",
        KeyConditionExpression="#s = :s",
        ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={":s": {"S": "opened"}},
    )["Items"]

    assert [i["incident_id"]["S"] for i in found] == ["sdc-1"]


TOKEN = "AAAAtask-token-of-the-waiting-approval"
TOKEN_KEY = {"pk": {"S": "TOKEN#sdc-1"}, "sk": {"S": "TASK"}}
INCIDENT_KEY = {"pk": {"S": "INCIDENT#sdc-1"}, "sk": {"S": "META"}}


def waiting() -> Incident:
    return incident(
        state=IncidentState.AWAITING_APPROVAL, task_token_sha256=task_token_digest(TOKEN)
    )


def test_the_task_token_is_an_item_of_its_own_that_the_by_state_index_never_lists(store, dynamodb):
    store.create(waiting())

    store.keep_task_token("sdc-1", TOKEN)

    kept = dynamodb.get_item(TableName=INCIDENTS_TABLE, Key=TOKEN_KEY)["Item"]
    assert kept == {**TOKEN_KEY, "task_token": {"S": TOKEN}}
    record = dynamodb.get_item(TableName=INCIDENTS_TABLE, Key=INCIDENT_KEY)["Item"]
    assert "task_token" not in record
    assert record["task_token_sha256"] == {"S": task_token_digest(TOKEN)}
    listed = dynamodb.scan(TableName=INCIDENTS_TABLE, IndexName="by_state")["Items"]
    assert [i["pk"]["S"] for i in listed] == ["INCIDENT#sdc-1"]


def legacy_item() -> dict:
    """An incident written before the token moved out: the token an attribute of it."""
    record = {**incident(state=IncidentState.AWAITING_APPROVAL).to_record(), "task_token": TOKEN}
    del record["task_token_sha256"]
    return to_item({"pk": "INCIDENT#sdc-1", "sk": "META", **record})


def test_a_legacy_incident_reads_with_its_tokens_digest_and_gives_its_token(store, dynamodb):
    dynamodb.put_item(TableName=INCIDENTS_TABLE, Item=legacy_item())

    loaded = store.get("sdc-1")

    assert loaded is not None and loaded.task_token_sha256 == task_token_digest(TOKEN)
    assert TOKEN not in json.dumps(loaded.to_record())
    assert store.task_token("sdc-1") == TOKEN


def test_saving_a_legacy_incident_moves_its_token_to_the_token_item(store, dynamodb):
    dynamodb.put_item(TableName=INCIDENTS_TABLE, Item=legacy_item())
    loaded = store.get("sdc-1")
    assert loaded is not None

    store.save(loaded)

    record = dynamodb.get_item(TableName=INCIDENTS_TABLE, Key=INCIDENT_KEY)["Item"]
    assert "task_token" not in record
    assert record["task_token_sha256"] == {"S": task_token_digest(TOKEN)}
    kept = dynamodb.get_item(TableName=INCIDENTS_TABLE, Key=TOKEN_KEY)["Item"]
    assert kept["task_token"] == {"S": TOKEN}


def test_saving_a_legacy_incident_leaves_a_newer_kept_token_alone(store, dynamodb):
    dynamodb.put_item(TableName=INCIDENTS_TABLE, Item=legacy_item())
    store.keep_task_token("sdc-1", "AAAAa-newer-request")
    loaded = store.get("sdc-1")
    assert loaded is not None

    store.save(loaded)

    assert store.task_token("sdc-1") == "AAAAa-newer-request"


def entry(seq: int, prev_hash: str, **details):
    return seal(
        incident_id="sdc-1",
        seq=seq,
        at=f"2026-11-30T08:15:0{seq}+00:00",
        actor="test",
        action=f"step_{seq}",
        details=details,
        request_ids=["req"],
        prev_hash=prev_hash,
    )


def test_audit_entries_read_back_in_order_and_verify(audit):
    first = entry(1, GENESIS, step=30, ranks=[13], window=None, note="ünïcode", ratio=0.25)
    second = entry(2, first.hash, nested={"a": {"b": [1, 2, {"c": True}]}})
    audit.append(second)
    audit.append(first)

    stored = audit.entries("sdc-1")

    assert [e.seq for e in stored] == [1, 2]
    assert audit.last("sdc-1") == second
    assert verify_chain(stored).ok


def test_an_incidents_telemetry_record_round_trips_with_its_fractions_and_findings(store):
    from sdc_remediation.lambdas.models.telemetry import TelemetryFinding, TelemetryRecord

    record = TelemetryRecord(
        state="signal",
        summary="hardware signal: XID 79 at 08:03:15 UTC on GPU-0000000d (GPU 5)",
        queried_at="2026-11-30T08:20:00+00:00",
        workspace="ws-0fc3b6e2-7d41-4a9b-8c55-2e1f0a9d3b77",
        dashboard=None,
        window_start="2026-11-30T07:14:30+00:00",
        window_end="2026-11-30T08:17:15+00:00",
        step_seconds=15,
        gpu_uuids=("GPU-0000000d",),
        findings=(
            TelemetryFinding(
                "xid",
                "signal",
                "XID 79 at 08:03:15 UTC",
                "GPU-0000000d",
                "5",
                "2026-11-30T08:03:15+00:00",
                79,
                "DCGM_FI_DEV_XID_ERRORS",
            ),
            TelemetryFinding("ecc_sbe", "signal", "rose by 2.5", value=2.5),
        ),
        context=("hottest GPU temperature 61 °C",),
        not_exported=("NVLink replays",),
        series=6,
        seconds=0.042,
    )
    store.create(incident(telemetry=record))

    assert store.get("sdc-1").telemetry == record


def test_incidents_in_a_state_come_from_the_index_oldest_first_without_other_items(store):
    store.create(incident("sdc-b", state=IncidentState.AWAITING_APPROVAL, instance_id="i-0b"))
    store.create(
        incident(
            "sdc-a",
            state=IncidentState.AWAITING_APPROVAL,
            instance_id="i-0a",
            created_at="2026-11-30T08:00:00+00:00",
        )
    )
    store.create(incident("sdc-c", state=IncidentState.OPENED, instance_id="i-0c"))

    waiting = store.in_state(IncidentState.AWAITING_APPROVAL)

    assert [i.incident_id for i in waiting] == ["sdc-a", "sdc-b"]
    assert [i.incident_id for i in store.in_state(IncidentState.REPLACED)] == []
