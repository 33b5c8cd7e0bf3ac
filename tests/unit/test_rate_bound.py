"""The rate bound on what reports open: per cluster and per job, per minute of the pipeline's
clock; beyond it incidents are held with one notice per cluster and minute, each audited,
nothing asked of HyperPod (lambdas/logic/safety/rate.py)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from sdc_remediation.infra.local.memory import SteppingClock
from sdc_remediation.lambdas.logic import intake
from sdc_remediation.lambdas.models.events import parse_contributor_event
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.report import parse_report_event
from tests.unit.reports import REPORT_TIME, forged_event
from tests.unit.world import CLUSTER, GROUP, World, alarm_event, settings

S = IncidentState
BOUND = 10  # the default sdc:reportOpeningsPerMinute
JOB_BOUND = 5  # the default sdc:jobOpeningsPerMinute


@dataclass
class MillisecondClock(SteppingClock):
    """Each `now()` a millisecond after the previous one: a flood handled within one minute."""

    current: datetime = datetime(2026, 11, 30, 8, 15, 0, tzinfo=UTC)

    def now(self) -> datetime:
        self.current += timedelta(milliseconds=1)
        return self.current


@pytest.fixture
def world() -> World:
    """A 200-node cluster whose storm rule and guard leave room: only the rate bound holds."""
    world = World(clock=MillisecondClock())
    world.settings = settings(
        storm_threshold=10_000, guard_max_open_nodes=10_000, guard_max_open_percent=100
    )
    for n in range(200):
        world.hyperpod.add_node(CLUSTER, GROUP, node(n))
    return world


def node(n: int) -> str:
    return f"i-0a{n:015x}"


def forged(n: int, nodes: list[str], *, job: str | None = None, **changes) -> dict:
    """The n-th forged report: a few culprits, its own report id and (unless `job`) job."""
    event = forged_event(nodes, ambiguous=False, role="culprit", **changes)
    event["id"] = f"forged-event-{n}"
    event["detail"].update(report_id=f"forged-{n}", job_name=job or f"job-{n}")
    return event


def store(world: World, event: dict):
    return intake.store_report(parse_report_event(event), world.deps)


def flood(
    world: World, reports: int = 50, per_report: int = 3, first: int = 0, **changes
) -> list[dict]:
    """`reports` forged reports (numbered from `first`), each naming `per_report` nodes."""
    results = []
    for n in range(reports):
        nodes = [node(per_report * (first + n) + k) for k in range(per_report)]
        results += store(world, forged(first + n, nodes, **changes))["incidents"]
    return results


def by_action(results: list[dict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for result in results:
        counts[result["action"]] = counts.get(result["action"], 0) + 1
    return counts


def rate_held(world: World) -> list:
    return [
        i
        for i in world.store.incidents.values()
        if i.state is S.HELD and i.hold and i.hold.kind == "rate"
    ]


def test_fifty_small_forged_reports_open_at_most_the_bound_and_the_rest_are_held_with_one_notice(
    world,
):
    results = flood(world)  # 150 culprits, each a node of the cluster, 50 jobs

    assert by_action(results) == {"opened": BOUND, "held": 150 - BOUND}
    assert len(world.workflow.executions) == BOUND
    assert len(rate_held(world)) == 150 - BOUND
    (notice,) = world.notifier.published
    assert "rate bound" in notice.message
    assert "only notice" in notice.message


def test_each_refused_opening_is_audited_as_held_by_the_rate_bound(world):
    flood(world, reports=10)  # 30 culprits: 20 over the bound

    held = {i.incident_id for i in rate_held(world)}
    audited = {
        subject
        for subject, chain in world.audit.all_chains().items()
        for entry in chain
        if entry.action == "incident_held" and entry.details["kind"] == "rate"
    }
    assert audited == held and len(held) == 20


def test_one_jobs_reports_open_at_most_the_job_bound_and_leave_room_for_another_job(world):
    flooding = flood(world, reports=4, job="one-job")  # 12 culprits of one job

    other = store(world, forged(99, [node(150)], job="another-job"))["incidents"]

    assert by_action(flooding) == {"opened": JOB_BOUND, "held": 12 - JOB_BOUND}
    assert by_action(other) == {"opened": 1}
    assert len(world.notifier.published) == 1


def test_the_next_minute_opens_again_with_a_notice_of_its_own(world):
    flood(world, reports=5)  # 15 culprits: 5 held
    world.clock.current += timedelta(minutes=1)

    results = flood(world, reports=5, first=5, at=REPORT_TIME + timedelta(minutes=1))

    assert by_action(results)["opened"] == BOUND
    assert len(world.notifier.published) == 2


def test_reports_dated_in_other_minutes_count_in_the_minute_they_are_received(world):
    results = []
    for n in range(15):
        at = REPORT_TIME - timedelta(minutes=n)  # the reporter's date: a minute apart each
        results += store(world, forged(n, [node(n)], at=at))["incidents"]

    assert by_action(results) == {"opened": BOUND, "held": 5}


def alarm_on(world: World, instance_id: str):
    event = copy.deepcopy(alarm_event())
    event["detail"]["alarmContributor"]["attributes"]["InstanceId"] = instance_id
    at = world.clock.current + timedelta(seconds=1)
    event["detail"]["state"]["timestamp"] = at.strftime("%Y-%m-%dT%H:%M:%S.000+0000")
    return intake.open_incident(parse_contributor_event(event), world.deps)


def test_a_genuine_alarm_during_the_flood_opens_its_incident(world):
    flood(world)

    result = alarm_on(world, node(199))

    assert result["action"] == "opened"


def test_an_alarm_on_a_rate_held_node_within_its_minute_joins_the_held_incident(world):
    flood(world, reports=5)
    held = rate_held(world)[0]

    result = alarm_on(world, held.instance_id)

    assert (result["incident_id"], result["action"]) == (held.incident_id, "held")


def test_an_alarm_on_a_rate_held_node_after_its_minute_opens_its_own_incident(world):
    flood(world, reports=5)
    held = rate_held(world)[0]
    world.clock.current += timedelta(minutes=1)

    result = alarm_on(world, held.instance_id)

    assert result["action"] == "opened" and result["incident_id"] != held.incident_id
