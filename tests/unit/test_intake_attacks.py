"""What a training pod (or anyone in the account) can forge cannot make the intake act wrongly
or keep it from acting: each attack that worked against an intake with a path per trigger kind,
run against the one path."""

from __future__ import annotations

import copy
import dataclasses
from datetime import datetime, timedelta
from typing import Any

import pytest

from sdc_remediation.infra.local.memory import SteppingClock
from sdc_remediation.lambdas.logic import closing, health_check, intake
from sdc_remediation.lambdas.logic.evidence import summaries
from sdc_remediation.lambdas.logic.evidence.recommendation import judge
from sdc_remediation.lambdas.logic.opening import claims
from sdc_remediation.lambdas.models.events import parse_contributor_event
from sdc_remediation.lambdas.models.hardware_alert import parse_alert_notification
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.payloads import IncidentRef
from sdc_remediation.lambdas.models.recommendation import Advice
from sdc_remediation.lambdas.models.report import parse_report_event
from sdc_remediation.lambdas.models.settings import IsolationConfig
from tests.conftest import load_fixture
from tests.unit.reports import NODES, REPORT_TIME, forged_event, report_event, suspect
from tests.unit.test_evidence_records import whole_numbers_as_floats
from tests.unit.test_hardware_intake import alert, sns_event
from tests.unit.test_watch_course import throttled_answer, watch_world
from tests.unit.test_watch_pipeline import RANK_MAP as WATCH_RANKS
from tests.unit.test_watch_pipeline import WORLD as WATCH_WORLD
from tests.unit.test_watch_pipeline import hang_alarm, straggler_alarm
from tests.unit.world import (
    CLUSTER,
    EKS,
    GROUP,
    INSTANCE,
    NODE,
    World,
    alarm_event,
    room_for_a_job,
    settings,
)

JOB_LABEL = "training.kubeflow.org/job-name"
MAX_HYPERPOD_CALLS = 10
"""A small constant: one DescribeCluster (twice for a report: its size is asked first) and at
most `claims.MAX_ASKED` (8) DescribeClusterNode calls, however many nodes a claim names."""


def store(world: World, event: dict[str, Any]) -> list[Any]:
    return intake.store_report(parse_report_event(event), world.deps)["incidents"]


def alarm_on(world: World, instance_id: str, event_id: str, seconds: int = 1) -> Any:
    event = copy.deepcopy(alarm_event())
    event["id"] = event_id
    event["detail"]["alarmContributor"]["attributes"]["InstanceId"] = instance_id
    at = world.clock.current + timedelta(seconds=seconds)
    event["detail"]["state"]["timestamp"] = at.strftime("%Y-%m-%dT%H:%M:%S.000+0000")
    return intake.open_incident(parse_contributor_event(event), world.deps)


def culprit(instance_id: str = INSTANCE, node_name: str | None = None, **changes: Any) -> dict:
    """A compute check naming rank 0 on `instance_id` the culprit (replace after review)."""
    return forged_event(
        [instance_id],
        ambiguous=False,
        role="culprit",
        check="compute",
        culprits=[0],
        suspects=[
            suspect(instance_id=instance_id, node_name=node_name or f"hyperpod-{instance_id}")
        ],
        **changes,
    )


def made_up(n: int) -> str:
    return f"i-0e{n:015x}"


def add_nodes(world: World, count: int) -> list[str]:
    nodes = [f"i-0f{n:015x}" for n in range(count)]
    for node in nodes:
        world.hyperpod.add_node(CLUSTER, GROUP, node)
    return nodes


# -- 1. budgets are paid after the checks, never before ------------------------------------------


class StillClock(SteppingClock):
    """Time stands still: every report is received within one minute of the rate bound."""

    def now(self) -> datetime:
        return self.current


def test_forged_reports_naming_made_up_instances_spend_no_budget_a_genuine_culprit_still_acts(
    world,
):
    world.clock = StillClock(world.clock.current)
    add_nodes(world, 20)  # room: the made-up reports each name fewer instances than there are nodes
    flood = world.settings.report_openings_per_minute + 5
    for n in range(flood):  # a new job name each time: no job's budget stops them
        store(world, culprit(made_up(n), job_name=f"job-{n}", report_id=f"forged-{n:04d}"))

    (result,) = store(world, culprit(report_id="genuine-0001"))

    assert result["action"] == "opened"
    assert list(world.workflow.executions) == [result["incident_id"]]


def test_forged_reports_in_a_victim_jobs_name_spend_none_of_that_jobs_budget(world):
    world.clock = StillClock(world.clock.current)
    add_nodes(world, 20)
    for n in range(world.settings.job_openings_per_minute + 3):
        store(world, culprit(made_up(n), job_name="llama-pretrain", report_id=f"forged-{n:04d}"))

    (result,) = store(world, culprit(job_name="llama-pretrain", report_id="genuine-0001"))

    assert result["action"] == "opened"


