"""Idle sweeps (sdc_remediation.lambdas.logic.sweep): which nodes a run checks and which it never touches, the
share, floor and guard, the pause switch, the run's record, and a failed check entering the
intake as a trigger of kind `sweep`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from sdc_remediation.lambdas.logic import health_check
from sdc_remediation.lambdas.logic.evidence.recommendation import recommend
from sdc_remediation.lambdas.logic.sweep.choose import choose
from sdc_remediation.lambdas.logic.sweep.run import sweep
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.errors import DependencyFailed, MalformedEvent
from sdc_remediation.lambdas.models.evidence import TriggerSource, evidence_of
from sdc_remediation.lambdas.models.guard import ClusterHold
from sdc_remediation.lambdas.models.hyperpod import HealthCheck, NodeRecovery, NodeStatus
from sdc_remediation.lambdas.models.kubernetes import NODE_HEALTH_LABEL, is_workload_pod
from sdc_remediation.lambdas.models.payloads import IncidentRef
from sdc_remediation.lambdas.models.recommendation import Advice
from sdc_remediation.lambdas.models.settings import IsolationConfig
from sdc_remediation.lambdas.models.slurm import DrainChange, SlurmNodeState
from sdc_remediation.lambdas.models.sweep import (
    NodeLook,
    SkipReason,
    SweepRequest,
    parse_sweep_request,
    sweep_subject,
)
from tests.unit.world import CLUSTER, EKS, GROUP, INSTANCE, NODE, World, settings

JOB_LABEL = "training.kubeflow.org/job-name"
IDLE = [f"i-0{n:016x}" for n in range(1, 7)]
BUSY = [f"i-0{n:016x}" for n in range(7, 9)]
EVERYTHING = SweepRequest(CLUSTER, batch_size=100, max_share_percent=100, min_idle_nodes=0)
"""No bound but the guard's: every idle node the sweep may check, it checks."""


def eks_world(**changes: Any) -> World:
    """An EKS cluster of nine nodes (the world's own, six idle ones, two running a job's pods),
    with the job label configured and a guard with room for all of them."""
    world = World(
        eks_cluster=EKS,
        settings=settings(
            node_isolation={
                CLUSTER: IsolationConfig(isolate=True, eks_cluster=EKS, job_pods=JOB_LABEL)
            },
            **{"guard_max_open_nodes": 100, "guard_max_open_percent": 100, **changes},
        ),
    )
    for instance in (*IDLE, *BUSY):
        world.hyperpod.add_node(CLUSTER, GROUP, instance)
        world.kube.add_node(EKS, f"node-{instance}", instance)
    for instance in BUSY:
        world.kube.add_pod(EKS, f"node-{instance}", {JOB_LABEL: "llama-pretrain"})
    return world


def checked(world: World) -> list[str]:
    """Every instance a StartClusterHealthCheck named."""
    return [
        i
        for call in world.hyperpod.calls_to("StartClusterHealthCheck")
        for config in call["DeepHealthCheckConfigurations"]
        for i in config["InstanceIds"]
    ]


def last_record(world: World) -> dict[str, Any]:
    entries = world.audit.entries(sweep_subject(CLUSTER))
    assert entries and entries[-1].action == AuditAction.IDLE_SWEEP
    return entries[-1].details


def checked_one_failing(world: World) -> None:
    """A sweep has checked every idle node, the first failing InstanceConnectivity, and the
    checks are done: the next run reads their results."""
    world.hyperpod.fail_check(CLUSTER, IDLE[0], HealthCheck.INSTANCE_CONNECTIVITY)
    sweep(EVERYTHING, world.deps)
    world.hyperpod.advance(3)


# -- which nodes -------------------------------------------------------------------------------


def test_busy_nodes_are_never_swept() -> None:
    # Given two nodes running a job's pods
    world = eks_world()
    # When the sweep runs with no bound but the guard
    sweep(EVERYTHING, world.deps)
    # Then neither is checked, and the record says they are busy
    assert not set(BUSY) & set(checked(world))
    assert {last_record(world)["skipped"][i] for i in BUSY} == {SkipReason.BUSY}


