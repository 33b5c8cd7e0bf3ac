"""Every trigger kind on every cluster setup takes the one path: the same stages in the same
order, and the same outcome rules. A node HyperPod and the orchestrator confirm is acted on per
the one policy and spends what its trigger kind spends (`SPENT`); one they do not
confirm spends nothing and acts on nothing.

A new trigger kind is one row of TRIGGERS (its parser into the claim), a new setup one row of
SETUPS."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from sdc_remediation.lambdas.logic import intake
from sdc_remediation.lambdas.logic.evidence.recommendation import judge
from sdc_remediation.lambdas.logic.opening import proceeding
from sdc_remediation.lambdas.logic.opening.trail import IntakeStep
from sdc_remediation.lambdas.logic.sweep.claim import of_sweep, sweep_event_id, sweep_evidence
from sdc_remediation.lambdas.models.claim import Claim, Stage
from sdc_remediation.lambdas.models.events import parse_contributor_event
from sdc_remediation.lambdas.models.hardware_alert import parse_alert_notification
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.recommendation import Advice
from sdc_remediation.lambdas.models.report import parse_report_event
from sdc_remediation.lambdas.models.settings import IsolationConfig
from sdc_remediation.lambdas.models.sweep import CheckResult
from tests.unit.reports import NODES, REPORT_TIME, forged_event, report_event, suspect
from tests.unit.test_hardware_intake import alert, sns_event
from tests.unit.test_watch_pipeline import hang_alarm
from tests.unit.world import CLUSTER, EKS, GROUP, World, alarm_event, settings

NODE = NODES[1]
"""The node every trigger names (the hang of `hang_alarm(13)` is localised to it)."""
MADE_UP = "i-0dead000000000bad"
JOB_LABEL = "training.kubeflow.org/job-name"
JOB = "llama-pretrain"
CONTROLLER = "i-0c0000000000000c1"
ALL = [Stage.BOUND, Stage.CONFIRM, Stage.BUDGET, Stage.JUDGE, Stage.ACT, Stage.AUDIT]
REFUSED = [Stage.BOUND, Stage.CONFIRM, Stage.ACT, Stage.AUDIT]


@dataclass(frozen=True)
class Setup:
    name: str
    build: Callable[[], World]
    node_name: Callable[[str], str]
    """The name the orchestrator (and a trigger) gives an instance's node."""


def _eks(job_pods: bool) -> World:
    config = IsolationConfig(
        isolate=True, eks_cluster=EKS, job_pods=JOB_LABEL if job_pods else None
    )
    world = World(eks_cluster=EKS, settings=_settings(node_isolation={CLUSTER: config}))
    for node in NODES:
        world.hyperpod.add_node(CLUSTER, GROUP, node)
        world.kube.add_node(EKS, f"hyperpod-{node}", node)
        if job_pods:
            world.kube.add_pod(EKS, f"hyperpod-{node}", {JOB_LABEL: JOB})
    return world


def _slurm() -> World:
    config = IsolationConfig(isolate=True, slurm_controller=CONTROLLER)
    world = World(
        slurm_hostname="ip-10-1-0-9.us-west-2.compute.internal",
        settings=_settings(node_isolation={CLUSTER: config}),
    )
    for n, node in enumerate(NODES):
        world.hyperpod.add_node(
            CLUSTER, GROUP, node, hostname=f"ip-10-1-0-{n + 1}.us-west-2.compute.internal"
        )
    return world


def _settings(**changes: Any) -> Any:
    return settings(
        guard_max_open_nodes=4, guard_max_open_percent=100, storm_threshold=8, **changes
    )


def _slurm_host(instance_id: str) -> str:
    return f"ip-10-1-0-{NODES.index(instance_id) + 1}" if instance_id in NODES else "ip-10-9-9-9"


SETUPS = [
    Setup("eks", lambda: _eks(job_pods=False), lambda i: f"hyperpod-{i}"),
    Setup("eks-job-pods", lambda: _eks(job_pods=True), lambda i: f"hyperpod-{i}"),
    Setup("slurm", _slurm, _slurm_host),
]


# -- the triggers, each a parser into the claim ---------------------------------------------------


def _alarm(world: World, setup: Setup, instance_id: str) -> Claim:
    event = copy.deepcopy(alarm_event())
    event["detail"]["alarmContributor"]["attributes"]["InstanceId"] = instance_id
    return intake.of_alarm(parse_contributor_event(event))


