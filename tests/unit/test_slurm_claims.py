"""On a cluster orchestrated by Slurm, the node a report names for an instance is checked
against the host HyperPod names for it (`PrivateDnsHostname`, the Slurm node's name), as
Kubernetes' providerID is on EKS: a claim that does not match is kept unconfirmed, never acted
on."""

from __future__ import annotations

import copy
from datetime import timedelta

from sdc_remediation.lambdas.logic import intake
from sdc_remediation.lambdas.logic.core.steps import Step
from sdc_remediation.lambdas.logic.opening import claims
from sdc_remediation.lambdas.models.events import parse_contributor_event
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.report import parse_report_event
from sdc_remediation.lambdas.models.settings import IsolationConfig
from tests.unit.reports import forged_event, suspect
from tests.unit.world import CLUSTER, INSTANCE, World, alarm_event, settings

HOST = "ip-10-1-69-242"
CONTROLLER = "i-0c0000000000000c1"


def slurm_world(*, controller: str | None = CONTROLLER) -> World:
    isolate = (
        {CLUSTER: IsolationConfig(isolate=True, slurm_controller=controller)} if controller else {}
    )
    return World(
        slurm_hostname=f"{HOST}.us-west-2.compute.internal",
        settings=settings(node_isolation=isolate),
    )


def culprit_on(node_name: str | None) -> dict:
    return forged_event(
        [INSTANCE],
        ambiguous=False,
        role="culprit",
        check="compute",
        culprits=[0],
        suspects=[suspect(node_name=node_name)],
    )


def store(world: World, event: dict) -> str:
    (opened,) = intake.store_report(parse_report_event(event), world.deps)["incidents"]
    return opened["incident_id"]


def test_a_report_naming_the_slurm_host_hyperpod_gives_is_confirmed():
    world = slurm_world()

    incident = world.incident(store(world, culprit_on(HOST)))

    assert incident.unconfirmed == {}


def refused_why(world: World, incident_id: str) -> str:
    incident = world.incident(incident_id)
    assert incident.state is IncidentState.SKIPPED
    return incident.reason or ""


def test_a_report_naming_another_host_is_refused_with_the_host_hyperpod_names():
    world = slurm_world()

    why = refused_why(world, store(world, culprit_on("ip-10-9-9-9")))

    assert '"ip-10-9-9-9"' in why
    assert f"HyperPod names {INSTANCE}'s host {HOST}" in why


def test_the_check_holds_on_a_slurm_cluster_even_without_a_controller_configured():
    world = slurm_world(controller=None)

    assert "ip-10-9-9-9" in refused_why(world, store(world, culprit_on("ip-10-9-9-9")))


def test_a_fully_qualified_host_name_is_not_the_slurm_node_name():
    world = slurm_world()

    why = refused_why(world, store(world, culprit_on(f"{HOST}.us-west-2.compute.internal")))

    assert f"HyperPod names {INSTANCE}'s host {HOST}" in why


def test_a_node_hyperpod_gives_no_host_name_cannot_be_confirmed():
    world = slurm_world()
    world.hyperpod.add_node(CLUSTER, "workers", INSTANCE, hostname=None)

    assert "no host name to check it against" in refused_why(world, store(world, culprit_on(HOST)))


def test_a_report_naming_no_node_is_not_checked_against_host_names():
    world = slurm_world()

    incident = world.incident(store(world, culprit_on(None)))

    assert incident.unconfirmed == {}


def test_an_alarm_names_no_node_and_opens_on_hyperpods_word_alone():
    world = slurm_world()
    event = copy.deepcopy(alarm_event())
    at = world.clock.current + timedelta(seconds=1)
    event["detail"]["state"]["timestamp"] = at.strftime("%Y-%m-%dT%H:%M:%S.000+0000")

    result = intake.open_incident(parse_contributor_event(event), world.deps)

    assert result["action"] == "opened"


def test_the_confirmer_is_named_for_the_orchestrator():
    slurm = slurm_world()
    eks = World(eks_cluster="eks-1")
    cluster = slurm.hyperpod.describe_cluster(CLUSTER)

    assert claims.confirmer(Step(slurm.deps, "test"), cluster) == "HyperPod's host name"
    eks_cluster = eks.hyperpod.describe_cluster(CLUSTER)
    assert claims.confirmer(Step(eks.deps, "test"), eks_cluster) == "Kubernetes"


def test_an_alarm_naming_the_slurm_controller_is_skipped_before_anything_acts():
    world = slurm_world()
    world.hyperpod.add_node(CLUSTER, "controller-machine", CONTROLLER)
    event = copy.deepcopy(alarm_event())
    event["detail"]["alarmContributor"]["attributes"]["InstanceId"] = CONTROLLER
    at = world.clock.current + timedelta(seconds=1)
    event["detail"]["state"]["timestamp"] = at.strftime("%Y-%m-%dT%H:%M:%S.000+0000")

    result = intake.open_incident(parse_contributor_event(event), world.deps)

    assert result["action"] == "skipped"
    assert not world.workflow.executions
    assert not world.hyperpod.calls_to("StartClusterHealthCheck")


def test_a_report_naming_the_slurm_controller_leaves_it_unconfirmed():
    world = slurm_world()
    world.hyperpod.add_node(CLUSTER, "controller-machine", CONTROLLER)
    event = forged_event([CONTROLLER, INSTANCE], ambiguous=True)

    intake.store_report(parse_report_event(event), world.deps)

    (incident,) = world.store.incidents.values()
    assert "is the Slurm controller" in incident.unconfirmed[CONTROLLER]
    assert CONTROLLER not in incident.instance_ids