def test_idle_nodes_are_checked_in_one_call_with_the_requested_checks() -> None:
    world = eks_world()
    sweep(EVERYTHING, world.deps)
    (call,) = world.hyperpod.calls_to("StartClusterHealthCheck")
    (config,) = call["DeepHealthCheckConfigurations"]
    assert config["InstanceGroupName"] == GROUP
    assert config["DeepHealthChecks"] == [HealthCheck.INSTANCE_CONNECTIVITY]
    assert set(config["InstanceIds"]) >= set(IDLE)


def test_a_node_cordoned_by_someone_else_is_never_swept() -> None:
    world = eks_world()
    world.kube.nodes[EKS][f"node-{IDLE[0]}"]["unschedulable"] = True
    sweep(EVERYTHING, world.deps)
    assert IDLE[0] not in checked(world)
    assert last_record(world)["skipped"][IDLE[0]] == SkipReason.CORDONED


def test_a_node_tainted_by_someone_else_is_never_swept() -> None:
    world = eks_world()
    taint = {"key": "ops/maintenance", "value": "disk", "effect": "NoSchedule"}
    world.kube.nodes[EKS][f"node-{IDLE[1]}"]["taints"].append(taint)
    sweep(EVERYTHING, world.deps)
    assert IDLE[1] not in checked(world)
    assert "ops/maintenance" in last_record(world)["details"][IDLE[1]]


def test_a_node_hyperpod_labels_unschedulable_is_not_swept() -> None:
    world = eks_world()
    world.kube.nodes[EKS][f"node-{IDLE[2]}"]["labels"] = {NODE_HEALTH_LABEL: "Unschedulable"}
    sweep(EVERYTHING, world.deps)
    assert IDLE[2] not in checked(world)


def opened_and_left(world: World) -> None:
    """The world's node gets an incident from its job's alarm; then the job leaves the node
    (idle now, but the incident is open)."""
    world.kube.add_pod(EKS, NODE, {JOB_LABEL: "llama-pretrain"})
    world.opened()
    world.kube.pods[EKS] = [p for p in world.kube.pods[EKS] if p[0] != NODE]


def test_a_node_in_an_open_incident_is_never_swept() -> None:
    # Given the world's node in an open incident, idle otherwise
    world = eks_world()
    opened_and_left(world)
    # When the sweep runs
    sweep(EVERYTHING, world.deps)
    # Then it is not checked, and the record says why
    assert INSTANCE not in checked(world)
    assert last_record(world)["skipped"][INSTANCE] == SkipReason.IN_INCIDENT


def test_a_node_that_turns_busy_between_the_choice_and_the_call_is_not_checked() -> None:
    # Given a job's pod that lands on an idle node right after the sweep's first look
    world = eks_world()
    lands = f"node-{IDLE[3]}"
    real = world.kube.workload_nodes
    looks: list[int] = []

    def workload_nodes(eks_cluster: str) -> set[str]:
        looks.append(1)
        found = real(eks_cluster)
        return found | {lands} if len(looks) > 1 else found

    world.kube.workload_nodes = workload_nodes  # type: ignore[method-assign]
    # When the sweep runs
    sweep(EVERYTHING, world.deps)
    # Then that node is left out of the call, recorded as turned busy
    assert IDLE[3] not in checked(world)
    assert last_record(world)["skipped"][IDLE[3]] == SkipReason.TURNED_BUSY


def test_a_pod_without_the_job_label_still_makes_its_node_busy() -> None:
    # Given a notebook's pod, labelled as no job is, on an idle node
    world = eks_world()
    world.kube.add_pod(EKS, f"node-{IDLE[5]}", {"app": "notebook"})
    # When the sweep runs
    sweep(EVERYTHING, world.deps)
    # Then that node is busy, not checked
    assert IDLE[5] not in checked(world)
    assert last_record(world)["skipped"][IDLE[5]] == SkipReason.BUSY


def test_a_cluster_whose_kubernetes_the_pipeline_does_not_reach_is_not_swept() -> None:
    world = eks_world()
    world.settings = settings()
    sweep(EVERYTHING, world.deps)
    assert checked(world) == []
    assert "sdc:nodeIsolation" in last_record(world)["held"]


