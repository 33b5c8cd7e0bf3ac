"""GuardStore: the cluster's guard slots (taken by IncidentStore.create), storm flags and storm
holds, one active hold per cluster."""

from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor

import pytest

from sdc_remediation.lambdas.logic.ports import GuardStore, IncidentStore
from sdc_remediation.lambdas.models.errors import ConditionFailed
from sdc_remediation.lambdas.models.guard import ClusterHold, GuardState
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.writes import Created, GuardFull, HoldExists
from tests.contract.records import CLUSTER, OTHER_CLUSTER, hold, incident, instance

LIFTED_AT = "2026-11-30T09:00:00+00:00"

# -- guard state and slots ------------------------------------------------------------------------


def test_a_cluster_never_guarded_has_no_slots_taken_and_no_reset(guard: GuardStore):
    assert guard.guard_state(CLUSTER) == GuardState((), None)


def test_releasing_a_slot_frees_only_that_one_and_is_idempotent(
    incidents: IncidentStore, guard: GuardStore
):
    incidents.create(incident(1), slot_limit=3)
    incidents.create(incident(2), slot_limit=3)

    guard.release_slot(CLUSTER, incident(1).incident_id)
    guard.release_slot(CLUSTER, incident(1).incident_id)

    assert guard.guard_state(CLUSTER).open_ids == (incident(2).incident_id,)


@pytest.mark.parametrize("cluster", [CLUSTER, OTHER_CLUSTER], ids=["guarded", "never-guarded"])
def test_releasing_a_slot_that_was_never_taken_is_harmless(
    incidents: IncidentStore, guard: GuardStore, cluster: str
):
    incidents.create(incident(1), slot_limit=3)

    guard.release_slot(cluster, "sdc-never")

    assert guard.guard_state(CLUSTER).open_ids == (incident(1).incident_id,)
    assert guard.guard_state(OTHER_CLUSTER).open_ids == ()


def job(n: int, nodes: int) -> Incident:
    """A job-level incident over `nodes` instances."""
    return incident(
        n, instance_id="", scope="job", instance_ids=[instance(100 + k) for k in range(nodes)]
    )


def test_a_job_level_incident_takes_one_slot_per_node(incidents: IncidentStore, guard: GuardStore):
    incidents.create(job(1, 3), slot_limit=4)

    state = guard.guard_state(CLUSTER)
    assert (state.open_ids, state.open_nodes) == ((job(1, 3).incident_id,), 3)


def test_a_job_level_incident_whose_nodes_do_not_fit_is_refused_and_nothing_is_written(
    incidents: IncidentStore, guard: GuardStore
):
    incidents.create(incident(1), slot_limit=4)

    full = incidents.create(job(2, 4), slot_limit=4)

    assert isinstance(full, GuardFull)
    assert full.open_ids == (incident(1).incident_id,)
    assert incidents.get(job(2, 4).incident_id) is None
    assert guard.guard_state(CLUSTER).open_nodes == 1


def test_releasing_a_job_level_incidents_slots_frees_every_node_and_only_them(
    incidents: IncidentStore, guard: GuardStore
):
    incidents.create(incident(1), slot_limit=5)
    incidents.create(job(2, 3), slot_limit=5)

    guard.release_slot(CLUSTER, job(2, 3).incident_id)

    state = guard.guard_state(CLUSTER)
    assert (state.open_ids, state.open_nodes) == ((incident(1).incident_id,), 1)


def test_asking_for_more_slots_than_the_guard_has_is_refused_before_a_write(
    incidents: IncidentStore, guard: GuardStore
):
    with pytest.raises(ValueError, match="4 guard slots asked of a guard of 3"):
        incidents.create(job(1, 4), slot_limit=3)

    assert incidents.get(job(1, 4).incident_id) is None


# -- storm flags ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("since", "expected"),
    [
        (0, {"i-01", "i-02", "i-03"}),
        (200, {"i-02", "i-03"}),  # at `since` counts
        (201, {"i-03"}),
        (301, set()),
    ],
)
def test_flagged_instances_are_those_flagged_at_or_after_since(
    guard: GuardStore, since: int, expected: set[str]
):
    for n, at in ((1, 100), (2, 200), (3, 300)):
        guard.flag_instance(CLUSTER, f"i-0{n}", at, 10_000, trusted=False)

    assert guard.flagged_instances(CLUSTER, since) == expected


@pytest.mark.parametrize(
    ("first", "then", "expected"),
    [(100, 300, {"i-01"}), (300, 100, set())],
    ids=["later-flag", "earlier-flag"],
)
def test_an_instance_has_one_flag_the_last_one_noted(
    guard: GuardStore, first: int, then: int, expected: set[str]
):
    guard.flag_instance(CLUSTER, "i-01", first, 10_000, trusted=False)
    guard.flag_instance(CLUSTER, "i-01", then, 10_000, trusted=False)

    assert guard.flagged_instances(CLUSTER, 200) == expected


