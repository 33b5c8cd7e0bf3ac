from __future__ import annotations

import os

os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")

import pytest

from sdc_remediation.lambdas.observability import metrics
from tests.unit.reports import NODES
from tests.unit.world import CLUSTER, GROUP, World, room_for_a_job


@pytest.fixture(autouse=True)
def _fresh_metrics():
    """Logic calls add pipeline counters; outside a handler nothing flushes them."""
    metrics.clear_metrics()
    yield
    metrics.clear_metrics()


@pytest.fixture
def world() -> World:
    return World()


@pytest.fixture
def job_world(world: World) -> World:
    """The fixture rank map's four nodes in the fake cluster, whose guard and storm rule leave
    room for a job-level incident over all four (every node counts against both)."""
    for node in NODES:
        world.hyperpod.add_node(CLUSTER, GROUP, node)
    world.settings = room_for_a_job()
    return world
