from __future__ import annotations

import os

os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")

import pytest

from sdc_remediation.lambdas.observability import metrics
from tests.unit.world import World


@pytest.fixture(autouse=True)
def _fresh_metrics():
    """Logic calls add pipeline counters; outside a handler nothing flushes them."""
    metrics.clear_metrics()
    yield
    metrics.clear_metrics()


@pytest.fixture
def world() -> World:
    return World()
