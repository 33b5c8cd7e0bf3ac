"""The approval request reads the suspect GPU's hardware counters before it builds the card, keeps
what it found on the incident, and never waits for or fails because of them."""

from __future__ import annotations

import pytest

from sdc_remediation.infra.local.memory import FakePrometheus
from sdc_remediation.lambdas.logic import approval
from sdc_remediation.lambdas.models.errors import (
    TelemetryRefused,
    TelemetrySlow,
    TelemetryUnreachable,
)
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.payloads import ApprovalRequest
from sdc_remediation.lambdas.models.telemetry import TelemetryState
from sdc_remediation.lambdas.wording import cards
from tests.conftest import load_fixture
from tests.unit.test_telemetry import UUID, WORKSPACE
from tests.unit.world import CLUSTER, TOKEN, World, settings


def telemetry_world(*answers) -> World:
    world = World(settings=settings(telemetry={CLUSTER: WORKSPACE}))
    world.prometheus = FakePrometheus(*answers)
    world.store_fixture_report()
    return world


def card_of(world: World) -> str:
    return world.notifier.published[-1].message


def paragraph(card: str, heading: str) -> list[str]:
    """The lines of one paragraph of the card, its heading first."""
    (found,) = [p for p in card.split("\n\n") if p.startswith(heading)]
    return found.splitlines()


def test_the_card_names_the_xid_and_the_row_remap_failure_of_the_suspect_gpu():
    world = telemetry_world(load_fixture("events", "prometheus_query_range"))

    world.awaiting_approval()

    lines = paragraph(card_of(world), "HARDWARE TELEMETRY")
    assert lines[1] == (
        f"  XID 79 at 08:03:15 UTC on {UUID} (GPU 5): GPU has fallen off the bus (usually hardware)"
    )
    assert lines[2].startswith(
        f"  row remap FAILED (no spare row left to repair its memory) on {UUID}"
    )
    assert lines[-1] == f"  dashboard: {WORKSPACE.dashboard}"


def test_what_the_counters_showed_is_kept_on_the_incident_and_in_the_audit_log():
    world = telemetry_world(load_fixture("events", "prometheus_query_range"))

    incident_id = world.awaiting_approval()

    incident = world.incident(incident_id)
    assert incident.telemetry is not None
    assert incident.telemetry.state == TelemetryState.SIGNAL
    assert [f.kind for f in incident.telemetry.signals] == ["xid", "row_remap_failed"]
    requested = world.audit.entries(incident_id)[-1]
    assert requested.action == "approval_requested"
    assert requested.details["telemetry"] == {
        "state": "signal",
        "summary": incident.telemetry.summary,
    }


def test_the_card_rebuilt_from_the_stored_incident_says_the_same():
    """`sdc show` rebuilds the card from the incident record: it must not ask again."""
    world = telemetry_world(load_fixture("events", "prometheus_query_range"))
    incident_id = world.awaiting_approval()
    sent = paragraph(card_of(world), "HARDWARE TELEMETRY")
    world.prometheus.answer(TelemetryUnreachable("must not be asked"))

    incident = world.incident(incident_id)
    again = cards.approval_card(incident, world.settings).text

    assert paragraph(again, "HARDWARE TELEMETRY") == sent
    assert len(world.prometheus.calls) == 1


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (TelemetrySlow("workspace ws-x did not answer within 5 s"), "did not answer within 5 s"),
        (
            TelemetryRefused("workspace ws-x refused the query (403: not authorized)"),
            "refused the query (403",
        ),
        (TelemetryUnreachable("workspace ws-x could not be reached"), "could not be reached"),
    ],
)
def test_an_unusable_workspace_is_one_line_on_the_card_and_the_approval_still_waits(error, words):
    world = telemetry_world(error)

    incident_id = world.awaiting_approval()

    incident = world.incident(incident_id)
    assert (incident.state, world.store.task_token(incident_id)) == (
        IncidentState.AWAITING_APPROVAL,
        TOKEN,
    )
    lines = paragraph(card_of(world), "HARDWARE TELEMETRY")
    assert len(lines) == 3  # heading, the one line, the dashboard
    assert lines[1].startswith("  not available: ") and words in lines[1]
    assert lines[1].endswith("this does not clear the node")
    assert world.audit.actions(incident_id)[-1] == "approval_requested"


def test_a_cluster_without_a_workspace_gets_one_line_saying_so(world):
    world.store_fixture_report()

    world.awaiting_approval()

    assert paragraph(card_of(world), "HARDWARE TELEMETRY")[1:] == [
        "  not configured for cluster ml-cluster-1 (sdc:telemetry): look at the GPU's counters "
        "yourself before deciding"
    ]
    assert world.prometheus.calls == []


def test_asking_again_on_a_retried_request_replaces_what_was_kept():
    world = telemetry_world(TelemetrySlow("workspace ws-x did not answer within 5 s"))
    incident_id = world.awaiting_approval()
    world.prometheus.answer(load_fixture("events", "prometheus_query_range"))

    approval.request_approval(ApprovalRequest(incident_id, TOKEN), world.deps)

    assert world.incident(incident_id).telemetry.state == TelemetryState.SIGNAL
