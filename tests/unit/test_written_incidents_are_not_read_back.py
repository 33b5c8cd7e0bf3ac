"""A step that has just written an incident goes on with what it wrote: it does not read the
incident back (a consistent read each, on DynamoDB). Every write is conditional on the version
it holds, so a copy gone stale still cannot overwrite a newer one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sdc_remediation.lambdas.logic import approval, closing, intake, isolation
from sdc_remediation.lambdas.models.errors import DependencyFailed
from sdc_remediation.lambdas.models.events import parse_contributor_event
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.isolation import IsolationState
from sdc_remediation.lambdas.models.payloads import CloseRequest, IncidentRef, Outcome
from sdc_remediation.lambdas.models.report import parse_report_event
from sdc_remediation.lambdas.models.settings import IsolationConfig
from tests.unit.reports import NODES, report_event
from tests.unit.world import (
    CLUSTER,
    EKS,
    GROUP,
    World,
    alarm_event,
    room_for_a_job,
    settings,
)


class Ops(list[tuple[str, str]]):
    """("read" | "write", incident id) for every get, create, create_held and save."""

    def reads_after_first_write(self, incident_id: str) -> int:
        mine = [op for op, subject in self if subject == incident_id]
        assert "write" in mine, f"{incident_id} was never written: {self}"
        return mine[mine.index("write") :].count("read")


def recording(world: World, monkeypatch: pytest.MonkeyPatch) -> Ops:
    """Record the reads and writes of incidents in `world` from now on."""
    log = Ops()
    store = world.store

    def recorded(op: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def record(first: Any, *args: Any, **kwargs: Any) -> Any:
            log.append((op, first.incident_id if isinstance(first, Incident) else first))
            return call(first, *args, **kwargs)

        return record

    for name in ("create", "create_held", "save"):
        monkeypatch.setattr(store, name, recorded("write", getattr(store, name)))
    monkeypatch.setattr(store, "get", recorded("read", store.get))
    return log


@pytest.fixture
def ops(world: World, monkeypatch: pytest.MonkeyPatch) -> Ops:
    return recording(world, monkeypatch)


@pytest.fixture
def eks_world() -> World:
    """Its cluster orchestrated by EKS, with node isolation on."""
    isolate = {CLUSTER: IsolationConfig(isolate=True, eks_cluster=EKS)}
    return World(eks_cluster=EKS, settings=settings(node_isolation=isolate))


def test_an_opened_incident_starts_its_execution_from_what_was_created(world: World, ops: Ops):
    result = intake.open_incident(parse_contributor_event(alarm_event()), world.deps)

    assert ops.reads_after_first_write(result["incident_id"]) == 0
    assert result["action"] == "opened"
    assert world.incident(result["incident_id"]).execution_arn is not None


def test_a_job_level_incident_claims_its_locks_and_starts_from_what_was_created(
    world: World, ops: Ops
):
    for node in NODES:
        world.hyperpod.add_node(CLUSTER, GROUP, node)
    world.settings = room_for_a_job()

    result = intake.store_report(
        parse_report_event(report_event("weights_no_majority")), world.deps
    )

    (opened,) = result["incidents"]
    assert ops.reads_after_first_write(opened["incident_id"]) == 0
    assert opened["action"] == "opened"
    assert world.incident(opened["incident_id"]).execution_arn is not None


def test_an_alarm_attaching_to_the_incident_a_report_opened_goes_on_from_what_it_attached(
    world: World, ops: Ops
):
    world.store_fixture_report()
    ops.clear()

    result = intake.open_incident(parse_contributor_event(alarm_event()), world.deps)

    assert ops.reads_after_first_write(result["incident_id"]) == 0
    assert result["action"] == "attached"
    assert world.incident(result["incident_id"]).metrics == ["sdc_replay_mismatch"]


def test_a_held_incident_is_notified_from_what_was_created(world: World, ops: Ops):
    world.switch.value = "true"

    result = intake.open_incident(parse_contributor_event(alarm_event()), world.deps)

    assert ops.reads_after_first_write(result["incident_id"]) == 0
    assert result["action"] == "held"
    assert world.incident(result["incident_id"]).close_notified is True


def test_a_decision_not_delivered_keeps_its_claim_pending_on_what_was_written(
    world: World, ops: Ops
):
    incident_id = world.awaiting_approval()
    ops.clear()
    world.workflow.fail_next_send = DependencyFailed("SendTaskSuccess failed")

    with pytest.raises(DependencyFailed):
        approval.decide(world.decision(incident_id), world.deps)

    assert ops.reads_after_first_write(incident_id) == 0
    assert world.incident(incident_id).decision.delivery == "pending"


def test_isolating_a_node_settles_on_what_its_write_ahead_wrote(
    eks_world: World, monkeypatch: pytest.MonkeyPatch
):
    incident_id = eks_world.opened()
    ops = recording(eks_world, monkeypatch)

    result = isolation.isolate_node(IncidentRef(incident_id), eks_world.deps)

    assert ops.reads_after_first_write(incident_id) == 0
    assert result["isolated"] is True
    assert ops.count(("write", incident_id)) == 2  # the write-ahead, then the outcome


def test_closing_releases_the_isolation_from_what_the_closing_wrote(
    eks_world: World, monkeypatch: pytest.MonkeyPatch
):
    incident_id = eks_world.opened()
    isolation.isolate_node(IncidentRef(incident_id), eks_world.deps)
    ops = recording(eks_world, monkeypatch)

    closing.close_incident(CloseRequest(incident_id, Outcome.FAILED, None), eks_world.deps)

    assert ops.reads_after_first_write(incident_id) == 0
    assert eks_world.incident(incident_id).isolation.state == IsolationState.RELEASED