@pytest.mark.parametrize(
    ("pod", "workload"),
    [
        ({"metadata": {"ownerReferences": [{"kind": "Job", "name": "pretrain"}]}}, True),
        ({"metadata": {}, "status": {"phase": "Pending"}}, True),
        ({"metadata": {"ownerReferences": [{"kind": "DaemonSet", "name": "dcgm"}]}}, False),
        ({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}}, False),
        ({"metadata": {}, "status": {"phase": "Succeeded"}}, False),
    ],
)
def test_a_workload_pod_is_any_pod_but_a_daemonsets_a_static_one_or_one_that_ended(
    pod: dict[str, Any], workload: bool
) -> None:
    assert is_workload_pod(pod) is workload


# -- bounds ----------------------------------------------------------------------------------


def test_the_floor_keeps_idle_nodes_free() -> None:
    # Given seven idle nodes and a floor of five
    world = eks_world()
    request = SweepRequest(CLUSTER, batch_size=100, max_share_percent=100, min_idle_nodes=5)
    # When the sweep runs
    sweep(request, world.deps)
    # Then two are checked, five left free for the floor
    record = last_record(world)
    assert len(checked(world)) == 2
    assert sum(1 for r in record["skipped"].values() if r == SkipReason.FLOOR) == 5


def test_the_share_bounds_the_idle_nodes_under_check_across_runs() -> None:
    # Given seven idle nodes and a share of 30 % (two nodes)
    world = eks_world()
    request = SweepRequest(CLUSTER, batch_size=100, max_share_percent=30, min_idle_nodes=0)
    # When the sweep runs twice while the first run's checks still run
    sweep(request, world.deps)
    sweep(request, world.deps)
    # Then two nodes are under check in all, none added by the second run
    assert len(checked(world)) == 2
    assert last_record(world)["checked"] == []
    assert SkipReason.SHARE in last_record(world)["skipped"].values()


def test_the_guard_counts_checks_with_open_incidents() -> None:
    # Given a guard of two nodes and one open incident
    world = eks_world(guard_max_open_nodes=2)
    opened_and_left(world)
    # When the sweep runs with no other bound
    sweep(EVERYTHING, world.deps)
    # Then one node is checked: the guard's room
    assert len(checked(world)) == 1


def test_the_batch_rotates_over_the_idle_nodes() -> None:
    world = eks_world()
    world.hyperpod.health_check_polls = 0
    request = SweepRequest(CLUSTER, batch_size=2, max_share_percent=100, min_idle_nodes=0)
    for _ in range(4):
        sweep(request, world.deps)
    assert len(set(checked(world))) == 7


@pytest.mark.parametrize("idle", [0, 1, 3, 7, 20])
@pytest.mark.parametrize("share", [1, 25, 50, 100])
@pytest.mark.parametrize("floor", [0, 2, 5])
def test_no_choice_breaks_the_share_or_the_floor(idle: int, share: int, floor: int) -> None:
    looks = [NodeLook(f"i-{n:03d}", GROUP, True) for n in range(idle)]
    request = SweepRequest(CLUSTER, batch_size=100, max_share_percent=share, min_idle_nodes=floor)
    choice = choose(looks, request, in_incident=(), pending=(), guard_room=100)
    assert len(choice.chosen) * 100 <= idle * share
    assert idle - len(choice.chosen) >= min(floor, idle)


def test_a_turn_starts_after_the_cursor_and_wraps_to_the_first_idle_node() -> None:
    # Given five idle nodes, the previous run's last choice i-003, and room for three
    looks = [NodeLook(f"i-{n:03d}", GROUP, True) for n in range(5)]
    request = SweepRequest(CLUSTER, batch_size=3, max_share_percent=100, min_idle_nodes=0)
    # When the sweep chooses
    choice = choose(looks, request, in_incident=(), pending=(), guard_room=100, cursor="i-003")
    # Then it takes the node after the cursor, then the first ones in instance id order
    assert [look.instance_id for look in choice.chosen] == ["i-004", "i-000", "i-001"]


# -- pause, hold, results ---------------------------------------------------------------------


def test_the_pause_switch_stops_sweeps() -> None:
    world = eks_world()
    world.switch.value = "true"
    sweep(EVERYTHING, world.deps)
    assert checked(world) == []
    assert "pause" in last_record(world)["held"]