def rate_held(world: World) -> tuple[list[str], dict[str, Any]]:
    """A cluster of 20 nodes whose rate bound opens one incident a minute, on a clock that stands
    still: a genuine culprit opened on its first node, then one on its second held by the bound.
    Returns the nodes and the held result."""
    world.clock = StillClock(world.clock.current)
    world.settings = settings(
        report_openings_per_minute=1, guard_max_open_nodes=10, guard_max_open_percent=100
    )
    nodes = add_nodes(world, 20)
    store(world, culprit(nodes[0], report_id="genuine-0001"))
    (held,) = store(world, culprit(nodes[1], report_id="genuine-0002"))
    assert held["action"] == "held"
    return nodes, held


def test_a_culprit_the_rate_bound_held_is_announced_and_taken_again_once_its_minute_is_over(world):
    nodes, held = rate_held(world)
    assert [p.attributes.get("kind") for p in world.notifier.published] == ["held"]

    world.clock.current += timedelta(minutes=1)
    closing.reconcile(world.deps)
    closing.reconcile(world.deps)  # taken again once

    opened = world.store.open_incident_id(CLUSTER, nodes[1])
    assert opened is not None
    assert opened != held["incident_id"]
    assert list(world.workflow.executions)[1:] == [opened]


def test_forged_reports_naming_a_rate_held_culprit_do_not_keep_it_from_being_taken_again(world):
    nodes, held = rate_held(world)
    for n in range(8):  # stored under the held node, newest first: the genuine one read no more
        world.clock.current += timedelta(seconds=1)
        store(world, forged_event([nodes[1]], report_id=f"forged-{n:04d}"))

    world.clock.current += timedelta(minutes=1)
    closing.reconcile(world.deps)

    opened = world.store.open_incident_id(CLUSTER, nodes[1])
    assert opened is not None
    assert opened != held["incident_id"]


def test_a_forged_report_dated_the_minute_a_rate_held_culprit_is_due_does_not_keep_it_held():
    """A rate-held claim is taken again at the start of the next minute, as the incident named
    after its node and that minute. A pod sent a report naming the node wrongly, dated that
    minute: refused, it left a skipped incident under that name, and reconciliation took the
    claim as taken again already (one forged report a minute kept the culprit held for good)."""
    world = eks_world()
    world.clock = StillClock(world.clock.current)
    world.settings = dataclasses.replace(
        world.settings,
        report_openings_per_minute=1,
        guard_max_open_nodes=10,
        guard_max_open_percent=100,
    )
    nodes = add_nodes(world, 20)
    for node in nodes:
        world.kube.add_node(EKS, f"hyperpod-{node}", node)
    store(world, culprit(nodes[0], report_id="genuine-0001"))
    (held,) = store(world, culprit(nodes[1], report_id="genuine-0002"))
    closed = datetime.fromisoformat(world.incident(held["incident_id"]).closed_at or "")
    due = closed.replace(second=0, microsecond=0) + timedelta(minutes=1)
    forged = culprit(
        nodes[1], node_name="ip-10-9-9-9", report_id="forged-0001", emitted_at=due.isoformat()
    )
    assert [r["action"] for r in store(world, forged)] == ["skipped"]

    world.clock.current += timedelta(minutes=1)
    closing.reconcile(world.deps)

    opened = world.store.open_incident_id(CLUSTER, nodes[1])
    assert opened is not None
    assert world.incident(opened).state is IncidentState.OPENED


class HandlerDied(BaseException):
    """Not an Exception: no handler code catches it, as none survives a killed invocation."""


def dies(*_: Any) -> None:
    raise HandlerDied("died after the report was stored")


def test_a_culprit_redelivered_after_dying_between_store_and_open_is_still_taken_again(
    world, monkeypatch
):
    """The redelivery is received later: its evidence names that receipt, and the report was
    stored under the first one only (the first copy wins), so reading it by the evidence's key
    found nothing, and the rate-held claim was never taken again."""
    world.clock = StillClock(world.clock.current)
    world.settings = settings(
        report_openings_per_minute=1, guard_max_open_nodes=10, guard_max_open_percent=100
    )
    nodes = add_nodes(world, 20)
    store(world, culprit(nodes[0], report_id="genuine-0001"))
    event = culprit(nodes[1], report_id="genuine-0002")
    with monkeypatch.context() as patch:
        patch.setattr(intake, "flag", dies)
        with pytest.raises(HandlerDied):
            store(world, event)
    world.clock.current += timedelta(seconds=2)
    (held,) = store(world, event)  # redelivered
    assert held["action"] == "held"

    world.clock.current += timedelta(minutes=1)
    closing.reconcile(world.deps)

    assert world.store.open_incident_id(CLUSTER, nodes[1]) not in (None, held["incident_id"])


# -- 2. hardware alerts act on every supported cluster setup ----------------------------------


def job_pods_world() -> World:
    isolate = {CLUSTER: IsolationConfig(isolate=True, eks_cluster=EKS, job_pods=JOB_LABEL)}
    world = World(eks_cluster=EKS, settings=settings(node_isolation=isolate))
    world.kube.add_pod(EKS, NODE, {JOB_LABEL: "llama-pretrain"})
    return world


