"""IncidentStore: incidents, the open lock of a (cluster, instance), the held lock of a held
incident, and the guard slot an incident may take when it is created."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable

import pytest

from sdc_remediation.lambdas.logic.ports import GuardStore, IncidentStore
from sdc_remediation.lambdas.models.errors import ConditionFailed
from sdc_remediation.lambdas.models.incident import Incident, IncidentState, task_token_digest
from sdc_remediation.lambdas.models.writes import (
    Claimed,
    Created,
    GuardFull,
    HeldBy,
    IncidentExists,
    LockHeld,
)
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


def test_a_created_incident_reads_back_equal(incidents: IncidentStore):
    assert incidents.create(incident(1)) == Created()

    assert incidents.get(incident(1).incident_id) == incident(1)


def test_an_unknown_incident_reads_as_none(incidents: IncidentStore):
    assert incidents.get("sdc-unknown") is None


def test_an_open_node_incident_takes_the_open_lock_of_its_instance(incidents: IncidentStore):
    incidents.create(incident(1))

    assert incidents.open_incident_id(CLUSTER, instance(1)) == incident(1).incident_id


@pytest.mark.parametrize(
    "born",
    [skipped(1), held(1), job(1, [instance(1)])],
    ids=["skipped", "held", "job-scope"],
)
def test_an_incident_born_closed_or_job_scope_takes_no_open_lock(
    incidents: IncidentStore, born: Incident
):
    incidents.create(born)

    assert incidents.get(born.incident_id) == born
    assert incidents.open_incident_id(CLUSTER, instance(1)) is None


def test_an_incident_for_a_locked_instance_is_lock_held_and_nothing_is_written(
    incidents: IncidentStore,
    guard: GuardStore,
):
    incidents.create(incident(1))
    second = incident(2, instance_id=instance(1))

    refused = incidents.create(second, slot_limit=5)

    assert refused == LockHeld(incident(1).incident_id)
    assert incidents.get(second.incident_id) is None
    assert incidents.open_incident_id(CLUSTER, instance(1)) == incident(1).incident_id
    assert guard.guard_state(CLUSTER).open_ids == ()


def _create(first: Incident, slot_limit: int | None = None) -> Callable[[IncidentStore], object]:
    return lambda incidents: incidents.create(first, slot_limit=slot_limit)


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
            lambda incidents: incidents.create_held(held(1), until=NOW + 900, now=NOW),
            incident(1, state=IncidentState.OPENED),
            None,
            None,
            (),
        ),
    ],
    ids=["open-again", "skipped-again", "skipped-then-open", "with-its-slot", "held-then-open"],
)
def test_creating_an_existing_incident_id_again_is_incident_exists_and_changes_nothing(
    incidents: IncidentStore,
    guard: GuardStore,
    first: Callable[[IncidentStore], object],
    again: Incident,
    slot_limit: int | None,
    lock: str | None,
    slots: tuple[str, ...],
):
    first(incidents)
    stored = incidents.get(again.incident_id)

    refused = incidents.create(again, slot_limit=slot_limit)

    assert refused == IncidentExists(again.incident_id)
    assert incidents.get(again.incident_id) == stored
    assert incidents.open_incident_id(CLUSTER, instance(1)) == lock
    assert guard.guard_state(CLUSTER).open_ids == slots


def test_an_existing_id_is_reported_before_a_lock_held_by_another(incidents: IncidentStore):
    incidents.create(incident(2, instance_id=instance(1)))
    incidents.create(skipped(1))

    assert incidents.create(incident(1)) == IncidentExists(incident(1).incident_id)


def test_an_existing_id_is_reported_before_a_full_guard(incidents: IncidentStore):
    incidents.create(incident(2), slot_limit=1)
    incidents.create(skipped(1))

    assert incidents.create(incident(1), slot_limit=1) == IncidentExists(incident(1).incident_id)


def test_a_lock_held_by_another_is_reported_before_a_full_guard(incidents: IncidentStore):
    incidents.create(incident(2, instance_id=instance(1)), slot_limit=1)

    refused = incidents.create(incident(1), slot_limit=1)

    assert refused == LockHeld(incident(2).incident_id)


# -- guard slots taken on create ------------------------------------------------------------------


def test_an_incident_created_with_a_slot_limit_takes_a_slot(
    incidents: IncidentStore, guard: GuardStore
):
    incidents.create(incident(1), slot_limit=3)

    assert guard.guard_state(CLUSTER).open_ids == (incident(1).incident_id,)


def test_a_full_guard_refuses_naming_the_open_ids_and_nothing_is_written(
    incidents: IncidentStore, guard: GuardStore
):
    incidents.create(incident(1), slot_limit=2)
    incidents.create(incident(2), slot_limit=2)

    full = incidents.create(incident(3), slot_limit=2)

    assert full == GuardFull((incident(1).incident_id, incident(2).incident_id), 2)
    assert incidents.get(incident(3).incident_id) is None
    assert incidents.open_incident_id(CLUSTER, instance(3)) is None
    assert guard.guard_state(CLUSTER).open_ids == (incident(1).incident_id, incident(2).incident_id)


@pytest.mark.parametrize("limit", [0, -1])
def test_a_slot_limit_below_one_is_refused_before_anything_is_written(
    incidents: IncidentStore, guard: GuardStore, limit: int
):
    with pytest.raises(ValueError, match="at least 1"):
        incidents.create(incident(1), slot_limit=limit)

    assert incidents.get(incident(1).incident_id) is None
    assert incidents.open_incident_id(CLUSTER, instance(1)) is None
    assert guard.guard_state(CLUSTER).open_ids == ()


def test_a_released_slot_can_be_taken_again(incidents: IncidentStore, guard: GuardStore):
    incidents.create(incident(1), slot_limit=1)
    guard.release_slot(CLUSTER, incident(1).incident_id)

    incidents.create(incident(2), slot_limit=1)

    assert guard.guard_state(CLUSTER).open_ids == (incident(2).incident_id,)


def test_slots_are_counted_per_cluster(incidents: IncidentStore, guard: GuardStore):
    incidents.create(incident(1), slot_limit=1)
    other = incident(2, cluster_name=OTHER_CLUSTER)

    incidents.create(other, slot_limit=1)

    assert guard.guard_state(CLUSTER).open_ids == (incident(1).incident_id,)
    assert guard.guard_state(OTHER_CLUSTER).open_ids == (other.incident_id,)


def test_an_incident_created_without_a_slot_limit_takes_no_slot_even_from_a_full_guard(
    incidents: IncidentStore,
    guard: GuardStore,
):
    incidents.create(incident(1), slot_limit=1)

    incidents.create(incident(2))

    assert guard.guard_state(CLUSTER).open_ids == (incident(1).incident_id,)


def test_a_job_incident_takes_a_slot_and_no_open_lock(incidents: IncidentStore, guard: GuardStore):
    created = job(9, [instance(1), instance(2)])

    incidents.create(created, slot_limit=3)

    assert guard.guard_state(CLUSTER).open_ids == (created.incident_id,)
    assert incidents.open_incident_id(CLUSTER, instance(1)) is None


# -- the open lock --------------------------------------------------------------------------------


def test_claiming_a_free_open_lock_takes_it(incidents: IncidentStore):
    assert incidents.claim_lock(CLUSTER, instance(1), "sdc-a") == Claimed()
    assert incidents.open_incident_id(CLUSTER, instance(1)) == "sdc-a"


def test_claiming_an_open_lock_another_holds_returns_the_holder_and_keeps_it(
    incidents: IncidentStore,
):
    incidents.claim_lock(CLUSTER, instance(1), "sdc-a")

    assert incidents.claim_lock(CLUSTER, instance(1), "sdc-b") == LockHeld("sdc-a")
    assert incidents.open_incident_id(CLUSTER, instance(1)) == "sdc-a"


def test_the_holder_claiming_its_open_lock_again_keeps_it(incidents: IncidentStore):
    incidents.create(incident(1))

    assert incidents.claim_lock(CLUSTER, instance(1), incident(1).incident_id) == Claimed()
    assert incidents.open_incident_id(CLUSTER, instance(1)) == incident(1).incident_id


def test_open_locks_are_per_cluster_and_instance(incidents: IncidentStore):
    incidents.claim_lock(CLUSTER, instance(1), "sdc-a")

    assert incidents.claim_lock(OTHER_CLUSTER, instance(1), "sdc-b") == Claimed()
    assert incidents.claim_lock(CLUSTER, instance(2), "sdc-c") == Claimed()
    assert incidents.open_incident_id(CLUSTER, instance(1)) == "sdc-a"


def test_an_open_lock_is_released_only_by_its_holder(incidents: IncidentStore):
    incidents.create(incident(1))

    incidents.release_lock(CLUSTER, instance(1), "sdc-other")

    assert incidents.open_incident_id(CLUSTER, instance(1)) == incident(1).incident_id


def test_the_holder_releases_its_open_lock_idempotently(incidents: IncidentStore):
    incidents.create(incident(1))

    incidents.release_lock(CLUSTER, instance(1), incident(1).incident_id)
    incidents.release_lock(CLUSTER, instance(1), incident(1).incident_id)

    assert incidents.open_incident_id(CLUSTER, instance(1)) is None


def test_releasing_an_open_lock_nobody_holds_is_harmless(incidents: IncidentStore):
    incidents.release_lock(CLUSTER, instance(1), "sdc-a")

    assert incidents.open_incident_id(CLUSTER, instance(1)) is None


def test_a_released_open_lock_goes_to_the_next_claimant(incidents: IncidentStore):
    incidents.create(incident(1))
    incidents.release_lock(CLUSTER, instance(1), incident(1).incident_id)

    assert incidents.claim_lock(CLUSTER, instance(1), "sdc-b") == Claimed()
    incidents.create(incident(3, instance_id=instance(2)))  # and a create takes a free lock too
    assert incidents.open_incident_id(CLUSTER, instance(2)) == incident(3).incident_id


# -- the held lock --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("at", "holder"),
    [(NOW, "sdc-ml-cluster-1-1"), (NOW + 900, "sdc-ml-cluster-1-1"), (NOW + 901, None)],
    ids=["at-creation", "at-the-window-end", "after-the-window"],
)
def test_a_held_incident_holds_the_held_lock_of_its_instance_until_its_window_ends(
    incidents: IncidentStore, at: int, holder: str | None
):
    incidents.create_held(held(1), until=NOW + 900, now=NOW)

    assert incidents.get(held(1).incident_id) == held(1)
    assert incidents.held_incident_id(CLUSTER, instance(1), at) == holder
    assert incidents.open_incident_id(CLUSTER, instance(1)) is None


def test_no_held_lock_reads_as_none(incidents: IncidentStore):
    assert incidents.held_incident_id(CLUSTER, instance(1), NOW) is None


def test_the_held_lock_and_the_open_lock_are_separate(incidents: IncidentStore):
    incidents.create(incident(1))

    incidents.create_held(held(2, instance_id=instance(1)), until=NOW + 900, now=NOW)

    assert incidents.open_incident_id(CLUSTER, instance(1)) == incident(1).incident_id
    assert incidents.held_incident_id(CLUSTER, instance(1), NOW) == held(2).incident_id


@pytest.mark.parametrize("now", [NOW + 60, NOW + 900], ids=["within", "at-the-window-end"])
def test_a_second_held_incident_within_the_window_is_held_by_the_first_and_not_written(
    incidents: IncidentStore, now: int
):
    incidents.create_held(held(1), until=NOW + 900, now=NOW)
    second = held(2, instance_id=instance(1))

    refused = incidents.create_held(second, until=now + 900, now=now)

    assert refused == HeldBy(held(1).incident_id)
    assert incidents.get(second.incident_id) is None
    assert incidents.held_incident_id(CLUSTER, instance(1), NOW + 900) == held(1).incident_id


def test_after_the_window_another_held_incident_takes_the_held_lock(incidents: IncidentStore):
    incidents.create_held(held(1), until=NOW + 900, now=NOW)
    second = held(2, instance_id=instance(1))

    assert incidents.create_held(second, until=NOW + 1901, now=NOW + 901) == Created()
    assert incidents.held_incident_id(CLUSTER, instance(1), NOW + 901) == second.incident_id


def test_a_held_incident_takes_the_held_lock_over_from_the_holder_it_replaces(
    incidents: IncidentStore,
):
    incidents.create_held(held(1), until=NOW + 900, now=NOW)
    successor = held(2, instance_id=instance(1))

    taken = incidents.create_held(
        successor, until=NOW + 960, now=NOW + 60, replacing=held(1).incident_id
    )

    assert taken == Created()
    assert incidents.held_incident_id(CLUSTER, instance(1), NOW + 950) == successor.incident_id


def test_replacing_another_incident_than_the_holder_is_held_by_the_holder(incidents: IncidentStore):
    incidents.create_held(held(1), until=NOW + 900, now=NOW)
    second = held(2, instance_id=instance(1))

    refused = incidents.create_held(second, until=NOW + 960, now=NOW + 60, replacing="sdc-other")

    assert refused == HeldBy(held(1).incident_id)
    assert incidents.get(second.incident_id) is None


@pytest.mark.parametrize(
    "again", [held(1), job(1, [instance(1)], state=IncidentState.HELD)], ids=["node", "job"]
)
def test_creating_the_same_held_incident_again_is_incident_exists(
    incidents: IncidentStore, again: Incident
):
    incidents.create_held(again, until=NOW + 900, now=NOW)

    refused = incidents.create_held(again, until=NOW + 900, now=NOW + 5)

    assert refused == IncidentExists(again.incident_id)


def test_a_held_incident_for_an_id_already_open_is_incident_exists(incidents: IncidentStore):
    incidents.create(incident(1))

    refused = incidents.create_held(held(1), until=NOW + 900, now=NOW)

    assert refused == IncidentExists(held(1).incident_id)
    assert incidents.held_incident_id(CLUSTER, instance(1), NOW) is None


def test_a_job_held_incident_takes_no_held_lock(incidents: IncidentStore):
    created = job(7, [instance(1), instance(2)], state=IncidentState.HELD)

    incidents.create_held(created, until=NOW + 900, now=NOW)

    assert incidents.get(created.incident_id) == created
    assert incidents.held_incident_id(CLUSTER, instance(1), NOW) is None


def test_claiming_a_free_held_lock_takes_it_for_its_window(incidents: IncidentStore):
    claimed = incidents.claim_held(CLUSTER, instance(1), "sdc-a", until=NOW + 900, now=NOW)

    assert claimed == Claimed()
    assert incidents.held_incident_id(CLUSTER, instance(1), NOW + 900) == "sdc-a"
    assert incidents.held_incident_id(CLUSTER, instance(1), NOW + 901) is None


@pytest.mark.parametrize(
    ("now", "claim", "holder"),
    [
        (NOW + 60, HeldBy("sdc-ml-cluster-1-1"), "sdc-ml-cluster-1-1"),
        (NOW + 900, HeldBy("sdc-ml-cluster-1-1"), "sdc-ml-cluster-1-1"),
        (NOW + 901, Claimed(), "sdc-b"),
    ],
    ids=["within", "at-the-window-end", "after-the-window"],
)
def test_claiming_a_held_lock_another_holds_is_held_by_whoever_holds_it_at_now(
    incidents: IncidentStore, now: int, claim: Claimed | HeldBy, holder: str
):
    incidents.create_held(held(1), until=NOW + 900, now=NOW)

    assert incidents.claim_held(CLUSTER, instance(1), "sdc-b", until=now + 900, now=now) == claim
    assert incidents.held_incident_id(CLUSTER, instance(1), now) == holder


def test_a_refused_held_claim_leaves_the_holders_window_as_it_was(incidents: IncidentStore):
    incidents.claim_held(CLUSTER, instance(1), "sdc-a", until=NOW + 900, now=NOW)

    incidents.claim_held(CLUSTER, instance(1), "sdc-b", until=NOW + 5000, now=NOW + 60)

    assert incidents.held_incident_id(CLUSTER, instance(1), NOW + 901) is None


def test_the_holder_claiming_its_held_lock_again_extends_its_window(incidents: IncidentStore):
    incidents.create_held(held(1), until=NOW + 900, now=NOW)

    again = incidents.claim_held(
        CLUSTER, instance(1), held(1).incident_id, until=NOW + 1800, now=NOW + 60
    )

    assert again == Claimed()
    assert incidents.held_incident_id(CLUSTER, instance(1), NOW + 1800) == held(1).incident_id


def test_a_held_incident_created_by_the_claimant_of_the_held_lock_is_written(
    incidents: IncidentStore,
):
    incidents.claim_held(CLUSTER, instance(1), held(1).incident_id, until=NOW + 900, now=NOW)

    assert incidents.create_held(held(1), until=NOW + 900, now=NOW) == Created()
    assert incidents.get(held(1).incident_id) == held(1)


# -- save -----------------------------------------------------------------------------------------


def test_saving_bumps_the_version_and_keeps_the_changes(incidents: IncidentStore):
    incidents.create(incident(1))
    loaded = incidents.get(incident(1).incident_id)
    assert loaded is not None
    loaded.state = IncidentState.HEALTH_CHECK

    incidents.save(loaded)

    assert loaded.version == 1
    assert incidents.get(incident(1).incident_id) == loaded


def test_the_same_copy_saves_again_after_its_version_was_bumped(incidents: IncidentStore):
    incidents.create(incident(1))
    loaded = incidents.get(incident(1).incident_id)
    assert loaded is not None

    incidents.save(loaded)
    incidents.save(loaded)

    stored = incidents.get(incident(1).incident_id)
    assert stored is not None and stored.version == 2


def test_a_stale_save_is_refused_and_changes_nothing(incidents: IncidentStore):
    incidents.create(incident(1))
    fresh = incidents.get(incident(1).incident_id)
    assert fresh is not None
    stale = copy.deepcopy(fresh)
    incidents.save(fresh)
    stale.state = IncidentState.FAILED

    with pytest.raises(ConditionFailed):
        incidents.save(stale)

    assert stale.version == 0
    assert incidents.get(incident(1).incident_id) == fresh


def test_saving_an_incident_that_was_never_created_is_refused(incidents: IncidentStore):
    with pytest.raises(ConditionFailed):
        incidents.save(incident(1))

    assert incidents.get(incident(1).incident_id) is None


def test_saving_a_closed_incident_leaves_its_open_lock_alone(incidents: IncidentStore):
    incidents.create(incident(1))
    loaded = incidents.get(incident(1).incident_id)
    assert loaded is not None
    loaded.state = IncidentState.REJECTED

    incidents.save(loaded)

    assert incidents.open_incident_id(CLUSTER, instance(1)) == incident(1).incident_id


def test_the_store_keeps_its_own_copy(incidents: IncidentStore):
    created = incident(1)
    incidents.create(created)
    created.evidence.append({"kind": "after-create"})
    read = incidents.get(created.incident_id)
    assert read is not None
    read.evidence.append({"kind": "after-get"})
    saved = incidents.get(created.incident_id)
    assert saved is not None
    saved.reason = "saved"
    incidents.save(saved)
    saved.evidence.append({"kind": "after-save"})

    stored = incidents.get(created.incident_id)

    assert stored is not None
    assert (stored.reason, [e["kind"] for e in stored.evidence]) == ("saved", ["alarm", "note"])


# -- identity proofs, redeemed once -------------------------------------------------------------

PROOF = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
EXECUTION = "arn:aws:states:us-west-2:123456789012:execution:sdc-approval:a1"


def test_a_proof_redeemed_for_the_first_time_is_recorded(incidents: IncidentStore):
    assert incidents.redeem_proof(PROOF, EXECUTION, NOW + 86_400) is None


def test_a_proof_redeemed_again_by_the_same_approval_execution_is_a_retry(
    incidents: IncidentStore,
):
    incidents.redeem_proof(PROOF, EXECUTION, NOW + 86_400)

    assert incidents.redeem_proof(PROOF, EXECUTION, NOW + 86_400) is None


def test_a_proof_redeemed_by_another_approval_execution_names_the_first(
    incidents: IncidentStore,
):
    incidents.redeem_proof(PROOF, EXECUTION, NOW + 86_400)

    assert incidents.redeem_proof(PROOF, f"{EXECUTION}-2", NOW + 86_400) == EXECUTION


# -- the task token -------------------------------------------------------------------------------

TOKEN = "AAAAtask-token-of-the-waiting-approval"


def waiting(n: int) -> Incident:
    return incident(
        n, state=IncidentState.AWAITING_APPROVAL, task_token_sha256=task_token_digest(TOKEN)
    )


def test_a_kept_task_token_reads_back(incidents: IncidentStore):
    incidents.create(waiting(1))

    incidents.keep_task_token(waiting(1).incident_id, TOKEN)

    assert incidents.task_token(waiting(1).incident_id) == TOKEN


def test_no_kept_task_token_reads_as_none(incidents: IncidentStore):
    incidents.create(waiting(1))

    assert incidents.task_token(waiting(1).incident_id) is None


def test_keeping_a_task_token_again_replaces_it(incidents: IncidentStore):
    incidents.create(waiting(1))
    incidents.keep_task_token(waiting(1).incident_id, "AAAAthe-first-request")

    incidents.keep_task_token(waiting(1).incident_id, TOKEN)

    assert incidents.task_token(waiting(1).incident_id) == TOKEN


def test_task_tokens_are_per_incident(incidents: IncidentStore):
    incidents.create(waiting(1))
    incidents.create(waiting(2))

    incidents.keep_task_token(waiting(1).incident_id, TOKEN)

    assert incidents.task_token(waiting(2).incident_id) is None


def test_a_kept_task_token_is_neither_in_the_incident_nor_listed_as_one(incidents: IncidentStore):
    incidents.create(waiting(1))

    incidents.keep_task_token(waiting(1).incident_id, TOKEN)

    stored = incidents.get(waiting(1).incident_id)
    assert stored is not None and stored == waiting(1)
    assert TOKEN not in json.dumps(stored.to_record())
    assert incidents.in_state(IncidentState.AWAITING_APPROVAL) == [waiting(1)]


def test_keeping_a_task_token_leaves_the_incidents_version_alone(incidents: IncidentStore):
    incidents.create(waiting(1))
    loaded = incidents.get(waiting(1).incident_id)
    assert loaded is not None

    incidents.keep_task_token(waiting(1).incident_id, TOKEN)
    incidents.save(loaded)

    assert loaded.version == 1


def test_a_forgotten_task_token_reads_as_none_and_forgetting_again_is_harmless(
    incidents: IncidentStore,
):
    incidents.create(waiting(1))
    incidents.keep_task_token(waiting(1).incident_id, TOKEN)

    incidents.forget_task_token(waiting(1).incident_id)
    incidents.forget_task_token(waiting(1).incident_id)

    assert incidents.task_token(waiting(1).incident_id) is None
    assert incidents.get(waiting(1).incident_id) == waiting(1)