def storm_held(world: World, *, trusted: bool) -> None:
    """The cluster storm-held after four nodes were flagged by `trusted` claims or not."""
    now = world.clock.now()
    for instance in BUSY + IDLE[:2]:
        world.store.flag_instance(CLUSTER, instance, int(now.timestamp()), 10**10, trusted=trusted)
    hold = ClusterHold(
        hold_id=f"hold-{CLUSTER}-storm-1",
        cluster_name=CLUSTER,
        reason="4 distinct instances flagged",
        created_at=now.isoformat(),
        threshold=4,
        window_seconds=600,
        trusted_at=now.isoformat() if trusted else None,
    )
    world.store.create_hold(hold)


def test_a_storm_of_reports_does_not_stop_sweeps() -> None:
    # Given a cluster storm-held by what reports flagged (anyone in the account may send one)
    world = eks_world()
    storm_held(world, trusted=False)
    # When the sweep runs
    sweep(EVERYTHING, world.deps)
    # Then its checks start: its own health checks are no claim of a training pod's
    assert set(IDLE) <= set(checked(world))


def test_a_storm_of_hardware_alerts_stops_sweeps() -> None:
    world = eks_world()
    storm_held(world, trusted=True)
    sweep(EVERYTHING, world.deps)
    assert checked(world) == []
    assert "storm" in last_record(world)["held"]


def test_a_failed_check_enters_the_intake_as_a_sweep_trigger() -> None:
    # Given a sweep that checked the idle nodes, one of which fails InstanceConnectivity
    world = eks_world()
    checked_one_failing(world)
    # When the next run reads the results
    record = sweep(EVERYTHING, world.deps)
    # Then one incident is opened for that node, with the check as its evidence
    (failed,) = [r for r in record["results"] if not r["passed"]]
    incident = world.incident(failed["incident_id"])
    assert incident.instance_id == IDLE[0]
    (item,) = incident.sweeps
    assert item.kind == TriggerSource.SWEEP
    assert "InstanceConnectivity" in (item.message or "")
    assert world.workflow.executions  # its remediation runs, approval and all


def test_passed_checks_open_nothing() -> None:
    world = eks_world()
    sweep(EVERYTHING, world.deps)
    world.hyperpod.advance(3)
    record = sweep(EVERYTHING, world.deps)
    assert record["results"] and all(r["passed"] for r in record["results"])
    assert all(r["incident_id"] is None for r in record["results"])
    assert not world.workflow.executions


def test_a_failed_check_read_twice_opens_one_incident() -> None:
    world = eks_world()
    checked_one_failing(world)
    first = sweep(EVERYTHING, world.deps)
    # A run that died before its audit entry: the next one reads the same pending checks
    entries = world.audit.items[sweep_subject(CLUSTER)]
    del entries[max(entries)]
    second = sweep(EVERYTHING, world.deps)
    ids = {r["incident_id"] for r in (*first["results"], *second["results"]) if r["incident_id"]}
    assert len(ids) == 1
    # both runs read the failed check, and the second found the incident the first opened
    failed = [(r["instance_id"], r["incident_id"]) for r in second["results"] if not r["passed"]]
    assert failed == [(IDLE[0], *ids)]


def test_the_paused_sweep_still_reads_results_and_its_incident_is_held() -> None:
    world = eks_world()
    checked_one_failing(world)
    world.switch.value = "true"
    record = sweep(EVERYTHING, world.deps)
    (failed,) = [r for r in record["results"] if not r["passed"]]
    assert failed["action"] == "held"


def test_the_record_says_when_hyperpod_recovers_by_itself() -> None:
    world = eks_world()
    world.hyperpod.clusters[CLUSTER].node_recovery = NodeRecovery.AUTOMATIC.value
    assert sweep(EVERYTHING, world.deps)["automatic_recovery"] is True


def test_a_sweep_request_with_a_bad_share_is_refused() -> None:
    with pytest.raises(MalformedEvent) as err:
        parse_sweep_request({"cluster_name": CLUSTER, "max_share_percent": 0})
    assert err.value.field == "max_share_percent"


