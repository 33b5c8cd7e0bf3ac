"""A scaled-down burst on the local run: a culprit report and a contributor alarm for every node
of a 40-node cluster, some delivered two to four times. The figures are counted from the
account afterwards (`tests.bench.bench_burst`, which runs the same burst on 1,000 nodes for
`make bench`)."""

from __future__ import annotations

import pytest

from sdc_remediation.lambdas.logic.safety.guard import open_limit
from tests.bench.bench_burst import Burst, burst

pytestmark = [pytest.mark.slow, pytest.mark.synth]

NODES = 40
STORM_OUT_OF_REACH = {"sdc:stormThreshold": 10_000}
"""A deployment whose storm hold cannot start in a 40-node burst: the guard alone holds."""


@pytest.fixture(scope="module")
def storm_burst() -> Burst:
    """The local deployment as synthesized: its storm hold starts within the burst."""
    return burst(NODES)


@pytest.fixture(scope="module")
def guard_burst() -> Burst:
    """The alarms alone (reports would meet the rate bound first)."""
    return burst(NODES, context=STORM_OUT_OF_REACH, reports=False)


@pytest.fixture(params=["storm_burst", "guard_burst"])
def outcome(request: pytest.FixtureRequest) -> Burst:
    burst_: Burst = request.getfixturevalue(request.param)
    return burst_


def test_every_delivery_is_handled(outcome: Burst):
    assert outcome.deliveries > NODES
    assert outcome.failed_deliveries == 0


def test_exactly_the_guard_limit_of_incidents_open(outcome: Burst):
    assert outcome.opened == open_limit(NODES, outcome.settings)
    assert outcome.executions == outcome.opened


def test_every_other_instance_ends_in_a_held_incident(outcome: Burst):
    assert outcome.held_at_intake == NODES - outcome.opened
    assert outcome.instances_covered == NODES
    assert outcome.instances_other == 0


def test_no_instance_and_no_event_gets_a_second_incident(outcome: Burst):
    assert len(outcome.incidents) == NODES
    assert outcome.instances_with_several == 0
    assert outcome.events_with_several == 0


def test_nothing_is_replaced(outcome: Burst):
    assert outcome.replace_calls == 0


def test_a_storm_holds_the_rest_with_one_notification(storm_burst: Burst):
    assert storm_burst.settings.storm_threshold <= NODES
    assert set(storm_burst.hold_kinds) == {"storm"}
    assert storm_burst.notifications["storm_hold"] == 1
    assert storm_burst.notifications["held"] == 0


def test_without_a_storm_the_guard_holds_the_rest_each_notified(guard_burst: Burst):
    held = NODES - guard_burst.opened
    assert guard_burst.hold_kinds == {"guard": held}
    assert guard_burst.notifications["held"] == held
    assert guard_burst.notifications["storm_hold"] == 0
