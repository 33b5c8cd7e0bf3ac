"""HistoryStore: closed incidents kept by instance id and by GPU UUID, newest closing first."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from sdc_remediation.lambdas.logic.ports import HistoryStore
from sdc_remediation.lambdas.models.guard import PAST_INCIDENTS_LIMIT, HoldKind, PastIncident
from sdc_remediation.lambdas.models.incident import IncidentState
from tests.contract.records import past


def _by_instance(history: HistoryStore) -> list[PastIncident]:
    return history.past_for_instance("i-01")


def _by_gpu(history: HistoryStore) -> list[PastIncident]:
    return history.past_for_gpu("GPU-a")


LOOKUPS = pytest.mark.parametrize("lookup", [_by_instance, _by_gpu], ids=["instance", "gpu"])


def test_a_recorded_incident_is_found_by_its_instance_and_each_of_its_gpus(history: HistoryStore):
    recorded = past(1, closed_at="2026-11-30T09:15:04+00:00", gpus=("GPU-a", "GPU-b"))

    history.record_past(recorded)

    assert history.past_for_instance("i-01") == [recorded]
    assert history.past_for_gpu("GPU-a") == [recorded]
    assert history.past_for_gpu("GPU-b") == [recorded]


def test_an_incident_without_gpus_is_found_by_its_instance_only(history: HistoryStore):
    recorded = past(1, closed_at="2026-11-30T09:15:04+00:00")

    history.record_past(recorded)

    assert history.past_for_instance("i-01") == [recorded]
    assert history.past_for_gpu("") == []


@pytest.mark.parametrize(
    "lookup",
    [lambda s: s.past_for_instance("i-unknown"), lambda s: s.past_for_gpu("GPU-unknown")],
    ids=["instance", "gpu"],
)
def test_nothing_recorded_reads_as_empty(
    history: HistoryStore, lookup: Callable[[HistoryStore], list[PastIncident]]
):
    history.record_past(past(1, closed_at="2026-11-30T09:15:04+00:00", gpus=("GPU-a",)))

    assert lookup(history) == []


@LOOKUPS
def test_recording_the_same_incident_twice_keeps_one(
    history: HistoryStore, lookup: Callable[[HistoryStore], list[PastIncident]]
):
    recorded = past(1, closed_at="2026-11-30T09:15:04+00:00", gpus=("GPU-a",))

    history.record_past(recorded)
    history.record_past(recorded)

    assert lookup(history) == [recorded]


@LOOKUPS
def test_the_same_incident_recorded_with_another_closing_time_is_another_entry(
    history: HistoryStore, lookup: Callable[[HistoryStore], list[PastIncident]]
):
    first = past(1, closed_at="2026-11-30T09:15:04+00:00", gpus=("GPU-a",))
    again = past(1, closed_at="2026-11-30T09:15:09+00:00", gpus=("GPU-a",))

    history.record_past(first)
    history.record_past(again)

    assert lookup(history) == [again, first]


@LOOKUPS
def test_the_newest_closing_comes_first_whatever_the_order_recorded(
    history: HistoryStore, lookup: Callable[[HistoryStore], list[PastIncident]]
):
    middle = past(1, closed_at="2026-11-30T09:00:00+00:00", gpus=("GPU-a",))
    oldest = past(2, closed_at="2026-11-29T09:00:00+00:00", gpus=("GPU-a",))
    newest = past(3, closed_at="2026-12-01T09:00:00+00:00", gpus=("GPU-a",))
    same_time = past(4, closed_at="2026-11-30T09:00:00+00:00", gpus=("GPU-a",))
    for recorded in (middle, oldest, newest, same_time):
        history.record_past(recorded)

    # equal closing times: by incident id, highest first
    assert lookup(history) == [newest, same_time, middle, oldest]


@LOOKUPS
def test_a_lookup_returns_at_most_the_newest_limit(
    history: HistoryStore, lookup: Callable[[HistoryStore], list[PastIncident]]
):
    recorded = [
        past(n, closed_at=f"2026-11-{1 + n // 24:02d}T{n % 24:02d}:00:00+00:00", gpus=("GPU-a",))
        for n in range(PAST_INCIDENTS_LIMIT + 3)
    ]
    for each in recorded:
        history.record_past(each)

    assert lookup(history) == recorded[::-1][:PAST_INCIDENTS_LIMIT]


def test_history_is_kept_by_instance_whatever_the_cluster(history: HistoryStore):
    here = past(1, closed_at="2026-11-30T09:00:00+00:00")
    elsewhere = dataclasses.replace(
        here,
        incident_id="sdc-ml-cluster-2-1",
        cluster_name="ml-cluster-2",
        closed_at="2026-11-30T08:00:00+00:00",
    )

    history.record_past(here)
    history.record_past(elsewhere)

    assert history.past_for_instance("i-01") == [here, elsewhere]


def test_every_field_round_trips(history: HistoryStore):
    recorded = PastIncident(
        incident_id="sdc-ml-cluster-1-1",
        cluster_name="ml-cluster-1",
        instance_id="i-01",
        state=IncidentState.HELD,
        created_at="2026-11-30T08:15:04+00:00",
        closed_at="2026-11-30T09:15:04+00:00",
        gpu_uuids=("GPU-a", "GPU-b"),
        hold_kind=HoldKind.GUARD,
        advice="replace: repeat offender",
    )

    history.record_past(recorded)

    assert history.past_for_gpu("GPU-b") == [recorded]