def _report(world: World, setup: Setup, instance_id: str) -> Claim:
    event = _culprit_event(instance_id, setup.node_name(instance_id))
    return received(world, event)


def received(world: World, event: dict[str, Any]) -> Claim:
    """The report's claim as the intake takes it: stamped with the time it was received."""
    parsed = parse_report_event(event)
    report = dataclasses.replace(parsed.report, received_at=world.clock.now().isoformat())
    return intake.of_report(dataclasses.replace(parsed, report=report))


def _culprit_event(instance_id: str, node_name: str, **changes: Any) -> dict[str, Any]:
    return forged_event(
        [instance_id],
        ambiguous=False,
        role="culprit",
        check="compute",
        culprits=[0],
        suspects=[suspect(instance_id=instance_id, node_name=node_name)],
        job_name=JOB,
        **changes,
    )


def _watch(world: World, setup: Setup, instance_id: str) -> Claim:
    event = report_event(hang_alarm(13))  # localised to NODE by two signals
    for entry in [*event["detail"]["suspects"], *event["detail"]["instances"]]:
        if entry.get("instance_id") == NODE:
            entry["instance_id"] = instance_id
    for s in event["detail"]["suspects"]:
        if s.get("instance_id") and s.get("node_name"):
            s["node_name"] = setup.node_name(s["instance_id"])
    return received(world, event)


def _alert(world: World, setup: Setup, instance_id: str) -> Claim:
    note = parse_alert_notification(sns_event(alert(node=setup.node_name(instance_id))))
    return intake.of_alerts(note, world.clock.now())


def _sweep(world: World, setup: Setup, instance_id: str) -> Claim:
    result = CheckResult(
        instance_id=instance_id,
        passed=False,
        status="DeepHealthCheckFailed",
        message="InstanceConnectivity failed",
        checks=("InstanceConnectivity",),
        started_at=REPORT_TIME.isoformat(),
    )
    item = sweep_evidence(CLUSTER, result, world.clock.now().isoformat())
    return of_sweep(CLUSTER, instance_id, item, sweep_event_id(CLUSTER, result))


TRIGGERS: dict[str, Callable[[World, Setup, str], Claim]] = {
    "alarm": _alarm,
    "report": _report,
    "watch": _watch,
    "hardware": _alert,
    "sweep": _sweep,
}

SPENT: dict[str, tuple[bool, bool]] = {
    "alarm": (False, False),
    "report": (True, True),
    "watch": (True, True),
    "hardware": (True, True),
    "sweep": (True, False),
}
"""Per trigger kind, whether a confirmed claim flags its node for the storm rule and takes an
opening from the rate bound, stated here rather than read from `SPENDS` so that a
changed row of it is caught: an alarm spends neither (any pod can put a metric datapoint; a
report flood must not hold a genuine alarm), reports and alerts both, the pipeline's own sweep
the storm rule only."""


def take(world: World, claim: Claim) -> tuple[list[Any], IntakeStep]:
    world.clock.current = max(world.clock.current, REPORT_TIME)
    step = IntakeStep(world.deps, "matrix")
    return intake.take(step, claim), step


def stages_of(step: IntakeStep, instance_id: str | None) -> list[Stage]:
    return [p.stage for p in step.trail if p.instance_id in (None, instance_id)]


def spent(world: World) -> tuple[set[str], int]:
    """The instances flagged for the storm rule and the openings the rate bound counted."""
    flags = world.store.flagged_instances(CLUSTER, 0)
    openings = sum(v for (c, k), (v, _) in world.store.tallies.items() if k.startswith("opened#"))
    return flags, openings


@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: s.name)
@pytest.mark.parametrize("kind", list(TRIGGERS))
def test_a_confirmed_claim_goes_every_stage_in_order_and_acts_spending_what_its_kind_spends(
    kind: str, setup: Setup
):
    world = setup.build()
    claim = TRIGGERS[kind](world, setup, NODE)

    results, step = take(world, claim)

    (opened,) = [r for r in results if r["action"] == "opened"]
    incident = world.incident(opened["incident_id"])
    assert (incident.instance_id, incident.state) == (NODE, IncidentState.OPENED)
    assert list(world.workflow.executions) == [opened["incident_id"]]
    assert stages_of(step, NODE) == ALL
    storm, rate = SPENT[kind]
    assert spent(world) == ({NODE} if storm else set(), 1 if rate else 0)
    assert set(world.store.reports) == ({(CLUSTER, NODE)} if claim.report else set())


