"""The guard, storm hold and history items on moto's DynamoDB, and the pause switch on moto's
SSM, as docs/pipeline.md lays them out."""

from __future__ import annotations

import pytest

from lambdas.adapters.dynamodb import DynamoIncidentStore
from lambdas.adapters.ssm import SsmPauseSwitch
from lambdas.models.errors import (
    ConditionFailed,
    DependencyFailed,
    GuardFull,
    HeldBy,
    HoldExists,
    IncidentExists,
    LockHeld,
)
from lambdas.models.guard import ClusterHold, PastIncident
from lambdas.models.incident import Incident, IncidentState, Scope
from tests.integration.conftest import INCIDENTS_TABLE, SESSION, create_incidents_table

CLUSTER = "ml-cluster-1"


@pytest.fixture
def store(aws_env) -> DynamoIncidentStore:
    client = SESSION.client("dynamodb")
    create_incidents_table(client)
    return DynamoIncidentStore(INCIDENTS_TABLE, lambda: client)


def incident(n: int, **changes) -> Incident:
    values = {
        "incident_id": f"sdc-{CLUSTER}-{n}",
        "cluster_name": CLUSTER,
        "instance_id": f"i-0e{n:015x}",
        "state": IncidentState.OPENED,
        "created_at": "2026-11-30T08:15:04+00:00",
        "updated_at": "2026-11-30T08:15:04+00:00",
    }
    return Incident(**{**values, **changes})


def hold(hold_id: str = "hold-ml-cluster-1-storm-20261130T081504") -> ClusterHold:
    return ClusterHold(hold_id, CLUSTER, "4 distinct instances", "2026-11-30T08:15:04+00:00")


# -- held locks -----------------------------------------------------------------------------------

NOW = 1_764_490_504


def held(n: int, **changes) -> Incident:
    return incident(n, state=IncidentState.HELD, **changes)


def test_a_held_incident_takes_the_held_lock_of_its_instance_until_its_window_ends(store):
    store.create_held(held(1), until=NOW + 900, now=NOW)

    instance_id = held(1).instance_id
    assert store.get(f"sdc-{CLUSTER}-1").state is IncidentState.HELD
    assert store.held_incident_id(CLUSTER, instance_id, NOW + 900) == f"sdc-{CLUSTER}-1"
    assert store.held_incident_id(CLUSTER, instance_id, NOW + 901) is None
    assert store.open_incident_id(CLUSTER, instance_id) is None


def test_a_second_held_incident_for_the_instance_names_the_first_and_is_not_written(store):
    store.create_held(held(1), until=NOW + 900, now=NOW)
    second = held(2, instance_id=held(1).instance_id)

    with pytest.raises(HeldBy) as by:
        store.create_held(second, until=NOW + 960, now=NOW + 60)

    assert by.value.holder == f"sdc-{CLUSTER}-1"
    assert store.get(f"sdc-{CLUSTER}-2") is None


def test_after_the_window_another_held_incident_takes_the_lock(store):
    store.create_held(held(1), until=NOW + 900, now=NOW)
    second = held(2, instance_id=held(1).instance_id)

    store.create_held(second, until=NOW + 1900, now=NOW + 1000)

    assert store.held_incident_id(CLUSTER, second.instance_id, NOW + 1000) == second.incident_id


def test_a_held_incident_takes_the_lock_over_only_from_the_holder_it_names(store):
    store.create_held(held(1), until=NOW + 900, now=NOW)
    instance_id = held(1).instance_id

    with pytest.raises(HeldBy):
        store.create_held(
            held(2, instance_id=instance_id), until=NOW + 960, now=NOW + 60, replacing="other"
        )
    store.create_held(
        held(3, instance_id=instance_id),
        until=NOW + 960,
        now=NOW + 60,
        replacing=held(1).incident_id,
    )

    assert store.held_incident_id(CLUSTER, instance_id, NOW + 60) == f"sdc-{CLUSTER}-3"
    assert store.get(f"sdc-{CLUSTER}-2") is None


def test_writing_the_same_held_incident_again_is_incident_exists(store):
    store.create_held(held(1), until=NOW + 900, now=NOW)

    with pytest.raises(IncidentExists):
        store.create_held(held(1), until=NOW + 900, now=NOW + 5)


def test_a_job_held_incident_claims_held_locks_one_by_one(store):
    job = held(7, instance_id="", scope=Scope.JOB.value, instance_ids=["i-0a", "i-0b"])
    store.create_held(job, until=NOW + 900, now=NOW)
    store.create_held(held(1, instance_id="i-0b"), until=NOW + 900, now=NOW)

    claimed = [
        store.claim_held(CLUSTER, i, job.incident_id, until=NOW + 900, now=NOW)
        for i in job.instance_ids
    ]

    assert claimed == [job.incident_id, f"sdc-{CLUSTER}-1"]
    assert store.claim_held(CLUSTER, "i-0a", job.incident_id, until=NOW + 900, now=NOW) == (
        job.incident_id
    )


# -- guard slots ----------------------------------------------------------------------------------


