"""The approval card and the incident carry HyperPod's own view of the node: its events for the
instance around the alarm and, where node isolation is on, the node's HyperPod labels; never
failing the approval request."""

from __future__ import annotations

from datetime import timedelta

from sdc_remediation.lambdas.logic import isolation
from sdc_remediation.lambdas.models.errors import DependencyFailed, KubernetesUnreachable, Throttled
from sdc_remediation.lambdas.models.hyperpod import MAX_EVENTS, HyperPodView
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.payloads import IncidentRef
from sdc_remediation.lambdas.models.settings import IsolationConfig
from sdc_remediation.lambdas.wording import card_lines
from tests.unit.world import CLUSTER, EKS, INSTANCE, NODE, TOKEN, World, settings

HEADING = "HYPERPOD (its own events for this instance, and the node's labels)"
HEALTH_LABELS = {
    "sagemaker.amazonaws.com/node-health-status": "UnschedulablePendingReplacement",
    "sagemaker.amazonaws.com/deep-health-check-status": "Failed",
    "sagemaker.amazonaws.com/fault-type": "GpuHardware",
    "sagemaker.amazonaws.com/fault-reason": "XID79",
    "kubernetes.io/hostname": "ip-10-1-17-42",
}


def paragraph(world: World) -> list[str]:
    card = world.notifier.published[-1].message
    (found,) = [p for p in card.split("\n\n") if p.startswith(HEADING)]
    return found.splitlines()[1:]


def isolated_world(labels: dict[str, str] | None = None) -> tuple[World, str]:
    """An EKS world with node isolation on, the node carrying `labels`, awaiting approval."""
    world = World(
        eks_cluster=EKS,
        settings=settings(node_isolation={CLUSTER: IsolationConfig(isolate=True, eks_cluster=EKS)}),
    )
    if labels:
        world.kube.nodes[EKS][NODE]["labels"] = dict(labels)
    incident_id = world.opened()
    isolation.isolate_node(IncidentRef(incident_id), world.deps)
    return world, incident_id


def request(world: World, incident_id: str) -> Incident:
    return world.incident(world.awaiting_approval(incident_id))


def test_the_card_lists_hyperpods_events_for_the_instance_oldest_first():
    world = World()
    world.hyperpod.add_event(
        CLUSTER,
        INSTANCE,
        "Node rebooted; it is Running",
        at=world.clock.current - timedelta(minutes=20),
    )

    world.awaiting_approval()

    lines = paragraph(world)
    assert lines[0] == "  07:55:05 UTC Node rebooted; it is Running"
    assert any("Deep health check started: " in line for line in lines[1:])
    assert lines[-1].endswith("Deep health check passed")


def test_a_failed_health_check_event_carries_its_level_and_failure_message():
    world = World()
    world.hyperpod.set_health_check_result(CLUSTER, INSTANCE, passes=False)

    world.awaiting_approval()

    assert any(
        line.endswith("[Error] Deep health check failed: InstanceStress: GPU stress test failed")
        for line in paragraph(world)
    )


def test_events_of_other_instances_and_from_before_the_window_are_left_out():
    world = World()
    other = world.hyperpod.add_node(CLUSTER, "gpu-workers")
    world.hyperpod.add_event(CLUSTER, other, "Node replacement requested")
    world.hyperpod.add_event(
        CLUSTER, INSTANCE, "Node replaced long ago", at=world.clock.current - timedelta(days=2)
    )

    incident_id = world.awaiting_approval()

    text = "\n".join(paragraph(world))
    assert "Node replacement requested" not in text and "long ago" not in text
    stored = world.incident(incident_id).hyperpod
    assert stored is not None and {e.instance_id for e in stored.events} == {INSTANCE}


def test_only_the_newest_events_are_kept_and_the_card_says_older_ones_were_left_out():
    world = World()
    start = world.clock.current - timedelta(minutes=50)
    for minute in range(MAX_EVENTS + 5):
        world.hyperpod.add_event(
            CLUSTER, INSTANCE, f"event {minute}", at=start + timedelta(minutes=minute)
        )

    incident_id = world.awaiting_approval()

    stored = world.incident(incident_id).hyperpod
    assert stored is not None and stored.more_events and len(stored.events) == MAX_EVENTS
    assert paragraph(world)[0] == "  (older events left out; the console lists them all)"
    assert "event 4" not in "\n".join(paragraph(world))


def test_a_cluster_that_keeps_no_events_says_so_and_the_card_still_goes_out():
    world = World()
    world.hyperpod.clusters[CLUSTER].events_supported = False

    world.awaiting_approval()

    assert paragraph(world)[0].startswith(
        "  events: not available: HyperPod keeps node events only for clusters with continuous "
        "node provisioning (ValidationException"
    )


def test_a_failing_events_call_is_named_on_the_card_and_the_request_goes_on():
    world = World()
    world.hyperpod.fail_next(
        "ListClusterEvents", Throttled("slow down", code="ThrottlingException")
    )

    incident_id = world.awaiting_approval()

    assert paragraph(world) == ["  events: not available: ThrottlingException: slow down"]
    assert world.store.task_token(incident_id) == TOKEN


def test_with_isolation_the_card_shows_the_nodes_hyperpod_labels_only():
    world, incident_id = isolated_world(HEALTH_LABELS)

    request(world, incident_id)

    assert paragraph(world)[-1] == (
        f"  node {NODE} labels: node-health-status=UnschedulablePendingReplacement, "
        "deep-health-check-status=Failed, fault-type=GpuHardware, fault-reason=XID79"
    )


def test_with_isolation_a_node_without_hyperpod_labels_says_so():
    world, incident_id = isolated_world()

    request(world, incident_id)

    assert paragraph(world)[-1] == f"  node {NODE} has no HyperPod health labels"


def test_without_isolation_no_kubernetes_node_is_read():
    world = World(eks_cluster=EKS)

    world.awaiting_approval()

    assert world.kube.count("find_node") == 0
    assert not any("labels" in line for line in paragraph(world))


def test_a_failing_node_read_is_named_and_the_events_still_shown():
    world, incident_id = isolated_world(HEALTH_LABELS)
    world.kube.fail_next("find_node", KubernetesUnreachable("EKS endpoint timed out"))

    request(world, incident_id)

    lines = paragraph(world)
    assert lines[-1] == "  node labels: not available: EKS endpoint timed out"
    assert any("Deep health check passed" in line for line in lines)


def test_the_view_round_trips_through_the_incident_record():
    world, incident_id = isolated_world(HEALTH_LABELS)
    incident = request(world, incident_id)

    again = Incident.from_record(incident.to_record())

    assert again.hyperpod == incident.hyperpod
    assert again.hyperpod is not None and again.hyperpod.labels[0][1] == (
        "UnschedulablePendingReplacement"
    )


def test_an_incident_not_yet_asked_says_so():
    assert card_lines.hyperpod_panel(None) == ["not asked yet (the approval request asks)"]


def test_an_empty_window_says_which_window_it_was():
    view = HyperPodView(
        queried_at="2026-11-30T09:00:00+00:00",
        window_start="2026-11-30T07:14:31+00:00",
        window_end="2026-11-30T09:00:00+00:00",
    )

    assert card_lines.hyperpod_panel(view) == [
        "no events for this instance between 2026-11-30 07:14:31 UTC and 09:00:00 UTC"
    ]


def test_any_other_error_is_not_raised_into_the_approval_request():
    world = World()
    world.hyperpod.fail_next("ListClusterEvents", DependencyFailed("boom", code="AccessDenied"))

    world.awaiting_approval()

    assert paragraph(world) == ["  events: not available: AccessDenied: boom"]
