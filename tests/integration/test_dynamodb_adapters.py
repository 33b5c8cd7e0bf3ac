"""The incidents table and the audit table on moto, laid out as docs/pipeline.md says."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from lambdas.adapters.dynamodb import DynamoAuditLog, DynamoIncidentStore
from lambdas.logic.audit import GENESIS, seal, verify_chain
from lambdas.models.errors import ConditionFailed, IncidentExists, LockHeld
from lambdas.models.events import parse_report
from lambdas.models.incident import Incident, IncidentState
from tests.conftest import load_fixture
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


def test_a_second_incident_for_the_same_instance_is_refused_naming_the_holder(store):
    store.create(incident("sdc-1"))

    with pytest.raises(LockHeld) as err:
        store.create(incident("sdc-2"))

    assert err.value.holder == "sdc-1"
    assert store.get("sdc-2") is None


def test_creating_the_same_incident_again_is_refused_as_existing(store):
    store.create(incident())

    with pytest.raises(IncidentExists):
        store.create(incident())


def test_a_skipped_incident_takes_no_lock(store):
    store.create(incident(state=IncidentState.SKIPPED))

    assert store.open_incident_id(CLUSTER, INSTANCE) is None


def test_saving_bumps_the_version_and_a_stale_copy_is_refused(store):
    store.create(incident())
    first = store.get("sdc-1")
    stale = copy.deepcopy(first)
    first.state = IncidentState.HEALTH_CHECK

    store.save(first)

    assert store.get("sdc-1").version == 1
    with pytest.raises(ConditionFailed):
        store.save(stale)


def test_the_lock_is_released_only_by_its_holder(store):
    store.create(incident("sdc-1"))

    store.release_lock(CLUSTER, INSTANCE, "sdc-other")
    assert store.open_incident_id(CLUSTER, INSTANCE) == "sdc-1"
    store.release_lock(CLUSTER, INSTANCE, "sdc-1")
    assert store.open_incident_id(CLUSTER, INSTANCE) is None
    store.release_lock(CLUSTER, INSTANCE, "sdc-1")  # idempotent


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


def test_the_latest_report_is_the_one_emitted_last(store):
    detail = load_fixture("events", "sdc_report")["detail"]
    older = parse_report(
        {**detail, "report_id": "r-older-000001", "emitted_at": "2026-11-30T08:00:00Z"}
    )
    newer = parse_report(detail)
    store.put_report(newer, INSTANCE, 1)
    store.put_report(older, INSTANCE, 1)

    assert store.latest_report(CLUSTER, INSTANCE).report_id == newer.report_id


def test_a_stored_report_reads_back_equal_to_what_was_sent(store):
    report = parse_report(load_fixture("events", "sdc_report")["detail"])
    store.put_report(report, INSTANCE, 1)

    assert store.latest_report(CLUSTER, INSTANCE).detail == report.detail


def test_a_report_with_fractional_numbers_round_trips(store):
    detail = load_fixture("events", "sdc_report")["detail"]
    detail["alarm"]["loss"] = 2.5
    report = parse_report(detail)

    store.put_report(report, INSTANCE, 1)

    assert store.latest_report(CLUSTER, INSTANCE).detail["alarm"]["loss"] == 2.5


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


def test_an_audit_seq_is_written_once(audit):
    first = entry(1, GENESIS)
    audit.append(first)

    with pytest.raises(ConditionFailed):
        audit.append(dataclasses.replace(first, action="rewritten"))

    assert [e.action for e in audit.entries("sdc-1")] == ["step_1"]


def test_audit_entries_read_back_in_order_and_verify(audit):
    first = entry(1, GENESIS, step=30, ranks=[13], window=None, note="ünïcode", ratio=0.25)
    second = entry(2, first.hash, nested={"a": {"b": [1, 2, {"c": True}]}})
    audit.append(second)
    audit.append(first)

    stored = audit.entries("sdc-1")

    assert [e.seq for e in stored] == [1, 2]
    assert audit.last("sdc-1") == second
    assert verify_chain(stored).ok


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