def test_incidents_take_guard_slots_up_to_the_limit(store):
    store.create(incident(1), slot_limit=2)
    store.create(incident(2), slot_limit=2)

    with pytest.raises(GuardFull) as full:
        store.create(incident(3), slot_limit=2)

    assert full.value.open_ids == [f"sdc-{CLUSTER}-1", f"sdc-{CLUSTER}-2"]
    assert store.get(f"sdc-{CLUSTER}-3") is None
    assert store.open_incident_id(CLUSTER, incident(3).instance_id) is None


def test_a_held_lock_wins_over_a_full_guard(store):
    store.create(incident(1), slot_limit=1)

    with pytest.raises(LockHeld):
        store.create(incident(2, instance_id=incident(1).instance_id), slot_limit=1)


def test_a_released_slot_can_be_taken_again_and_releasing_twice_is_harmless(store):
    store.create(incident(1), slot_limit=1)
    store.release_slot(CLUSTER, incident(1).incident_id)
    store.release_slot(CLUSTER, incident(1).incident_id)

    store.create(incident(2), slot_limit=1)

    assert store.guard_state(CLUSTER).open_ids == (incident(2).incident_id,)


def test_a_job_level_incident_takes_a_slot_and_claims_locks_one_by_one(store):
    job = incident(9, instance_id="", scope=Scope.JOB.value, instance_ids=["i-01", "i-02"])
    store.create(job, slot_limit=3)

    claimed = [store.claim_lock(CLUSTER, i, job.incident_id) for i in job.instance_ids]

    assert claimed == [job.incident_id, job.incident_id]
    assert store.claim_lock(CLUSTER, "i-01", "sdc-other") == job.incident_id
    assert store.guard_state(CLUSTER).open_ids == (job.incident_id,)


# -- storm flags and holds ----------------------------------------------------------------------


def test_flags_count_distinct_instances_since_a_time(store):
    store.flag_instance(CLUSTER, "i-01", 100, 10_000)
    store.flag_instance(CLUSTER, "i-02", 200, 10_000)
    store.flag_instance(CLUSTER, "i-02", 300, 10_000)

    assert store.flagged_instances(CLUSTER, 150) == {"i-02"}
    assert store.flagged_instances(CLUSTER, 0) == {"i-01", "i-02"}


def test_one_active_storm_hold_per_cluster(store):
    store.create_hold(hold())

    with pytest.raises(HoldExists) as exists:
        store.create_hold(hold("hold-ml-cluster-1-storm-20261130T081600"))

    assert exists.value.holder == hold().hold_id
    assert store.active_hold(CLUSTER).hold_id == hold().hold_id


def test_claiming_the_storm_notification_succeeds_once(store):
    store.create_hold(hold())
    first, second = store.active_hold(CLUSTER), store.active_hold(CLUSTER)
    first.notified = second.notified = True

    store.save_hold(first)

    with pytest.raises(ConditionFailed):
        store.save_hold(second)


def test_lifting_a_hold_ends_it_and_notes_the_reset_time(store):
    store.create_hold(hold())
    active = store.active_hold(CLUSTER)
    active.lifted_at = "2026-11-30T09:00:00+00:00"

    store.lift_hold(active, 1_800_000_000)

    assert store.active_hold(CLUSTER) is None
    assert store.get_hold(hold().hold_id).lifted_at == "2026-11-30T09:00:00+00:00"
    assert store.guard_state(CLUSTER).storm_reset_at == 1_800_000_000


def test_lifting_a_stale_hold_is_refused(store):
    store.create_hold(hold())
    stale = store.active_hold(CLUSTER)
    fresh = store.active_hold(CLUSTER)
    fresh.notified = True
    store.save_hold(fresh)

    with pytest.raises(ConditionFailed):
        store.lift_hold(stale, 1)

    assert store.active_hold(CLUSTER) is not None


# -- history --------------------------------------------------------------------------------------


def test_history_is_found_by_instance_and_by_each_gpu(store):
    past = PastIncident(
        incident_id=f"sdc-{CLUSTER}-1",
        cluster_name=CLUSTER,
        instance_id="i-01",
        state="rejected",
        created_at="2026-11-30T08:15:04+00:00",
        closed_at="2026-11-30T09:15:04+00:00",
        gpu_uuids=("GPU-a", "GPU-b"),
    )

    store.record_past(past)

    assert store.past_for_instance("i-01") == [past]
    assert store.past_for_gpu("GPU-b") == [past]
    assert store.past_for_gpu("GPU-c") == []


# -- the pause switch -----------------------------------------------------------------------------


def test_the_pause_switch_reads_the_parameter_value(aws_env):
    ssm = SESSION.client("ssm")
    ssm.put_parameter(Name="/SdcRemediation/paused", Value="true", Type="String")

    assert SsmPauseSwitch("/SdcRemediation/paused", lambda: ssm).read() == "true"


def test_a_missing_pause_parameter_raises_a_domain_error(aws_env):
    switch = SsmPauseSwitch("/SdcRemediation/paused", lambda: SESSION.client("ssm"))

    with pytest.raises(DependencyFailed, match="GetParameter"):
        switch.read()
