from __future__ import annotations

import dataclasses

import pytest

from sdc_remediation.infra.local.memory import InMemoryAuditLog, SteppingClock
from sdc_remediation.lambdas.logic.core.audit import (
    GENESIS,
    Auditor,
    canonical_json,
    empty_chain,
    entry_hash,
    verify_anchored,
    verify_chain,
    verify_incident,
    verify_subjects,
)
from sdc_remediation.lambdas.models.errors import ConditionFailed


def chain(n: int = 4) -> tuple[InMemoryAuditLog, list]:
    log = InMemoryAuditLog()
    auditor = Auditor(log, SteppingClock())
    for i in range(n):
        auditor.record("sdc-1", f"step_{i}", actor="test", details={"i": i}, request_ids=["r"])
    return log, log.entries("sdc-1")


def test_entries_are_numbered_in_order_and_linked_to_the_previous_hash():
    _, entries = chain(3)

    assert [e.seq for e in entries] == [1, 2, 3]
    assert entries[0].prev_hash == GENESIS
    assert entries[1].prev_hash == entries[0].hash
    assert entries[2].prev_hash == entries[1].hash


def test_hash_is_sha256_over_the_canonical_json_of_the_entry_without_hash():
    _, entries = chain(1)
    entry = entries[0]

    assert "hash" not in entry.body()
    assert entry.hash == entry_hash(entry.body())
    assert len(entry.hash) == 64


def test_an_untouched_chain_verifies():
    _, entries = chain()

    verdict = verify_chain(entries)

    assert verdict.ok
    assert verdict.checked == 4


def test_a_changed_detail_breaks_the_chain_at_that_entry():
    _, entries = chain()
    entries[2] = dataclasses.replace(entries[2], details={"i": 99})

    verdict = verify_chain(entries)

    assert not verdict.ok
    assert verdict.broken_seq == 3
    assert "hash" in (verdict.reason or "")


def test_a_rehashed_forgery_breaks_the_link_of_the_next_entry():
    _, entries = chain()
    forged = dataclasses.replace(entries[1], action="nothing_happened")
    entries[1] = dataclasses.replace(forged, hash=entry_hash(forged.body()))

    verdict = verify_chain(entries)

    assert verdict.broken_seq == 3
    assert "prev_hash" in (verdict.reason or "")


def test_a_removed_entry_is_named_as_missing():
    _, entries = chain()
    del entries[1]

    verdict = verify_chain(entries)

    assert verdict.broken_seq == 2
    assert "missing" in (verdict.reason or "")


def test_canonical_json_does_not_depend_on_key_order():
    assert canonical_json({"b": 1, "a": [1, {"d": 2, "c": 3}]}) == canonical_json(
        {"a": [1, {"c": 3, "d": 2}], "b": 1}
    )


def test_request_ids_that_are_unknown_are_left_out():
    log = InMemoryAuditLog()

    entry = Auditor(log, SteppingClock()).record(
        "sdc-1", "x", actor="t", request_ids=[None, "r1", ""]
    )

    assert entry.request_ids == ["r1"]


class RacingLog(InMemoryAuditLog):
    """Another writer takes the next seq just before our first append."""

    def __init__(self) -> None:
        super().__init__()
        self.raced = False

    def append(self, entry):
        if not self.raced:
            self.raced = True
            super().append(dataclasses.replace(entry, action="other_writer"))
        super().append(entry)


def test_a_lost_race_for_a_seq_is_retried_on_top_of_the_winner():
    log = RacingLog()

    entry = Auditor(log, SteppingClock()).record("sdc-1", "mine", actor="t")

    assert entry.seq == 2
    assert [e.action for e in log.entries("sdc-1")] == ["other_writer", "mine"]
    assert entry.prev_hash == log.entries("sdc-1")[0].hash


class FullLog(InMemoryAuditLog):
    def append(self, entry):
        raise ConditionFailed("always taken")


def test_an_append_that_keeps_losing_gives_up_with_the_condition_error():
    with pytest.raises(ConditionFailed):
        Auditor(FullLog(), SteppingClock()).record("sdc-1", "x", actor="t")


def _deps_with(log: InMemoryAuditLog):
    from tests.unit.world import World

    world = World()
    world.audit = log
    return world.deps


def test_verify_incident_walks_the_stored_chain_of_one_incident():
    log, _ = chain(4)

    verdict = verify_incident("sdc-1", _deps_with(log))

    assert (verdict.ok, verdict.checked) == (True, 4)


def test_verify_incident_names_the_first_broken_link():
    log, entries = chain(4)
    log.items["sdc-1"][3] = dataclasses.replace(entries[2], details={"i": "tampered"})

    verdict = verify_incident("sdc-1", _deps_with(log))

    assert (verdict.ok, verdict.broken_seq) == (False, 3)
    assert "hash" in verdict.reason


def test_an_incident_without_audit_entries_does_not_verify():
    verdict = verify_incident("sdc-unknown", _deps_with(InMemoryAuditLog()))

    assert not verdict.ok
    assert "no audit entries" in verdict.reason


def test_no_entries_at_all_get_one_verdict_whoever_checks_them():
    verdicts = {
        "verify_chain": verify_chain([]),
        "verify_incident": verify_incident("sdc-1", _deps_with(InMemoryAuditLog())),
        "verify_anchored": verify_anchored([], []),
        "verify_subjects, no anchor": verify_subjects({"sdc-1": []}, None)["sdc-1"],
        "verify_subjects, anchored": verify_subjects({"sdc-1": []}, [])["sdc-1"],
    }

    assert {name: verdict for name, verdict in verdicts.items() if verdict != empty_chain()} == {}
    assert (empty_chain().ok, empty_chain().broken_seq) == (False, 1)
