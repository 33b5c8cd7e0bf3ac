"""The decision table's watch rows decide what the pipeline does before anyone decides
(`Row.course`, read through `course_of` by the opening and the isolation step): a straggler
without hardware corroboration is a notice only (recorded, audited, notified; nothing isolated,
nothing health-checked, nothing proposed), a hang the table calls ambiguous is health-checked
without isolation, and the rows that act isolate as before."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

from sdc_remediation.infra.local.memory import FakePrometheus
from sdc_remediation.lambdas.logic import intake, isolation
from sdc_remediation.lambdas.logic.evidence.policy import WATCH_ROWS, Row
from sdc_remediation.lambdas.logic.evidence.recommendation import course_of
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.events import parse_contributor_event
from sdc_remediation.lambdas.models.guard import HoldKind, PastIncident
from sdc_remediation.lambdas.models.hardware_alert import parse_alert_notification
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.isolation import IsolationCause, IsolationState
from sdc_remediation.lambdas.models.payloads import IncidentRef
from sdc_remediation.lambdas.models.recommendation import Course
from sdc_remediation.lambdas.models.report import parse_report_event
from sdc_remediation.lambdas.models.settings import IsolationConfig
from sdc_remediation.lambdas.models.telemetry import TelemetryState
from tests.unit.reports import NODES, REPORT_TIME, report_event
from tests.unit.test_hardware_intake import alert, sns_event
from tests.unit.test_telemetry import WORKSPACE, add_series, quiet_answer, set_from
from tests.unit.test_watch_pipeline import (
    RANK_MAP,
    hang_alarm,
    straggler_alarm,
)
from tests.unit.world import CLUSTER, EKS, GROUP, World, alarm_event, room_for_a_job
from trainer_emitter.contract import Metric

SLOW_RANK = 13
SLOW_NODE = NODES[1]
LATER = REPORT_TIME + timedelta(minutes=1)
THROTTLED = 0x44
"""HW thermal slowdown with the SW power cap."""


def watch_world(*answers: dict[str, Any], isolate: bool = False) -> World:
    """The job's four nodes, room for a job-level incident, the cluster's Prometheus workspace
    answering `answers` (none: every series quiet), and node isolation on where asked."""
    world = World(eks_cluster=EKS if isolate else None)
    for node in NODES:
        world.hyperpod.add_node(CLUSTER, GROUP, node)
        if isolate:
            world.kube.add_node(EKS, f"hyperpod-{node}", node)
    world.settings = dataclasses.replace(
        room_for_a_job(),
        telemetry={CLUSTER: WORKSPACE},
        node_isolation=(
            {CLUSTER: IsolationConfig(isolate=True, eks_cluster=EKS)} if isolate else {}
        ),
    )
    world.prometheus = FakePrometheus(*answers)
    return world


def throttled_answer() -> dict[str, Any]:
    """The slow rank's GPU held down by HW thermal slowdown in its node's series."""
    data = quiet_answer()
    set_from(add_series(data, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", 0x4), "07:50:00", THROTTLED)
    uuid = RANK_MAP.get(SLOW_RANK).gpu_uuid
    for series in data["result"]:
        series["metric"].update(Hostname=f"hyperpod-{SLOW_NODE}", UUID=uuid)
    return data


def store(world: World, alarm: str | dict[str, Any], at: datetime = REPORT_TIME) -> list[Any]:
    event = report_event(alarm, at=at)
    return intake.store_report(parse_report_event(event), world.deps)["incidents"]


def health_checks(world: World) -> list[Any]:
    return world.hyperpod.calls_to("StartClusterHealthCheck")


# -- the rows' courses --------------------------------------------------------------------------


def test_each_watch_row_decides_what_the_pipeline_does():
    assert {row: row.course for row in WATCH_ROWS} == {
        Row.HANG_LOCALISED_BY_AGREEING_SIGNALS: Course.ACT,
        Row.HANG_AMBIGUOUS: Course.CHECK,
        Row.STRAGGLER_CORROBORATED: Course.ACT,
        Row.STRAGGLER_ALONE: Course.NOTICE,
    }


def test_what_each_row_says_it_does_is_its_course():
    for row in WATCH_ROWS:
        assert row.action.startswith("isolate") == (row.course is Course.ACT), row
        assert row.action.startswith("notice only") == (row.course is Course.NOTICE), row
        assert ("nothing isolated" in row.action) == (row.course is not Course.ACT), row


# -- a straggler alone: notice only -------------------------------------------------------------


def test_an_uncorroborated_straggler_is_recorded_as_a_notice_and_nothing_acts():
    world = watch_world()

    (result,) = store(world, straggler_alarm(SLOW_RANK))

    incident = world.incident(result["incident_id"])
    assert result["action"] == "held"
    assert (incident.instance_id, incident.state) == (SLOW_NODE, IncidentState.HELD)
    assert incident.hold_kind is HoldKind.NOTICE
    assert incident.isolation is None
    assert not world.workflow.executions
    assert health_checks(world) == []
    assert not world.store.guard_state(CLUSTER).slots


def test_the_notice_says_notice_only_and_why_and_is_audited():
    world = watch_world()

    (result,) = store(world, straggler_alarm(SLOW_RANK))

    incident_id = result["incident_id"]
    (notice,) = world.notifier.published
    assert "notice only" in notice.subject
    assert "NOTICE ONLY" in notice.message
    assert "Why: no hardware signal of its node corroborates the straggler." in notice.message
    actions = [e.action for e in world.audit.entries(incident_id)]
    assert AuditAction.INCIDENT_HELD in actions
    assert AuditAction.HELD_NOTIFIED in actions
    held = next(e for e in world.audit.entries(incident_id) if e.action == "incident_held")
    assert held.details["kind"] == HoldKind.NOTICE


def test_the_nodes_telemetry_is_read_before_the_notice_and_kept_on_it():
    world = watch_world()

    (result,) = store(world, straggler_alarm(SLOW_RANK))

    telemetry = world.incident(result["incident_id"]).telemetry
    assert telemetry is not None and telemetry.state == TelemetryState.NO_SERIES
    assert world.prometheus.calls


def test_a_second_straggler_report_for_the_node_joins_the_notice_without_a_second_one():
    world = watch_world()
    (first,) = store(world, straggler_alarm(SLOW_RANK))

    (second,) = store(world, straggler_alarm(SLOW_RANK), at=LATER)

    assert second["incident_id"] == first["incident_id"]
    assert len(world.notifier.published) == 1
    assert len(world.incident(first["incident_id"]).reports) == 2


def test_a_hardware_alert_for_the_noticed_node_opens_its_incident_on_the_normal_path():
    world = watch_world()
    (notice,) = store(world, straggler_alarm(SLOW_RANK))

    (opened,) = intake.hardware_alerts(
        parse_alert_notification(sns_event(alert(node=f"hyperpod-{SLOW_NODE}"))), world.deps
    )

    assert opened["action"] == "opened" and opened["incident_id"] != notice["incident_id"]
    incident = world.incident(opened["incident_id"])
    assert incident.state is IncidentState.OPENED
    assert course_of(incident)[0] is Course.ACT
    assert list(world.workflow.executions) == [opened["incident_id"]]


def test_a_notice_is_no_history_of_the_node():
    past = PastIncident(
        incident_id="sdc-notice",
        cluster_name=CLUSTER,
        instance_id=SLOW_NODE,
        state=IncidentState.HELD,
        created_at="2026-11-30T08:15:00+00:00",
        closed_at="2026-11-30T08:15:00+00:00",
        hold_kind=HoldKind.NOTICE,
    )

    assert not past.counts_as_history


# -- a straggler the hardware corroborates: the normal path -------------------------------------


def test_a_straggler_its_nodes_throttling_corroborates_opens_an_incident_that_acts():
    world = watch_world(throttled_answer(), isolate=True)

    (result,) = store(world, straggler_alarm(SLOW_RANK))

    incident = world.incident(result["incident_id"])
    assert (result["action"], incident.state) == ("opened", IncidentState.OPENED)
    assert incident.telemetry is not None and incident.telemetry.state == TelemetryState.SIGNAL
    assert course_of(incident)[0] is Course.ACT
    assert list(world.workflow.executions) == [incident.incident_id]
    isolated = isolation.isolate_node(IncidentRef(incident.incident_id), world.deps)
    assert isolated["isolated"] is True


# -- hangs ------------------------------------------------------------------------------------


def test_a_hang_named_by_one_signal_is_opened_but_isolates_nothing():
    world = watch_world(isolate=True)
    (result,) = store(world, hang_alarm(silent=(SLOW_RANK,)))

    isolation.isolate_node(IncidentRef(result["incident_id"]), world.deps)

    record = world.incident(result["incident_id"]).isolation
    assert record is not None and record.state is IsolationState.NOT_ISOLATED
    assert record.cause == IsolationCause.COURSE
    assert Row.HANG_AMBIGUOUS.evidence in str(record.reason)
    assert not world.kube.node(EKS, f"hyperpod-{SLOW_NODE}").get("unschedulable")


def test_a_hang_spanning_instances_isolates_none_of_its_nodes():
    world = watch_world(isolate=True)
    (result,) = store(world, hang_alarm(5, SLOW_RANK))
    assert world.incident(result["incident_id"]).is_job

    isolation.isolate_node(IncidentRef(result["incident_id"]), world.deps)

    record = world.incident(result["incident_id"]).isolation
    assert record is not None and record.cause == IsolationCause.COURSE
    assert not record.nodes


def test_a_localised_hang_is_isolated_as_before():
    world = watch_world(isolate=True)
    (result,) = store(world, hang_alarm(SLOW_RANK))

    isolated = isolation.isolate_node(IncidentRef(result["incident_id"]), world.deps)

    assert isolated["isolated"] is True


def test_an_sdc_report_on_the_noticed_node_acts_whatever_the_straggler_says():
    world = watch_world(isolate=True)
    (opened,) = store(world, straggler_alarm(SLOW_RANK))  # the notice
    [sdc] = store(world, "replay_culprit", at=LATER)

    incident = world.incident(sdc["incident_id"])
    assert sdc["action"] == "opened" and sdc["incident_id"] != opened["incident_id"]
    assert course_of(incident)[0] is Course.ACT


def test_a_straggler_alarm_without_its_report_is_a_notice_too():
    world = watch_world()
    event = alarm_event()
    event["detail"]["alarmName"] = Metric.STRAGGLER.alarm_name
    event["detail"]["alarmContributor"]["attributes"].update(
        InstanceId=SLOW_NODE, ClusterName=CLUSTER
    )

    result = intake.open_incident(parse_contributor_event(event), world.deps)

    incident = world.incident(str(result["incident_id"]))
    assert incident.metrics == [Metric.STRAGGLER]
    assert (incident.state, incident.hold_kind) == (IncidentState.HELD, HoldKind.NOTICE)
    assert not world.workflow.executions