def deliver(world: World, *alerts: dict[str, Any], message_id: str = "m-1") -> list[Any]:
    event = sns_event(*alerts, message_id=message_id)
    return intake.hardware_alerts(parse_alert_notification(event), world.deps)


def test_a_hardware_alert_opens_on_an_eks_cluster_with_job_pods():
    world = job_pods_world()

    (result,) = deliver(world, alert(node=NODE))

    assert result["action"] == "opened"
    assert world.incident(result["incident_id"]).instance_id == INSTANCE


SLURM_HOST = "ip-10-1-2-3"


def slurm_world() -> World:
    isolate = {CLUSTER: IsolationConfig(isolate=True, slurm_controller="i-0c0000000000000c1")}
    return World(
        slurm_hostname=f"{SLURM_HOST}.us-west-2.compute.internal",
        settings=settings(node_isolation=isolate),
    )


def test_a_hardware_alert_naming_the_exporters_host_opens_on_a_slurm_cluster():
    world = slurm_world()

    (result,) = deliver(world, alert(node=SLURM_HOST))

    assert result["action"] == "opened"
    assert world.incident(result["incident_id"]).instance_id == INSTANCE


def test_a_hardware_alert_naming_another_host_acts_on_nothing_on_a_slurm_cluster():
    world = slurm_world()

    assert deliver(world, alert(node="ip-10-9-9-9")) == []
    assert world.workflow.executions == {}


def test_a_hardware_alert_naming_the_hyperpod_instance_opens_on_a_slurm_cluster():
    world = slurm_world()

    (result,) = deliver(world, alert(node=f"hyperpod-{INSTANCE}"))

    assert result["action"] == "opened"


# -- 3. alerts are bounded and rate-bound like reports -----------------------------------------


def test_an_alert_naming_64_made_up_nodes_costs_a_few_calls_and_records(world):
    alerts = [alert(node=f"hyperpod-{made_up(n)}", fingerprint=f"f{n:04d}") for n in range(64)]

    deliver(world, *alerts)

    assert len(world.hyperpod.calls) <= MAX_HYPERPOD_CALLS
    assert len(world.store.incidents) <= 1
    assert len(world.audit.all_chains()) <= 3


def test_one_notification_naming_many_real_nodes_cannot_storm_hold_the_cluster(world):
    nodes = add_nodes(world, 20)
    alerts = [alert(node=f"hyperpod-{n}", fingerprint=f"f{i:04d}") for i, n in enumerate(nodes)]

    deliver(world, *alerts)

    assert world.store.active_hold(CLUSTER) is None
    assert len(world.store.flagged_instances(CLUSTER, 0)) == 1


def test_alerts_beyond_the_clusters_openings_per_minute_are_held_by_the_rate_bound(world):
    world.settings = settings(report_openings_per_minute=1, guard_max_open_nodes=10)
    nodes = add_nodes(world, 20)

    (first,) = deliver(world, alert(node=f"hyperpod-{nodes[0]}"), message_id="m-1")
    (second,) = deliver(world, alert(node=f"hyperpod-{nodes[1]}"), message_id="m-2")

    assert first["action"] == "opened"
    assert second["action"] == "held"
    assert world.incident(second["incident_id"]).hold.kind == "rate"


# -- 5. a hold absorbs only what is no stronger than itself ------------------------------------


def test_a_straggler_notice_does_not_swallow_a_hang_localised_by_two_signals():
    world = watch_world(throttled_answer())
    world.prometheus = type(world.prometheus)()  # every series quiet: the straggler is alone
    slow = NODES[1]  # rank 13 is on the second node, as the hang names it
    (notice,) = [
        r
        for r in store(world, report_event(straggler_alarm(13), report_id="straggler-0001"))
        if r["action"] == "held"
    ]
    assert world.incident(notice["incident_id"]).instance_id == slow

    results = store(world, report_event(hang_alarm(13), at=REPORT_TIME + timedelta(seconds=30)))

    (hang,) = [r for r in results if world.incident(r["incident_id"]).instance_id == slow]
    assert hang["action"] == "opened"
    assert hang["incident_id"] != notice["incident_id"]
    assert hang["incident_id"] in world.workflow.executions


# -- 6. a report that opens nothing never displaces confirmed evidence -------------------------


def eks_world() -> World:
    isolate = {CLUSTER: IsolationConfig(isolate=True, eks_cluster=EKS)}
    return World(eks_cluster=EKS, settings=settings(node_isolation=isolate))


def test_a_forged_involved_report_does_not_displace_the_genuine_report_an_alarm_brings():
    world = eks_world()
    world.switch.value = "true"  # the genuine report arrives while paused: held
    (held,) = store(world, culprit(node_name=NODE, report_id="genuine-0001"))
    assert held["action"] == "held"
    world.switch.value = "false"
    forged = forged_event(
        [INSTANCE],
        ambiguous=False,
        role="involved",
        report_id="forged-00001",
        suspects=[suspect(role="involved", node_name="ip-10-9-9-9.evil.internal")],
    )
    world.clock.current += timedelta(seconds=5)
    assert store(world, forged) == []  # opens nothing, costs no budget

    opened = alarm_on(world, INSTANCE, "alarm-genuine", seconds=10)

    incident = world.incident(opened["incident_id"])
    assert opened["action"] == "opened"
    assert incident.unconfirmed == {}
    assert judge(incident, (), world.clock.current.isoformat()).advice is Advice.REPLACE


