"""AuditLog: append-only entries per incident, a seq written once, read back in seq order."""

from __future__ import annotations

import dataclasses

import pytest

from sdc_remediation.lambdas.logic.ports import AuditLog
from sdc_remediation.lambdas.models.errors import ConditionFailed
from tests.contract.records import entry


def test_an_appended_entry_reads_back_equal_with_every_kind_of_detail(audit: AuditLog):
    appended = entry(
        1,
        step=30,
        ranks=[13],
        window=None,
        note="ünïcode",
        ratio=0.25,
        big=12345678901234,
        ok=True,
        empty=[],
        nested={"a": {"b": [1, 2.5, {"c": False}]}},
    )

    audit.append(appended)

    assert audit.entries("sdc-1") == [appended]
    assert audit.last("sdc-1") == appended


def test_a_taken_seq_is_refused_and_the_first_entry_stays(audit: AuditLog):
    first = entry(1)
    audit.append(first)

    with pytest.raises(ConditionFailed):
        audit.append(dataclasses.replace(first, action="rewritten"))

    assert audit.entries("sdc-1") == [first]


def test_a_seq_taken_by_another_incident_is_free_for_this_one(audit: AuditLog):
    audit.append(entry(1, incident_id="sdc-other"))

    audit.append(entry(1))

    assert audit.entries("sdc-1") == [entry(1)]
    assert audit.entries("sdc-other") == [entry(1, incident_id="sdc-other")]


def test_only_a_taken_seq_is_refused_a_gap_is_the_chains_business(audit: AuditLog):
    audit.append(entry(1))

    audit.append(entry(3))

    assert [e.seq for e in audit.entries("sdc-1")] == [1, 3]


@pytest.mark.parametrize("order", [[10, 2, 9, 1], [1, 2, 9, 10]], ids=["shuffled", "in-order"])
def test_entries_read_back_in_numeric_seq_order_and_last_is_the_highest(
    audit: AuditLog, order: list[int]
):
    for seq in order:
        audit.append(entry(seq))

    assert [e.seq for e in audit.entries("sdc-1")] == [1, 2, 9, 10]
    last = audit.last("sdc-1")
    assert last is not None and last.seq == 10


def test_an_incident_without_entries_reads_as_empty(audit: AuditLog):
    audit.append(entry(1, incident_id="sdc-other"))

    assert audit.entries("sdc-1") == []
    assert audit.last("sdc-1") is None


def test_the_log_keeps_what_was_appended_not_the_callers_object(audit: AuditLog):
    appended = entry(1, nested={"a": [1]})
    audit.append(appended)
    appended.details["nested"]["a"].append(2)
    appended.request_ids.append("req-later")

    stored = audit.entries("sdc-1")[0]
    stored.details["nested"]["a"].append(3)

    assert audit.entries("sdc-1") == [entry(1, nested={"a": [1]})]
    assert audit.last("sdc-1") == entry(1, nested={"a": [1]})