def test_a_sweep_request_with_a_training_validation_check_is_refused() -> None:
    with pytest.raises(MalformedEvent) as err:
        parse_sweep_request(
            {"cluster_name": CLUSTER, "checks": [HealthCheck.MULTI_NODE_TRAINING_VALIDATION.value]}
        )
    assert err.value.field == "checks"


# -- the decision table row -------------------------------------------------------------------


def test_a_failed_sweep_check_alone_recommends_replacement_after_review() -> None:
    item = evidence_of(
        {
            "kind": TriggerSource.SWEEP,
            "key": "sweep:1",
            "checks": ["InstanceConnectivity"],
            "message": "EFA",
        }
    )
    judged = recommend([], None, sweeps=[item])
    assert judged.advice is Advice.REPLACE
    assert any("idle sweep" in r for r in judged.reasons)


# -- Slurm -------------------------------------------------------------------------------------


@dataclass
class FakeSlurm:
    """A controller's nodes as `scontrol -o show node` would show them."""

    states: dict[str, SlurmNodeState] = field(default_factory=dict)

    def nodes(self, controller: str) -> list[SlurmNodeState]:
        return list(self.states.values())

    def drain(self, controller: str, node_name: str, reason: str) -> DrainChange:
        raise NotImplementedError

    def resume(self, controller: str, node_name: str, reason: str) -> DrainChange:
        raise NotImplementedError


def slurm_world(states: dict[str, tuple[str, str | None]]) -> World:
    """A Slurm cluster whose nodes (host → state, reason) the controller shows."""
    slurm = FakeSlurm()
    world = World(
        slurm=slurm,
        slurm_hostname="ip-10-1-0-99.us-west-2.compute.internal",
        settings=settings(
            node_isolation={CLUSTER: IsolationConfig(isolate=True, slurm_controller="i-0c1")},
            guard_max_open_nodes=100,
            guard_max_open_percent=100,
        ),
    )
    slurm.states["ip-10-1-0-99"] = SlurmNodeState("ip-10-1-0-99", "IDLE", None, None)
    for n, (host, (state, reason)) in enumerate(states.items()):
        world.hyperpod.add_node(CLUSTER, GROUP, f"i-0{n + 1:016x}", hostname=f"{host}.internal")
        slurm.states[host] = SlurmNodeState(host, state, reason, "ops" if reason else None)
    return world


def test_slurm_nodes_drained_reserved_or_allocated_are_never_swept() -> None:
    world = slurm_world(
        {
            "ip-10-1-0-1": ("IDLE", None),
            "ip-10-1-0-2": ("IDLE+DRAIN", "disk replacement"),
            "ip-10-1-0-3": ("ALLOCATED", None),
            "ip-10-1-0-4": ("IDLE+MAINTENANCE+RESERVED", None),
            "ip-10-1-0-5": ("MIXED", None),
            "ip-10-1-0-6": ("DOWN+NOT_RESPONDING", "Not responding"),
        }
    )
    sweep(EVERYTHING, world.deps)
    skipped = last_record(world)["skipped"]
    assert set(checked(world)) == {"i-00000000000000001", INSTANCE}
    assert [skipped[f"i-0{n:016x}"] for n in range(2, 7)] == [
        SkipReason.CORDONED,
        SkipReason.BUSY,
        SkipReason.RESERVED,
        SkipReason.BUSY,
        SkipReason.CORDONED,
    ]


def test_a_node_hyperpod_is_not_running_is_not_swept() -> None:
    world = eks_world()
    world.hyperpod.node(CLUSTER, IDLE[4]).status = NodeStatus.PENDING.value  # type: ignore[union-attr]
    sweep(EVERYTHING, world.deps)
    assert last_record(world)["skipped"][IDLE[4]] == SkipReason.NOT_RUNNING


def test_the_card_of_a_failed_sweep_check_says_failing_hardware_and_recommends_replacement() -> (
    None
):
    # Given the incident a failed InstanceConnectivity check opened
    world = eks_world()
    checked_one_failing(world)
    (failed,) = [r for r in sweep(EVERYTHING, world.deps)["results"] if not r["passed"]]
    # When it is health-checked as the state machine does (the node is in Failure: no second
    # check starts) and its approval is requested
    world.awaiting_approval(failed["incident_id"])
    # Then the card says failing hardware, names the check, and recommends replacement
    what, _, advice = world.notifier.published[-1].message.splitlines()[:3]
    assert what.startswith(f"WHAT: failing hardware suspected on {IDLE[0]}")
    assert "InstanceConnectivity failed on the idle node" in what
    assert advice == "RECOMMENDATION: REPLACE AFTER REVIEW"