WEAK_SHAPES = {
    "involved": {"ambiguous": False, "role": "involved", "suspect": {"role": "involved"}},
    "ambiguous": {"ambiguous": True, "role": "involved", "suspect": {"role": "involved"}},
    # An ambiguous report points at no node (the emitter calls a report ambiguous when it names
    # no culprit): one naming the node a culprit anyway is stored with the weak reports.
    # Its evidence names the node's rank a culprit of the ring check, so only its being
    # ambiguous keeps it weak.
    "ambiguous-culprit": {
        "ambiguous": True,
        "role": "culprit",
        "suspect": {},
        "detail": {"check": "compute", "culprits": [0]},
    },
}


@pytest.mark.parametrize("shape", list(WEAK_SHAPES))
def test_many_forged_weak_reports_do_not_push_the_genuine_culprit_report_out_of_reach(shape):
    """Not one forged report but more than an alarm reads: with the node's name right, each is
    confirmed, and each is newer than the genuine report."""
    weak = WEAK_SHAPES[shape]
    world = eks_world()
    world.switch.value = "true"  # everything arrives while paused: held
    (held,) = store(world, culprit(node_name=NODE, report_id="genuine-0001"))
    assert held["action"] == "held"
    for n in range(2 * claims.MAX_STORED):
        world.clock.current += timedelta(seconds=1)
        forged = forged_event(
            [INSTANCE],
            ambiguous=weak["ambiguous"],
            role=weak["role"],
            report_id=f"forged-{n:05d}",
            suspects=[suspect(node_name=NODE, **weak["suspect"])],
            **weak.get("detail", {}),
        )
        store(world, forged)
    world.switch.value = "false"

    opened = alarm_on(world, INSTANCE, "alarm-genuine", seconds=10)

    incident = world.incident(opened["incident_id"])
    assert opened["action"] == "opened"
    assert "genuine-0001" in {r.report_id for r in incident.reports}
    assert judge(incident, (), world.clock.current.isoformat()).advice is Advice.REPLACE


def weak_culprit_report(kind: str, instance_id: str, report_id: str) -> dict[str, Any]:
    """A report naming `instance_id` a culprit whose own evidence proposes a health check only:
    a straggler on the node (the training watch sends one as it slows, and so can any pod), or a
    forged weights check with no majority."""
    if kind == "straggler":
        slow = [r for r in range(WATCH_WORLD) if WATCH_RANKS.get(r).instance_id == instance_id]
        return report_event(straggler_alarm(*slow), report_id=report_id)
    return forged_event([instance_id], ambiguous=False, role="culprit", report_id=report_id)


@pytest.mark.parametrize("kind", ["straggler", "weights-no-majority"])
def test_reports_calling_the_node_a_culprit_on_weak_evidence_do_not_push_out_the_genuine_one(
    world, kind
):
    """Their role points at the node, their evidence proposes a health check only: stored with
    the reports pointing at it, the newest five of them were all an alarm read, and it advised a
    health check instead of the genuine report's replacement."""
    target = WATCH_RANKS.get(0).instance_id
    world.hyperpod.add_node(CLUSTER, GROUP, target)
    world.switch.value = "true"  # everything arrives while paused: held
    (held,) = store(world, culprit(target, report_id="genuine-0001"))
    assert held["action"] == "held"
    for n in range(2 * claims.MAX_STORED):
        world.clock.current += timedelta(seconds=1)
        store(world, weak_culprit_report(kind, target, f"weak-{n:04d}"))
    world.switch.value = "false"

    opened = alarm_on(world, target, "alarm-genuine", seconds=10)

    incident = world.incident(opened["incident_id"])
    assert "genuine-0001" in {r.report_id for r in incident.reports}
    assert judge(incident, (), world.clock.current.isoformat()).advice is Advice.REPLACE


def test_a_forged_ambiguous_report_proposes_no_replacement_on_the_open_incidents_it_joins(world):
    """An ambiguous report points at no node: it joins the open incidents of the nodes it
    names. A pod sent one listing the rank it gave a node among the ring check's culprits: the
    node's incident, opened by its alarm for a health check, then proposed replacing it."""
    nodes = add_nodes(world, 4)
    opened = alarm_on(world, nodes[0], "alarm-genuine")
    forged = forged_event([nodes[0], made_up(1)], check="compute", report_id="forged-0001")
    forged["detail"]["culprits"] = [0]

    store(world, forged)

    incident = world.incident(opened["incident_id"])
    assert "report:forged-0001" in [e["key"] for e in incident.evidence]
    assert judge(incident, [], incident.updated_at).advice is Advice.HEALTH_CHECK_ONLY