def test_a_trusted_flag_is_counted_apart_and_outlives_a_later_untrusted_one(guard: GuardStore):
    guard.flag_instance(CLUSTER, "i-01", 100, 10_000, trusted=True)
    guard.flag_instance(CLUSTER, "i-01", 300, 10_000, trusted=False)
    guard.flag_instance(CLUSTER, "i-02", 300, 10_000, trusted=False)

    assert guard.flagged_instances(CLUSTER, 100, trusted_only=True) == {"i-01"}
    assert guard.flagged_instances(CLUSTER, 200, trusted_only=True) == set()
    assert guard.flagged_instances(CLUSTER, 200) == {"i-01", "i-02"}


def test_flags_are_kept_per_cluster(guard: GuardStore):
    guard.flag_instance(CLUSTER, "i-01", 100, 10_000, trusted=False)

    assert guard.flagged_instances(OTHER_CLUSTER, 0) == set()


# -- storm holds ----------------------------------------------------------------------------------


def test_a_created_hold_is_the_clusters_active_hold_and_reads_back_equal(guard: GuardStore):
    assert guard.create_hold(hold(1)) == Created()
    assert guard.active_hold(CLUSTER) == hold(1)
    assert guard.get_hold(hold(1).hold_id) == hold(1)


def test_no_hold_reads_as_none(guard: GuardStore):
    assert guard.active_hold(CLUSTER) is None
    assert guard.get_hold("hold-unknown") is None


def test_a_second_hold_while_one_is_active_is_refused_naming_the_active_one(guard: GuardStore):
    guard.create_hold(hold(1))

    assert guard.create_hold(hold(2)) == HoldExists(hold(1).hold_id)
    assert guard.get_hold(hold(2).hold_id) is None
    assert guard.active_hold(CLUSTER) == hold(1)


def test_creating_the_same_hold_twice_is_refused(guard: GuardStore):
    guard.create_hold(hold(1))

    assert guard.create_hold(hold(1)) == HoldExists(hold(1).hold_id)


def test_the_id_of_a_lifted_hold_cannot_be_used_again(guard: GuardStore):
    guard.create_hold(hold(1))
    lifted = _lifted(guard, hold(1).hold_id)

    assert guard.create_hold(hold(1)) == HoldExists(hold(1).hold_id)
    assert guard.active_hold(CLUSTER) is None
    assert guard.get_hold(hold(1).hold_id) == lifted


def test_after_a_lift_a_new_hold_becomes_active(guard: GuardStore):
    guard.create_hold(hold(1))
    _lifted(guard, hold(1).hold_id)

    assert guard.create_hold(hold(2)) == Created()
    assert guard.active_hold(CLUSTER) == hold(2)


def test_holds_are_per_cluster(guard: GuardStore):
    guard.create_hold(hold(1))
    other = hold(1, cluster_name=OTHER_CLUSTER)

    assert guard.create_hold(other) == Created()
    assert guard.active_hold(CLUSTER) == hold(1)
    assert guard.active_hold(OTHER_CLUSTER) == other


def test_saving_a_hold_bumps_its_version_and_keeps_the_changes(guard: GuardStore):
    guard.create_hold(hold(1))
    loaded = _loaded(guard, hold(1).hold_id)
    loaded.notified = True
    loaded.trusted_at = "2026-11-30T08:16:04+00:00"

    guard.save_hold(loaded)

    assert loaded.version == 1
    assert guard.get_hold(hold(1).hold_id) == loaded
    assert guard.active_hold(CLUSTER) == loaded


def test_a_stale_hold_save_is_refused_and_changes_nothing(guard: GuardStore):
    guard.create_hold(hold(1))
    first, second = _loaded(guard, hold(1).hold_id), _loaded(guard, hold(1).hold_id)
    first.notified = True
    guard.save_hold(first)
    second.comment = "late"

    with pytest.raises(ConditionFailed):
        guard.save_hold(second)

    assert second.version == 0
    assert guard.get_hold(hold(1).hold_id) == first


def test_saving_a_hold_that_was_never_created_is_refused(guard: GuardStore):
    with pytest.raises(ConditionFailed):
        guard.save_hold(hold(1))

    assert guard.get_hold(hold(1).hold_id) is None


def test_lifting_a_hold_saves_it_ends_it_and_notes_the_reset_time(guard: GuardStore):
    guard.create_hold(hold(1))

    lifted = _lifted(guard, hold(1).hold_id, reset_at=1_800_000_000)

    assert lifted.version == 1
    assert guard.active_hold(CLUSTER) is None
    assert guard.get_hold(hold(1).hold_id) == lifted
    assert guard.guard_state(CLUSTER).storm_reset_at == 1_800_000_000