@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: s.name)
@pytest.mark.parametrize("kind", list(TRIGGERS))
def test_an_unconfirmed_claim_stops_after_confirm_spends_nothing_and_acts_on_nothing(
    kind: str, setup: Setup
):
    world = setup.build()
    claim = TRIGGERS[kind](world, setup, MADE_UP)

    results, step = take(world, claim)

    assert all(r["action"] in ("skipped", "attached") for r in results)
    assert world.workflow.executions == {}
    assert world.store.open_incident_id(CLUSTER, MADE_UP) is None
    assert stages_of(step, MADE_UP)[:2] == [Stage.BOUND, Stage.CONFIRM]
    assert Stage.BUDGET not in stages_of(step, MADE_UP)
    assert spent(world) == (set(), 0)
    assert world.store.reports == {}  # a report is stored only where it was confirmed


# -- proceed: a person's decision goes the same stages ------------------------------------------


@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: s.name)
def test_proceed_goes_every_stage_in_order_and_opens_over_the_confirmed_nodes(setup: Setup):
    world = setup.build()
    world.settings = settings(
        storm_threshold=100, node_isolation=world.settings.node_isolation
    )  # a guard of 3 holds a job of 4
    suspects = [
        suspect(rank=n, role="involved", instance_id=node, node_name=setup.node_name(node))
        for n, node in enumerate(NODES)
    ]
    event = forged_event(list(NODES), suspects=suspects, job_name=JOB)
    world.clock.current = max(world.clock.current, REPORT_TIME)
    (held,) = intake.store_report(parse_report_event(event), world.deps)["incidents"]
    assert held["action"] == "held"
    step = IntakeStep(world.deps, "decide")

    proceeding.proceed(step, world.incident(str(held["incident_id"])), "a person", "genuine")

    assert [p.stage for p in step.trail] == ALL
    (opened,) = [i for i in world.store.incidents.values() if i.state is IncidentState.OPENED]
    assert opened.instance_ids == list(NODES)


@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: s.name)
def test_a_forged_report_dated_the_second_a_genuine_alarm_fires_does_not_take_its_incident(
    setup: Setup,
):
    """A report dates itself, and a node-level incident is named after its node and the second
    of its trigger. A pod sent a report naming the node wrongly, dated the second the node's
    genuine alarm then fired (one report a second keeps every coming second taken): refused,
    it left a skipped incident under that name, and the genuine alarm was taken as a
    redelivery of it: nothing opened, nothing audited."""
    world = setup.build()
    alarm = _alarm(world, setup, NODE)
    world.clock.current = alarm.at
    forged = _culprit_event(
        NODE, "ip-10-9-9-9", emitted_at=alarm.at.isoformat(), report_id="forged-0001"
    )
    (refused,) = intake.store_report(parse_report_event(forged), world.deps)["incidents"]
    assert refused["action"] == "skipped"

    results, _ = take(world, alarm)

    (opened,) = results
    assert opened["action"] == "opened"
    assert list(world.workflow.executions) == [opened["incident_id"]]


@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: s.name)
def test_a_forged_report_naming_a_node_involved_proposes_no_replacement_on_its_incident(
    setup: Setup,
):
    """A report's involved instance is asked about by nobody: its evidence only joins the
    node's open incident. A pod named a node involved, with a wrong node name, and listed the
    rank it gave the node among the ring check's culprits: the node's incident, opened by its
    alarm for a health check, then proposed replacing it."""
    world = setup.build()
    (opened,), _ = take(world, _alarm(world, setup, NODE))
    forged = _culprit_event(MADE_UP, "ip-10-9-9-8", report_id="forged-0001")
    forged["detail"]["culprits"] = [0, 1]
    forged["detail"]["instances"].append(
        {
            "instance_id": NODE,
            "metrics": ["sdc_divergent_tensors"],
            "ranks": [1],
            "role": "involved",
        }
    )
    forged["detail"]["suspects"].append(
        suspect(rank=1, role="involved", instance_id=NODE, node_name="ip-10-9-9-9")
    )

    intake.store_report(parse_report_event(forged), world.deps)

    incident = world.incident(opened["incident_id"])
    assert "report:forged-0001" in [e["key"] for e in incident.evidence]
    assert judge(incident, [], incident.updated_at).advice is Advice.HEALTH_CHECK_ONLY
