"""IncidentStore: incidents, the open lock of a (cluster, instance), the held lock of a held
incident, and the guard slot an incident may take when it is created."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from lambdas.logic.ports import IncidentStore
from lambdas.models.errors import ConditionFailed, GuardFull, HeldBy, IncidentExists, LockHeld
from lambdas.models.incident import Incident, IncidentState
from tests.contract.conftest import IncidentsTable
from tests.contract.records import (
    CLUSTER,
    NOW,
    OTHER_CLUSTER,
    held,
    incident,
    instance,
    job,
    skipped,
)

# -- create ---------------------------------------------------------------------------------------


def test_a_created_incident_reads_back_equal(store: IncidentStore):
    store.create(incident(1))

    assert store.get(incident(1).incident_id) == incident(1)


def test_an_unknown_incident_reads_as_none(store: IncidentStore):
    assert store.get("sdc-unknown") is None


def test_an_open_node_incident_takes_the_open_lock_of_its_instance(store: IncidentStore):
    store.create(incident(1))

    assert store.open_incident_id(CLUSTER, instance(1)) == incident(1).incident_id


@pytest.mark.parametrize(
    "born",
    [skipped(1), held(1), job(1, [instance(1)])],
    ids=["skipped", "held", "job-scope"],
)
def test_an_incident_born_closed_or_job_scope_takes_no_open_lock(
    store: IncidentStore, born: Incident
):
    store.create(born)

    assert store.get(born.incident_id) == born
    assert store.open_incident_id(CLUSTER, instance(1)) is None


def test_an_incident_for_a_locked_instance_is_lock_held_and_nothing_is_written(
    store: IncidentsTable,
):
    store.create(incident(1))
    second = incident(2, instance_id=instance(1))

    with pytest.raises(LockHeld) as refused:
        store.create(second, slot_limit=5)

    assert refused.value.holder == incident(1).incident_id
    assert store.get(second.incident_id) is None
    assert store.open_incident_id(CLUSTER, instance(1)) == incident(1).incident_id
    assert store.guard_state(CLUSTER).open_ids == ()


def _create(first: Incident, slot_limit: int | None = None) -> Callable[[IncidentsTable], None]:
    return lambda store: store.create(first, slot_limit=slot_limit)


@pytest.mark.parametrize(
    ("first", "again", "slot_limit", "lock", "slots"),
    [
        (_create(incident(1)), incident(1), None, incident(1).incident_id, ()),
        (_create(skipped(1)), skipped(1), None, None, ()),
        # the refused create takes neither the lock nor a slot
        (_create(skipped(1)), incident(1), 1, None, ()),
        # the incident's own slot is not a second one: still IncidentExists, not GuardFull
        (
            _create(incident(1), 1),
            incident(1),
            1,
            incident(1).incident_id,
            (incident(1).incident_id,),
        ),
        (
            lambda store: store.create_held(held(1), until=NOW + 900, now=NOW),
            incident(1, state=IncidentState.OPENED),
            None,
            None,
            (),
        ),
    ],
    ids=["open-again", "skipped-again", "skipped-then-open", "with-its-slot", "held-then-open"],
)
def test_creating_an_existing_incident_id_again_is_incident_exists_and_changes_nothing(
    store: IncidentsTable,
    first: Callable[[IncidentsTable], None],
    again: Incident,
    slot_limit: int | None,
    lock: str | None,
    slots: tuple[str, ...],
):
    first(store)
    stored = store.get(again.incident_id)

    with pytest.raises(IncidentExists):
        store.create(again, slot_limit=slot_limit)

    assert store.get(again.incident_id) == stored
    assert store.open_incident_id(CLUSTER, instance(1)) == lock
    assert store.guard_state(CLUSTER).open_ids == slots


def test_an_existing_id_is_reported_before_a_lock_held_by_another(store: IncidentStore):
    store.create(incident(2, instance_id=instance(1)))
    store.create(skipped(1))

    with pytest.raises(IncidentExists):
        store.create(incident(1))


def test_an_existing_id_is_reported_before_a_full_guard(store: IncidentStore):
    store.create(incident(2), slot_limit=1)
    store.create(skipped(1))

    with pytest.raises(IncidentExists):
        store.create(incident(1), slot_limit=1)


def test_a_lock_held_by_another_is_reported_before_a_full_guard(store: IncidentStore):
    store.create(incident(2, instance_id=instance(1)), slot_limit=1)

    with pytest.raises(LockHeld) as refused:
        store.create(incident(1), slot_limit=1)

    assert refused.value.holder == incident(2).incident_id


# -- guard slots taken on create ------------------------------------------------------------------


def test_an_incident_created_with_a_slot_limit_takes_a_slot(store: IncidentsTable):
    store.create(incident(1), slot_limit=3)

    assert store.guard_state(CLUSTER).open_ids == (incident(1).incident_id,)


def test_a_full_guard_refuses_naming_the_open_ids_and_nothing_is_written(store: IncidentsTable):
    store.create(incident(1), slot_limit=2)
    store.create(incident(2), slot_limit=2)

    with pytest.raises(GuardFull) as full:
        store.create(incident(3), slot_limit=2)

    assert full.value.open_ids == [incident(1).incident_id, incident(2).incident_id]
    assert full.value.limit == 2
    assert store.get(incident(3).incident_id) is None
    assert store.open_incident_id(CLUSTER, instance(3)) is None
    assert store.guard_state(CLUSTER).open_ids == (incident(1).incident_id, incident(2).incident_id)


@pytest.mark.parametrize("limit", [0, -1])
def test_a_slot_limit_below_one_is_refused_before_anything_is_written(
    store: IncidentsTable, limit: int
):
    with pytest.raises(ValueError, match="at least 1"):
        store.create(incident(1), slot_limit=limit)

    assert store.get(incident(1).incident_id) is None
    assert store.open_incident_id(CLUSTER, instance(1)) is None
    assert store.guard_state(CLUSTER).open_ids == ()


def test_a_released_slot_can_be_taken_again(store: IncidentsTable):
    store.create(incident(1), slot_limit=1)
    store.release_slot(CLUSTER, incident(1).incident_id)

    store.create(incident(2), slot_limit=1)

    assert store.guard_state(CLUSTER).open_ids == (incident(2).incident_id,)


def test_slots_are_counted_per_cluster(store: IncidentsTable):
    store.create(incident(1), slot_limit=1)
    other = incident(2, cluster_name=OTHER_CLUSTER)

    store.create(other, slot_limit=1)

    assert store.guard_state(CLUSTER).open_ids == (incident(1).incident_id,)
    assert store.guard_state(OTHER_CLUSTER).open_ids == (other.incident_id,)


def test_an_incident_created_without_a_slot_limit_takes_no_slot_even_from_a_full_guard(
    store: IncidentsTable,
):
    store.create(incident(1), slot_limit=1)

    store.create(incident(2))

    assert store.guard_state(CLUSTER).open_ids == (incident(1).incident_id,)


def test_a_job_incident_takes_a_slot_and_no_open_lock(store: IncidentsTable):
    created = job(9, [instance(1), instance(2)])

    store.create(created, slot_limit=3)

    assert store.guard_state(CLUSTER).open_ids == (created.incident_id,)
    assert store.open_incident_id(CLUSTER, instance(1)) is None


# -- the open lock --------------------------------------------------------------------------------


def test_claiming_a_free_open_lock_takes_it(store: IncidentStore):
    assert store.claim_lock(CLUSTER, instance(1), "sdc-a") == "sdc-a"
    assert store.open_incident_id(CLUSTER, instance(1)) == "sdc-a"


def test_claiming_an_open_lock_another_holds_returns_the_holder_and_keeps_it(
    store: IncidentStore,
):
    store.claim_lock(CLUSTER, instance(1), "sdc-a")

    assert store.claim_lock(CLUSTER, instance(1), "sdc-b") == "sdc-a"
    assert store.open_incident_id(CLUSTER, instance(1)) == "sdc-a"


def test_the_holder_claiming_its_open_lock_again_keeps_it(store: IncidentStore):
    store.create(incident(1))

    assert store.claim_lock(CLUSTER, instance(1), incident(1).incident_id) == (
        incident(1).incident_id
    )
    assert store.open_incident_id(CLUSTER, instance(1)) == incident(1).incident_id


def test_open_locks_are_per_cluster_and_instance(store: IncidentStore):
    store.claim_lock(CLUSTER, instance(1), "sdc-a")

    assert store.claim_lock(OTHER_CLUSTER, instance(1), "sdc-b") == "sdc-b"
    assert store.claim_lock(CLUSTER, instance(2), "sdc-c") == "sdc-c"
    assert store.open_incident_id(CLUSTER, instance(1)) == "sdc-a"


def test_an_open_lock_is_released_only_by_its_holder(store: IncidentStore):
    store.create(incident(1))

    store.release_lock(CLUSTER, instance(1), "sdc-other")

    assert store.open_incident_id(CLUSTER, instance(1)) == incident(1).incident_id


def test_the_holder_releases_its_open_lock_idempotently(store: IncidentStore):
    store.create(incident(1))

    store.release_lock(CLUSTER, instance(1), incident(1).incident_id)
    store.release_lock(CLUSTER, instance(1), incident(1).incident_id)

    assert store.open_incident_id(CLUSTER, instance(1)) is None


def test_releasing_an_open_lock_nobody_holds_is_harmless(store: IncidentStore):
    store.release_lock(CLUSTER, instance(1), "sdc-a")

    assert store.open_incident_id(CLUSTER, instance(1)) is None


def test_a_released_open_lock_goes_to_the_next_claimant(store: IncidentStore):
    store.create(incident(1))
    store.release_lock(CLUSTER, instance(1), incident(1).incident_id)

    assert store.claim_lock(CLUSTER, instance(1), "sdc-b") == "sdc-b"
    store.create(incident(3, instance_id=instance(2)))  # and a create takes a free lock too
    assert store.open_incident_id(CLUSTER, instance(2)) == incident(3).incident_id


# -- the held lock --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("at", "holder"),
    [(NOW, "sdc-ml-cluster-1-1"), (NOW + 900, "sdc-ml-cluster-1-1"), (NOW + 901, None)],
    ids=["at-creation", "at-the-window-end", "after-the-window"],
)
def test_a_held_incident_holds_the_held_lock_of_its_instance_until_its_window_ends(
    store: IncidentStore, at: int, holder: str | None
):
    store.create_held(held(1), until=NOW + 900, now=NOW)

    assert store.get(held(1).incident_id) == held(1)
    assert store.held_incident_id(CLUSTER, instance(1), at) == holder
    assert store.open_incident_id(CLUSTER, instance(1)) is None


def test_no_held_lock_reads_as_none(store: IncidentStore):
    assert store.held_incident_id(CLUSTER, instance(1), NOW) is None


def test_the_held_lock_and_the_open_lock_are_separate(store: IncidentStore):
    store.create(incident(1))

    store.create_held(held(2, instance_id=instance(1)), until=NOW + 900, now=NOW)

    assert store.open_incident_id(CLUSTER, instance(1)) == incident(1).incident_id
    assert store.held_incident_id(CLUSTER, instance(1), NOW) == held(2).incident_id


@pytest.mark.parametrize("now", [NOW + 60, NOW + 900], ids=["within", "at-the-window-end"])
def test_a_second_held_incident_within_the_window_is_held_by_the_first_and_not_written(
    store: IncidentStore, now: int
):
    store.create_held(held(1), until=NOW + 900, now=NOW)
    second = held(2, instance_id=instance(1))

    with pytest.raises(HeldBy) as refused:
        store.create_held(second, until=now + 900, now=now)

    assert refused.value.holder == held(1).incident_id
    assert store.get(second.incident_id) is None
    assert store.held_incident_id(CLUSTER, instance(1), NOW + 900) == held(1).incident_id


def test_after_the_window_another_held_incident_takes_the_held_lock(store: IncidentStore):
    store.create_held(held(1), until=NOW + 900, now=NOW)
    second = held(2, instance_id=instance(1))

    store.create_held(second, until=NOW + 1901, now=NOW + 901)

    assert store.held_incident_id(CLUSTER, instance(1), NOW + 901) == second.incident_id


def test_a_held_incident_takes_the_held_lock_over_from_the_holder_it_replaces(
    store: IncidentStore,
):
    store.create_held(held(1), until=NOW + 900, now=NOW)
    successor = held(2, instance_id=instance(1))

    store.create_held(successor, until=NOW + 960, now=NOW + 60, replacing=held(1).incident_id)

    assert store.held_incident_id(CLUSTER, instance(1), NOW + 950) == successor.incident_id


def test_replacing_another_incident_than_the_holder_is_held_by_the_holder(store: IncidentStore):
    store.create_held(held(1), until=NOW + 900, now=NOW)
    second = held(2, instance_id=instance(1))

    with pytest.raises(HeldBy) as refused:
        store.create_held(second, until=NOW + 960, now=NOW + 60, replacing="sdc-other")

    assert refused.value.holder == held(1).incident_id
    assert store.get(second.incident_id) is None


@pytest.mark.parametrize(
    "again", [held(1), job(1, [instance(1)], state=IncidentState.HELD)], ids=["node", "job"]
)
def test_creating_the_same_held_incident_again_is_incident_exists(
    store: IncidentStore, again: Incident
):
    store.create_held(again, until=NOW + 900, now=NOW)

    with pytest.raises(IncidentExists):
        store.create_held(again, until=NOW + 900, now=NOW + 5)


def test_a_held_incident_for_an_id_already_open_is_incident_exists(store: IncidentStore):
    store.create(incident(1))

    with pytest.raises(IncidentExists):
        store.create_held(held(1), until=NOW + 900, now=NOW)

    assert store.held_incident_id(CLUSTER, instance(1), NOW) is None


def test_a_job_held_incident_takes_no_held_lock(store: IncidentStore):
    created = job(7, [instance(1), instance(2)], state=IncidentState.HELD)

    store.create_held(created, until=NOW + 900, now=NOW)

    assert store.get(created.incident_id) == created
    assert store.held_incident_id(CLUSTER, instance(1), NOW) is None


def test_claiming_a_free_held_lock_takes_it_for_its_window(store: IncidentStore):
    claimed = store.claim_held(CLUSTER, instance(1), "sdc-a", until=NOW + 900, now=NOW)

    assert claimed == "sdc-a"
    assert store.held_incident_id(CLUSTER, instance(1), NOW + 900) == "sdc-a"
    assert store.held_incident_id(CLUSTER, instance(1), NOW + 901) is None


@pytest.mark.parametrize(
    ("now", "holder"),
    [(NOW + 60, "sdc-ml-cluster-1-1"), (NOW + 900, "sdc-ml-cluster-1-1"), (NOW + 901, "sdc-b")],
    ids=["within", "at-the-window-end", "after-the-window"],
)
def test_claiming_a_held_lock_another_holds_returns_whoever_holds_it_at_now(
    store: IncidentStore, now: int, holder: str
):
    store.create_held(held(1), until=NOW + 900, now=NOW)

    assert store.claim_held(CLUSTER, instance(1), "sdc-b", until=now + 900, now=now) == holder
    assert store.held_incident_id(CLUSTER, instance(1), now) == holder


def test_a_refused_held_claim_leaves_the_holders_window_as_it_was(store: IncidentStore):
    store.claim_held(CLUSTER, instance(1), "sdc-a", until=NOW + 900, now=NOW)

    store.claim_held(CLUSTER, instance(1), "sdc-b", until=NOW + 5000, now=NOW + 60)

    assert store.held_incident_id(CLUSTER, instance(1), NOW + 901) is None


def test_the_holder_claiming_its_held_lock_again_extends_its_window(store: IncidentStore):
    store.create_held(held(1), until=NOW + 900, now=NOW)

    again = store.claim_held(
        CLUSTER, instance(1), held(1).incident_id, until=NOW + 1800, now=NOW + 60
    )

    assert again == held(1).incident_id
    assert store.held_incident_id(CLUSTER, instance(1), NOW + 1800) == held(1).incident_id


def test_a_held_incident_created_by_the_claimant_of_the_held_lock_is_written(
    store: IncidentStore,
):
    store.claim_held(CLUSTER, instance(1), held(1).incident_id, until=NOW + 900, now=NOW)

    store.create_held(held(1), until=NOW + 900, now=NOW)

    assert store.get(held(1).incident_id) == held(1)


# -- save -----------------------------------------------------------------------------------------


def test_saving_bumps_the_version_and_keeps_the_changes(store: IncidentStore):
    store.create(incident(1))
    loaded = store.get(incident(1).incident_id)
    assert loaded is not None
    loaded.state = IncidentState.HEALTH_CHECK

    store.save(loaded)

    assert loaded.version == 1
    assert store.get(incident(1).incident_id) == loaded


def test_the_same_copy_saves_again_after_its_version_was_bumped(store: IncidentStore):
    store.create(incident(1))
    loaded = store.get(incident(1).incident_id)
    assert loaded is not None

    store.save(loaded)
    store.save(loaded)

    stored = store.get(incident(1).incident_id)
    assert stored is not None and stored.version == 2


def test_a_stale_save_is_refused_and_changes_nothing(store: IncidentStore):
    store.create(incident(1))
    fresh = store.get(incident(1).incident_id)
    assert fresh is not None
    stale = copy.deepcopy(fresh)
    store.save(fresh)
    stale.state = IncidentState.FAILED

    with pytest.raises(ConditionFailed):
        store.save(stale)

    assert stale.version == 0
    assert store.get(incident(1).incident_id) == fresh


def test_saving_an_incident_that_was_never_created_is_refused(store: IncidentStore):
    with pytest.raises(ConditionFailed):
        store.save(incident(1))

    assert store.get(incident(1).incident_id) is None


def test_saving_a_closed_incident_leaves_its_open_lock_alone(store: IncidentStore):
    store.create(incident(1))
    loaded = store.get(incident(1).incident_id)
    assert loaded is not None
    loaded.state = IncidentState.REJECTED

    store.save(loaded)

    assert store.open_incident_id(CLUSTER, instance(1)) == incident(1).incident_id


def test_the_store_keeps_its_own_copy(store: IncidentStore):
    created = incident(1)
    store.create(created)
    created.evidence.append({"kind": "after-create"})
    read = store.get(created.incident_id)
    assert read is not None
    read.evidence.append({"kind": "after-get"})
    saved = store.get(created.incident_id)
    assert saved is not None
    saved.reason = "saved"
    store.save(saved)
    saved.evidence.append({"kind": "after-save"})

    stored = store.get(created.incident_id)

    assert stored is not None
    assert (stored.reason, [e["kind"] for e in stored.evidence]) == ("saved", ["alarm", "note"])