def test_lifting_a_stale_hold_is_refused_and_changes_nothing(guard: GuardStore):
    guard.create_hold(hold(1))
    stale = _loaded(guard, hold(1).hold_id)
    fresh = _loaded(guard, hold(1).hold_id)
    fresh.notified = True
    guard.save_hold(fresh)
    stale.lifted_at = LIFTED_AT

    with pytest.raises(ConditionFailed):
        guard.lift_hold(stale, 1_800_000_000)

    assert stale.version == 0
    assert guard.active_hold(CLUSTER) == fresh
    assert guard.guard_state(CLUSTER).storm_reset_at is None


def test_lifting_a_hold_again_is_refused_and_keeps_the_first_reset(guard: GuardStore):
    guard.create_hold(hold(1))
    lifted = _lifted(guard, hold(1).hold_id, reset_at=1_800_000_000)

    with pytest.raises(ConditionFailed):
        guard.lift_hold(copy.deepcopy(lifted), 1_900_000_000)

    assert guard.get_hold(hold(1).hold_id) == lifted
    assert guard.guard_state(CLUSTER).storm_reset_at == 1_800_000_000


def test_lifting_a_hold_that_is_not_the_active_one_is_refused(guard: GuardStore):
    guard.create_hold(hold(1))
    old = _lifted(guard, hold(1).hold_id, reset_at=1_800_000_000)
    guard.create_hold(hold(2))

    with pytest.raises(ConditionFailed):
        guard.lift_hold(old, 1_900_000_000)

    assert guard.active_hold(CLUSTER) == hold(2)
    assert guard.guard_state(CLUSTER).storm_reset_at == 1_800_000_000


def test_a_lift_keeps_the_slots_taken_and_a_slot_keeps_the_reset(
    incidents: IncidentStore, guard: GuardStore
):
    incidents.create(incident(1), slot_limit=3)
    guard.create_hold(hold(1))
    _lifted(guard, hold(1).hold_id, reset_at=1_800_000_000)

    incidents.create(incident(2), slot_limit=3)

    assert guard.guard_state(CLUSTER) == GuardState(
        (incident(1).incident_id, incident(2).incident_id), 1_800_000_000
    )


def test_a_hold_read_is_a_copy(guard: GuardStore):
    guard.create_hold(hold(1))
    loaded = _loaded(guard, hold(1).hold_id)
    loaded.instances.append("i-changed")

    assert guard.get_hold(hold(1).hold_id) == hold(1)


def _loaded(guard: GuardStore, hold_id: str) -> ClusterHold:
    found = guard.get_hold(hold_id)
    assert found is not None
    return found


def _lifted(guard: GuardStore, hold_id: str, *, reset_at: int = 1_800_000_000) -> ClusterHold:
    active = _loaded(guard, hold_id)
    active.lifted_at = LIFTED_AT
    active.lifted_by = "oncall"
    guard.lift_hold(active, reset_at)
    return active


# -- tallies (the rate bound on openings) ---------------------------------------------------------

EXPIRES = 1_900_000_000


def test_a_tally_counts_from_one_and_each_call_adds_one(guard: GuardStore):
    values = [guard.tally(CLUSTER, "opened#29000000", EXPIRES) for _ in range(3)]

    assert values == [1, 2, 3]


def test_tallies_are_kept_apart_by_name_and_by_cluster(guard: GuardStore):
    guard.tally(CLUSTER, "opened#29000000", EXPIRES)
    guard.tally(CLUSTER, "opened#29000000", EXPIRES)

    assert guard.tally(CLUSTER, "opened#29000001", EXPIRES) == 1
    assert guard.tally(OTHER_CLUSTER, "opened#29000000", EXPIRES) == 1
    assert guard.tally(CLUSTER, "job#train#29000000", EXPIRES) == 1


def test_tallies_of_one_counter_count_up_from_one(guard: GuardStore):
    values = [guard.tally(CLUSTER, "opened#29000000", EXPIRES) for _ in range(40)]

    assert values == list(range(1, 41))


def test_concurrent_tallies_each_get_a_distinct_value_from_the_fake(fake_table):
    # On DynamoDB a tally is one UpdateItem with ADD, atomic by the service; moto's in-process
    # table does not serialize concurrent requests (a loaded machine loses an increment), so
    # concurrency is asked of the fake, whose lock stands in for the service's guarantee.
    with ThreadPoolExecutor(max_workers=8) as pool:
        values = list(
            pool.map(lambda _: fake_table.tally(CLUSTER, "opened#29000000", EXPIRES), range(40))
        )

    assert sorted(values) == list(range(1, 41))