def test_forged_reports_filling_a_nodes_incident_do_not_keep_its_culprit_report_off_it(world):
    """An incident keeps 40 items of what a pod can send. Forty forged ambiguous reports naming
    a node joined its open incident, and the genuine report naming the node the culprit was
    only counted: the incident proposed a health check, never the replacement."""
    add_nodes(world, 4)
    opened = alarm_on(world, INSTANCE, "alarm-genuine")
    for n in range(45):
        world.clock.current += timedelta(seconds=1)
        store(world, forged_event([INSTANCE, made_up(1)], report_id=f"forged-{n:04d}"))

    store(world, culprit(report_id="genuine-0001"))

    incident = world.incident(opened["incident_id"])
    assert "report:genuine-0001" in [e["key"] for e in incident.evidence]
    assert judge(incident, [], incident.updated_at).advice is Advice.REPLACE


def test_forged_alarms_filling_a_nodes_incident_do_not_keep_its_culprit_report_off_it(world):
    """A pod puts the datapoints a node's contributor alarm fires on: forty alarms joined the
    node's open incident, and the genuine report naming the node the culprit was only counted."""
    add_nodes(world, 4)
    opened = alarm_on(world, INSTANCE, "alarm-0000")
    for n in range(1, 45):
        world.clock.current += timedelta(seconds=1)
        alarm_on(world, INSTANCE, f"alarm-{n:04d}")

    store(world, culprit(report_id="genuine-0001"))

    incident = world.incident(opened["incident_id"])
    assert "report:genuine-0001" in [e["key"] for e in incident.evidence]
    assert judge(incident, [], incident.updated_at).advice is Advice.REPLACE


def test_a_forged_job_too_large_to_check_does_not_weaken_the_nodes_genuine_evidence():
    """The guard holds such a job before the orchestrator is asked, so its report was stored
    under the first nodes HyperPod knows, the node's name wrong: the node's alarm brought it as
    a claim that does not hold, and its incident then proposed nothing beyond a health check,
    even once the node's own counters said its memory cannot repair itself."""
    world = eks_world()
    world.settings = settings(node_isolation=world.settings.node_isolation, storm_threshold=100)
    others = add_nodes(world, 30)
    forged = forged_event(
        [INSTANCE, *others[:9]], suspects=[suspect(role="involved", node_name="ip-10-9-9-9")]
    )
    (job,) = store(world, forged)
    assert job["action"] == "held"
    opened = alarm_on(world, INSTANCE, "alarm-genuine", seconds=10)

    deliver(world, alert(rule="row_remap_failure", severity="critical", node=NODE))

    incident = world.incident(opened["incident_id"])
    assert judge(incident, (), world.clock.current.isoformat()).advice is Advice.REPLACE


def test_a_report_is_stored_only_under_the_nodes_it_was_confirmed_for(world):
    """Before the bound and the checks, a report naming 64 made-up culprits wrote two records
    per instance it named (the cluster has 64 nodes, so its size let it through)."""
    add_nodes(world, 63)
    event = forged_event(
        [made_up(n) for n in range(60)] + [INSTANCE], ambiguous=False, role="culprit"
    )
    event["detail"]["instances"][-1]["role"] = "involved"

    result = intake.store_report(parse_report_event(event), world.deps)

    assert world.store.reports == {}
    assert result["stored"] is False


# -- 10. a few datapoints from one pod cannot hold a cluster ----------------------------------


@pytest.mark.parametrize("job_pods", [False, True], ids=["eks", "eks-job-pods"])
def test_four_contributor_alarms_on_busy_nodes_do_not_storm_hold_the_cluster(job_pods):
    isolate = IsolationConfig(
        isolate=True, eks_cluster=EKS, job_pods=JOB_LABEL if job_pods else None
    )
    world = World(eks_cluster=EKS, settings=settings(node_isolation={CLUSTER: isolate}))
    nodes = add_nodes(world, 4)
    for n, node in enumerate(nodes):
        world.kube.add_node(EKS, f"node-{n}", node)
        world.kube.add_pod(EKS, f"node-{n}", {JOB_LABEL: "someone-elses-job"})

    for n, node in enumerate(nodes):
        alarm_on(world, node, f"alarm-{n}", seconds=n + 1)

    assert world.store.active_hold(CLUSTER) is None


# -- 11. a forged report buys a small constant number of HyperPod calls ------------------------


def test_a_forged_report_naming_a_clusters_worth_of_culprits_buys_a_few_hyperpod_calls(world):
    world.settings = settings(storm_threshold=1000)
    nodes = add_nodes(world, 63)
    event = forged_event(nodes, ambiguous=False, role="culprit")

    store(world, event)

    assert len(world.hyperpod.calls_to("DescribeClusterNode")) <= MAX_HYPERPOD_CALLS - 2
    assert len(world.hyperpod.calls) <= MAX_HYPERPOD_CALLS


