"""Repeat offenders: past incidents of the same instance and the same GPU reach the approval card
and turn a transient verdict into a proposed replacement."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

from sdc_remediation.lambdas.logic import approval, closing, intake
from sdc_remediation.lambdas.models.events import parse_contributor_event
from sdc_remediation.lambdas.models.guard import PastIncident
from sdc_remediation.lambdas.models.payloads import (
    CloseRequest,
    Outcome,
)
from sdc_remediation.lambdas.models.report import parse_report_event
from tests.unit.reports import NODES, report_event
from tests.unit.world import CLUSTER, GROUP, World, alarm_event

SUSPECT = NODES[1]  # rank 13 of the alarm fixtures
GPU_13 = "GPU-0000000d-5a1e-4c1d-9e7b-000000019223"


def cluster_of_rank_map(world: World) -> None:
    for node in NODES:
        world.hyperpod.add_node(CLUSTER, GROUP, node)


def incident_from(world: World, alarm: str, minute: int) -> str:
    event = report_event(alarm, report_id=f"r-{alarm[:8]}-{minute:08d}")
    emitted = datetime(2026, 11, 30, 8, tzinfo=UTC) + timedelta(minutes=minute)
    event["detail"]["emitted_at"] = emitted.isoformat()
    world.clock.current = max(world.clock.current, emitted)  # received as it is emitted
    (opened,) = intake.store_report(parse_report_event(event), world.deps)["incidents"]
    return opened["incident_id"]


def card_for(world: World, incident_id: str) -> str:
    world.awaiting_approval(incident_id)
    return world.notifier.published[-1].message


def rejected(world: World, incident_id: str) -> None:
    card_for(world, incident_id)
    approval.decide(world.decision(incident_id, "reject", "transient, keep watching"), world.deps)
    closing.close_incident(CloseRequest(incident_id, Outcome.REJECTED, None), world.deps)


def test_a_closed_incident_is_kept_under_its_instance_and_its_gpus(world):
    cluster_of_rank_map(world)
    first = incident_from(world, "nonfinite_transient", 0)

    rejected(world, first)

    (by_instance,) = world.store.past_for_instance(SUSPECT)
    (by_gpu,) = world.store.past_for_gpu(GPU_13)
    assert by_instance == by_gpu
    assert (by_instance.incident_id, by_instance.state) == (first, "rejected")


def test_a_first_transient_verdict_keeps_the_node_isolated(world):
    cluster_of_rank_map(world)

    card = card_for(world, incident_from(world, "nonfinite_transient", 0))

    assert "RECOMMENDATION: REBOOT, THEN HEALTH-CHECK AGAIN" in card
    assert "none: no earlier incident" in card


def test_a_transient_verdict_on_a_node_with_history_is_proposed_for_replacement(world):
    cluster_of_rank_map(world)
    first = incident_from(world, "nonfinite_transient", 0)
    rejected(world, first)

    card = card_for(world, incident_from(world, "nonfinite_transient", 90))

    assert "RECOMMENDATION: REPLACE AFTER REVIEW" in card
    assert "transient fault on a node with history" in card
    assert f"{first}: rejected" in card


def test_the_history_follows_the_gpu_to_another_instance_id(world):
    cluster_of_rank_map(world)
    world.store.record_past(
        PastIncident(
            incident_id="sdc-ml-cluster-1-i-0ffffffffffffffff-20261101T000000",
            cluster_name=CLUSTER,
            instance_id="i-0ffffffffffffffff",  # the same GPU under an earlier instance id
            state="expired",
            created_at="2026-11-01T00:00:00+00:00",
            closed_at="2026-11-02T00:00:00+00:00",
            gpu_uuids=(GPU_13,),
        )
    )

    card = card_for(world, incident_from(world, "nonfinite_transient", 0))

    assert "instance i-0ffffffffffffffff" in card and GPU_13 in card
    assert "RECOMMENDATION: REPLACE AFTER REVIEW" in card


def test_storm_held_incidents_are_listed_but_are_no_hardware_history(world):
    cluster_of_rank_map(world)
    world.store.record_past(
        PastIncident(
            incident_id="sdc-ml-cluster-1-i-0bb00000000000002-20261101T000000",
            cluster_name=CLUSTER,
            instance_id=SUSPECT,
            state="held",
            created_at="2026-11-01T00:00:00+00:00",
            closed_at="2026-11-01T00:00:00+00:00",
            hold_kind="storm",
        )
    )

    card = card_for(world, incident_from(world, "nonfinite_transient", 0))

    assert "held (storm)" in card
    assert "RECOMMENDATION: REBOOT, THEN HEALTH-CHECK AGAIN" in card


def test_a_held_incident_is_kept_in_the_history_when_it_is_recorded(world):
    world.switch.value = "true"
    event = copy.deepcopy(alarm_event())

    result = intake.open_incident(parse_contributor_event(event), world.deps)

    (past,) = world.store.past_for_instance(world.incident(result["incident_id"]).instance_id)
    assert (past.state, past.hold_kind) == ("held", "paused")