def test_a_refused_health_check_call_still_records_the_results_and_is_raised() -> None:
    world = eks_world()
    checked_one_failing(world)
    world.hyperpod.fail_next("StartClusterHealthCheck", DependencyFailed("throttled"))

    with pytest.raises(DependencyFailed):
        sweep(EVERYTHING, world.deps)

    record = last_record(world)
    assert "StartClusterHealthCheck failed" in record["held"]
    assert [r["instance_id"] for r in record["results"] if not r["passed"]] == [IDLE[0]]


def test_a_call_that_fails_after_another_started_checks_leaves_those_checks_recorded() -> None:
    # Given idle nodes in 100 instance groups (two calls: at most 99 configurations a call),
    # the first group's node failing its check, and the second call refused
    world = eks_world()
    fake = world.hyperpod
    groups = [f"group-{n:03d}" for n in range(100)]
    fake.clusters[CLUSTER].instance_groups.extend(groups)
    spread = [f"i-0e{n:015x}" for n in range(100)]
    for group, instance in zip(groups, spread, strict=True):
        fake.add_node(CLUSTER, group, instance)
        world.kube.add_node(EKS, f"node-{instance}", instance)
    for instance in IDLE:  # busy: the batch of 100 is the spread nodes alone
        world.kube.add_pod(EKS, f"node-{instance}", {JOB_LABEL: "llama-pretrain"})
    world.kube.add_pod(EKS, NODE, {JOB_LABEL: "llama-pretrain"})
    fake.fail_check(CLUSTER, spread[0], HealthCheck.INSTANCE_CONNECTIVITY)
    calls = []
    start = fake.start_health_checks

    def second_refused(cluster_name, groups, checks):
        calls.append(groups)
        if len(calls) == 2:
            raise DependencyFailed("throttled")
        return start(cluster_name, groups, checks)

    fake.start_health_checks = second_refused  # type: ignore[method-assign]

    # When the sweep runs (and raises), then runs again once the checks are done
    with pytest.raises(DependencyFailed):
        sweep(EVERYTHING, world.deps)
    first = last_record(world)
    fake.advance(3)
    again = sweep(EVERYTHING, world.deps)

    # Then the first call's nodes were recorded as checked, and the next run read their results:
    # the failed one opened its incident
    started = [i for config in calls[0].values() for i in config]
    assert set(first["checked"]) == set(started) and spread[0] in started
    assert "StartClusterHealthCheck failed" in first["held"]
    failed = [r for r in again["results"] if not r["passed"]]
    assert [r["instance_id"] for r in failed] == [spread[0]]
    assert failed[0]["incident_id"]


def test_with_automatic_recovery_the_incident_records_that_hyperpod_replaced_the_node() -> None:
    # Given a cluster with NodeRecovery Automatic whose idle node fails the sweep's check
    world = eks_world()
    world.hyperpod.clusters[CLUSTER].node_recovery = NodeRecovery.AUTOMATIC.value
    checked_one_failing(world)
    # When the next run opens its incident, and the health check step looks at the node
    record = sweep(EVERYTHING, world.deps)
    (failed,) = [r for r in record["results"] if not r["passed"]]
    ref = IncidentRef(failed["incident_id"])
    health_check.start_health_check(ref, world.deps)
    world.hyperpod.advance(3)
    status = health_check.check_health(ref, world.deps)
    # Then the run and the incident say HyperPod acts by itself, and the incident saw it replace
    opened = world.audit.entries(ref.incident_id)[0]
    assert record["automatic_recovery"] is True
    assert opened.action == AuditAction.INCIDENT_OPENED
    assert opened.details["automatic_recovery"] is True
    assert world.incident(ref.incident_id).node_recovery == NodeRecovery.AUTOMATIC
    assert status["status"] == NodeStatus.NOT_FOUND
    assert IDLE[0] in world.hyperpod.replaced_by