def test_a_forged_report_naming_made_up_culprits_buys_a_few_calls_and_records(world):
    add_nodes(world, 63)
    event = forged_event([made_up(n) for n in range(64)], ambiguous=False, role="culprit")

    store(world, event)

    assert len(world.hyperpod.calls) <= MAX_HYPERPOD_CALLS
    assert len(world.store.incidents) <= MAX_HYPERPOD_CALLS - 2
    assert all(i.state is IncidentState.SKIPPED for i in world.store.incidents.values())


class CountingStore:
    """The world's store, counting the calls made to it."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls = inner, 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return attr(*args, **kwargs)

        return call


def store_calls(world: World, event: dict[str, Any]) -> int:
    counting = CountingStore(world.store)
    world.store = counting  # type: ignore[assignment]
    store(world, event)
    world.store = counting.inner
    return counting.calls


@pytest.mark.parametrize("ambiguous", [False, True], ids=["culprit", "ambiguous"])
def test_a_report_naming_one_instance_2048_times_costs_what_naming_it_once_does(ambiguous):
    """The schema lets a report repeat an instance; each repeat read the node's open incident
    (and joined it) again: 2048 entries bought over 4000 table calls."""
    once = store_calls(World(), forged_event([INSTANCE], ambiguous=ambiguous, role="culprit"))

    repeated = store_calls(
        World(), forged_event([INSTANCE] * 2048, ambiguous=ambiguous, role="culprit")
    )

    assert repeated == once


def test_a_job_report_repeating_its_one_instance_is_a_job_over_that_one_node(world):
    (job,) = store(world, forged_event([INSTANCE] * 4))

    assert world.incident(job["incident_id"]).instance_ids == [INSTANCE]


def test_more_of_a_claim_than_is_asked_about_is_audited_once(world):
    add_nodes(world, 63)
    event = forged_event([made_up(n) for n in range(64)], ambiguous=False, role="culprit")

    store(world, event)

    ignored = [
        e
        for chain in world.audit.all_chains().values()
        for e in chain
        if e.action == "event_ignored"
    ]
    (entry,) = ignored
    assert entry.details["left_out_count"] == 64 - 8


# -- a storm hold holds only what is no more trusted than the claims that made it ----------------


def report_storm(world: World) -> None:
    """One forged report naming a culprit on each of four real nodes: the cluster is storm-held
    (the rank map's nodes, named as HyperPod names them)."""
    for node in NODES:
        world.hyperpod.add_node(CLUSTER, GROUP, node)
    culprits = copy.deepcopy(load_fixture("alarms", "replay_culprit"))
    culprits["culprits"] = [5, 13, 21, 29]
    culprits["mismatched_pairs"] = [[5, 13], [13, 21], [21, 29], [29, 5]]
    store(world, report_event(culprits))
    assert world.store.active_hold(CLUSTER) is not None


def test_a_storm_of_forged_reports_does_not_hold_a_genuine_hardware_alert(world):
    # Given a cluster storm-held by one forged report naming four real nodes
    report_storm(world)
    (other,) = add_nodes(world, 1)

    # When a hardware alert fires for another node of the cluster
    (result,) = deliver(world, alert(node=f"hyperpod-{other}"))

    # Then its incident opens, and its deep health check starts
    assert result["action"] == "opened"
    started = health_check.start_health_check(IncidentRef(result["incident_id"]), world.deps)
    assert started["held"] is False


def test_an_alert_incident_in_flight_is_not_held_by_a_storm_of_reports_that_starts_after_it(world):
    # Given an incident a hardware alert opened
    (other,) = add_nodes(world, 1)
    (opened,) = deliver(world, alert(node=f"hyperpod-{other}"))

    # When a forged report storm-holds the cluster before its health check starts
    report_storm(world)
    started = health_check.start_health_check(IncidentRef(opened["incident_id"]), world.deps)

    # Then the check starts all the same
    assert started["held"] is False
    assert world.incident(opened["incident_id"]).hold is None


def test_a_storm_of_hardware_alerts_still_holds_the_next_alert(world):
    # Given four hardware alerts for four nodes within the storm window (a rack's power, say)
    world.settings = settings(guard_max_open_nodes=10, guard_max_open_percent=100)
    nodes = add_nodes(world, 5)
    for n, node in enumerate(nodes[:4]):
        deliver(world, alert(node=f"hyperpod-{node}", fingerprint=f"f{n}"), message_id=f"m-{n}")
    assert world.store.active_hold(CLUSTER) is not None

    # When a fifth alert fires
    (result,) = deliver(world, alert(node=f"hyperpod-{nodes[4]}"), message_id="m-5")

    # Then the storm its own kind made holds it
    assert result["action"] == "held"
    assert world.incident(result["incident_id"]).hold.kind == "storm"


def test_a_storm_of_forged_reports_still_holds_the_reports_after_it(world):
    report_storm(world)
    (other,) = add_nodes(world, 1)

    results = store(world, culprit(other, report_id="after-the-storm"))

    assert [r["action"] for r in results] == ["held"]


def test_hardware_alerts_spread_over_hours_after_a_report_storm_are_no_storm_of_their_own(world):
    # Given a cluster storm-held by a forged report, then hardware alerts on three other nodes,
    # each a storm window after the one before (no four of them within one window)
    world.settings = settings(guard_max_open_nodes=10, guard_max_open_percent=100)
    report_storm(world)
    nodes = add_nodes(world, 4)
    apart = timedelta(seconds=world.settings.storm_window_seconds + 60)
    for n, node in enumerate(nodes[:3]):
        (opened,) = deliver(
            world, alert(node=f"hyperpod-{node}", fingerprint=f"f{n}"), message_id=f"m-{n}"
        )
        assert opened["action"] == "opened"
        world.clock.current += apart

    # When a fourth node's alert fires
    (result,) = deliver(world, alert(node=f"hyperpod-{nodes[3]}"), message_id="m-3")

    # Then it opens: the report storm holds no alert, and four alerts hours apart are no storm
    assert result["action"] == "opened"


def test_a_storm_of_hardware_alerts_during_a_report_storm_holds_alerts_after_its_window(world):
    # Given a cluster storm-held by a forged report, then four hardware alerts on four other
    # nodes within one storm window
    world.settings = settings(guard_max_open_nodes=10, guard_max_open_percent=100)
    report_storm(world)
    nodes = add_nodes(world, 5)
    for n, node in enumerate(nodes[:4]):
        deliver(world, alert(node=f"hyperpod-{node}", fingerprint=f"f{n}"), message_id=f"m-{n}")

    # When a fifth node's alert fires a window later
    world.clock.current += timedelta(seconds=world.settings.storm_window_seconds + 60)
    (result,) = deliver(world, alert(node=f"hyperpod-{nodes[4]}"), message_id="m-4")

    # Then the storm the alerts made holds it, until the hold is reset
    assert result["action"] == "held"
    assert world.incident(result["incident_id"]).hold.kind == "storm"


def test_a_report_storm_that_hardware_alerts_widen_is_audited_and_notified_again(world):
    # Given a cluster storm-held by a forged report (its notice: hardware alerts still act)
    world.settings = settings(guard_max_open_nodes=10, guard_max_open_percent=100)
    report_storm(world)
    hold = world.store.active_hold(CLUSTER)
    assert hold is not None
    first = [p for p in world.notifier.published if p.attributes.get("kind") == "storm_hold"]
    assert len(first) == 1 and "hardware alerts and failed idle-sweep checks still act" in (
        " ".join(first[0].message.split())
    )

    # When four hardware alerts on four other nodes make a storm of their own
    nodes = add_nodes(world, 4)
    for n, node in enumerate(nodes):
        deliver(world, alert(node=f"hyperpod-{node}", fingerprint=f"f{n}"), message_id=f"m-{n}")

    # Then the hold's audit says it widened, naming those nodes, and its notice goes out again,
    # saying every incident is held now
    actions = [e.action for e in world.audit.entries(hold.hold_id)]
    assert actions.count("storm_hold_widened") == 1
    (widened,) = [e for e in world.audit.entries(hold.hold_id) if e.action == "storm_hold_widened"]
    assert set(widened.details["trusted_instances"]) == set(nodes)
    notices = [p for p in world.notifier.published if p.attributes.get("kind") == "storm_hold"]
    assert len(notices) == 2
    assert "every incident held" in notices[1].subject
    assert actions.count("storm_notified") == 2


def test_a_storm_hardware_alerts_make_alone_is_notified_once(world):
    world.settings = settings(guard_max_open_nodes=10, guard_max_open_percent=100)
    nodes = add_nodes(world, 4)

    for n, node in enumerate(nodes):
        deliver(world, alert(node=f"hyperpod-{node}", fingerprint=f"f{n}"), message_id=f"m-{n}")

    notices = [p for p in world.notifier.published if p.attributes.get("kind") == "storm_hold"]
    assert len(notices) == 1 and "every incident held" in notices[0].subject
    hold = world.store.active_hold(CLUSTER)
    assert hold is not None
    assert "storm_hold_widened" not in [e.action for e in world.audit.entries(hold.hold_id)]


def test_a_hardware_alert_on_one_node_of_a_job_incident_leaves_the_job_held_by_a_storm(world):
    # Given a job-level incident an ambiguous report opened over three nodes, then a storm
    # hold a forged report made
    world.settings = room_for_a_job(3)
    nodes = add_nodes(world, 3)
    (job,) = store(world, forged_event(nodes, report_id="ambiguous-0001"))
    assert world.incident(job["incident_id"]).is_job
    report_storm(world)

    # When a hardware alert fires on one of its nodes (it joins the job's incident) and the
    # job's health check is to start
    (joined,) = deliver(world, alert(node=f"hyperpod-{nodes[0]}"))
    assert joined["incident_id"] == job["incident_id"]
    started = health_check.start_health_check(IncidentRef(job["incident_id"]), world.deps)

    # Then the storm holds it: the alert speaks for its one node, not for the job's others
    assert started["held"] is True


def test_a_forged_report_held_by_a_report_storm_does_not_swallow_the_nodes_hardware_alert(world):
    # Given a cluster storm-held by a forged report, and another forged report naming a
    # culprit on a fifth node, held by that storm (the node's held lock is now taken)
    report_storm(world)
    (other,) = add_nodes(world, 1)
    (held,) = store(world, culprit(other, report_id="forged-held"))
    assert held["action"] == "held"

    # When a genuine hardware alert fires for that node within the hold window
    (result,) = deliver(world, alert(node=f"hyperpod-{other}"))

    # Then the alert opens the node's incident, not joining the report's held one
    assert result["action"] == "opened"
    assert result["incident_id"] != held["incident_id"]


def test_a_rate_held_report_that_a_hardware_alert_joined_is_taken_again_as_the_alert(world):
    # Given a culprit the rate bound held, a hardware alert for its node that joined it, and a
    # storm hold forged reports made meanwhile
    nodes, held = rate_held(world)
    (joined,) = deliver(world, alert(node=f"hyperpod-{nodes[1]}"))
    assert joined["incident_id"] == held["incident_id"]
    report_storm(world)

    # When it is taken again once its minute is over
    world.clock.current += timedelta(minutes=1)
    closing.reconcile(world.deps)

    # Then the alert's claim opens the node's incident: the report storm holds no alert
    opened = world.store.open_incident_id(CLUSTER, nodes[1])
    assert opened is not None
    assert opened != held["incident_id"]


def test_the_notice_of_a_report_storm_says_hardware_alerts_and_sweeps_still_act(world):
    # Given nothing held
    # When one forged report storm-holds the cluster
    report_storm(world)

    # Then its one notice does not claim that everything is held: it says what still acts
    (notice,) = [p for p in world.notifier.published if p.attributes["kind"] == "storm_hold"]
    assert "every incident held" not in notice.subject
    assert "hardware alerts and failed idle-sweep checks still act" in " ".join(
        notice.message.split()
    )


def test_forged_reports_filling_an_incidents_evidence_do_not_crowd_out_its_hardware_alert(world):
    # Given a node's incident a report opened, its evidence filled up by forged reports naming
    # the node as involved, and a storm hold a forged report made
    (node,) = add_nodes(world, 1)
    (opened,) = store(world, culprit(node, report_id="forged-opens"))
    for n in range(summaries.MAX_EVIDENCE):
        store(world, forged_event([node], ambiguous=False, report_id=f"forged-{n:04d}"))
    report_storm(world)

    # When the node's hardware alert fires (it joins the incident) and its check is to start
    deliver(world, alert(node=f"hyperpod-{node}"))
    started = health_check.start_health_check(IncidentRef(opened["incident_id"]), world.deps)

    # Then the alert is kept, and the report storm does not hold the check
    assert world.incident(opened["incident_id"]).hardware
    assert started["held"] is False


def involved_after_a_culprit(nodes: list[str]) -> dict[str, Any]:
    event = forged_event([INSTANCE, *nodes], ambiguous=False, role="involved")
    event["detail"]["instances"][0]["role"] = "culprit"
    return event


def test_a_report_naming_a_clusters_worth_of_involved_instances_costs_a_few_table_calls():
    """Each instance a report names involved was looked up for an open incident to join: a
    report naming a 1,000-node cluster's every node bought 1,000 reads, before any bound."""
    few, many = World(), World()
    few_nodes, many_nodes = add_nodes(few, 999)[: claims.MAX_ASKED], add_nodes(many, 999)

    assert store_calls(many, involved_after_a_culprit(many_nodes)) == store_calls(
        few, involved_after_a_culprit(few_nodes)
    )


def test_an_oversized_job_report_costs_the_table_calls_of_the_nodes_it_asks_about():
    """A job too large to act on is held over nodes nobody asked about; each of them was still
    looked up for an open incident, a read per node of the cluster."""
    few, many = World(), World()
    few_nodes, many_nodes = add_nodes(few, 999)[:16], add_nodes(many, 999)

    assert store_calls(many, forged_event(many_nodes)) == store_calls(few, forged_event(few_nodes))


# -- a watch report's integers written as floats ----------------------------------------------


def straggler_notice(event: dict[str, Any]) -> str:
    """The notice the intake sends for a straggler report alone (nothing corroborates it)."""
    world = watch_world()
    store(world, event)
    (notice,) = world.notifier.published
    return notice.message


def test_a_straggler_report_writing_its_integers_as_floats_is_noticed_as_the_genuine_one():
    # Given the straggler report the emitter sends, and the same report as a pod may write it:
    # its ranks, window size and window counts as 13.0, 100.0, 1.0 (JSON Schema counts them
    # integers, so it is valid)
    genuine = report_event(straggler_alarm(13), report_id="straggler-0001")
    floats = copy.deepcopy(genuine)
    whole_numbers_as_floats(floats["detail"])
    # When the intake records each
    noticed = straggler_notice(floats)
    # Then the notice reads as the genuine report's: not "unknown steps", not "rank 13.0"
    assert noticed == straggler_notice(genuine)
    assert "scored per window of 100 steps" in noticed.replace("\n        ", " ")
