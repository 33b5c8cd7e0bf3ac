"""A reboot or replacement that may be running is never cut short: a step killed around its
HyperPod request resumes from the request it wrote ahead, and a failure close keeps the node
isolated (with its lock and guard slot) and hands it to reconciliation."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from sdc_remediation.lambdas.logic import closing, health_check, recovery
from sdc_remediation.lambdas.models.payloads import CloseRequest, IncidentRef, Outcome
from sdc_remediation.lambdas.models.settings import IsolationConfig
from tests.unit.world import CLUSTER, EKS, INSTANCE, NODE, World, settings

REBOOT = "BatchRebootClusterNodes"
REPLACE = "BatchReplaceClusterNodes"


class Killed(BaseException):
    """Not an Exception: no step code catches it, as none survives a killed invocation."""


class Killing:
    """Delegates to `inner`; the first call of `method` is killed `before` or after it acts."""

    def __init__(self, inner: Any, method: str, *, before: bool) -> None:
        self._inner, self._method, self._before = inner, method, before

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name != self._method:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if self._before:
                raise Killed(f"killed before {name}")
            attr(*args, **kwargs)
            raise Killed(f"killed after {name}")

        return call


def eks_world() -> World:
    on = {CLUSTER: IsolationConfig(isolate=True, eks_cluster=EKS)}
    return World(eks_cluster=EKS, settings=settings(node_isolation=on))


def killed_reboot(world: World, incident_id: str, *, before: bool) -> None:
    deps = dataclasses.replace(
        world.deps, hyperpod=Killing(world.hyperpod, "reboot_nodes", before=before)
    )
    with pytest.raises(Killed):
        recovery.reboot_node(IncidentRef(incident_id), deps)


def close_failed(world: World, incident_id: str) -> dict:
    error = {"Error": "Sandbox.Timedout", "Cause": "Task timed out"}
    return closing.close_incident(CloseRequest(incident_id, Outcome.FAILED, error), world.deps)


# -- the retry resumes from the write-ahead ----------------------------------------------------


def test_a_reboot_killed_after_its_request_is_not_sent_again_and_is_recorded_as_ours():
    world = eks_world()
    incident_id = world.decided("reboot", isolated=True)
    killed_reboot(world, incident_id, before=False)

    result = recovery.reboot_node(IncidentRef(incident_id), world.deps)

    assert result == {"status": "requested"}
    assert len(world.hyperpod.calls_to(REBOOT)) == 1
    record = world.incident(incident_id).reboot
    assert (record.pending, record.requested_by_us) == (False, True)
    entry = world.audit.entries(incident_id)[-1]
    assert (entry.action, entry.details["resumed"]) == ("reboot_requested", True)


def test_a_reboot_killed_before_its_request_sends_it_once_on_the_retry():
    world = eks_world()
    incident_id = world.decided("reboot", isolated=True)
    killed_reboot(world, incident_id, before=True)

    result = recovery.reboot_node(IncidentRef(incident_id), world.deps)

    assert result == {"status": "requested"}
    assert len(world.hyperpod.calls_to(REBOOT)) == 1
    assert world.hyperpod.node(CLUSTER, INSTANCE).reboots == 1


def test_a_reboot_whose_answer_was_saved_but_not_audited_is_audited_on_the_retry_not_resent():
    world = eks_world()
    incident_id = world.decided("reboot", isolated=True)
    dying_audit = dataclasses.replace(world.deps, audit=Killing(world.audit, "append", before=True))
    # the request goes out, its answer is saved, the audit entry is not written
    with pytest.raises(Killed):
        recovery.reboot_node(IncidentRef(incident_id), dying_audit)

    result = recovery.reboot_node(IncidentRef(incident_id), world.deps)

    assert result == {"status": "requested"}
    assert len(world.hyperpod.calls_to(REBOOT)) == 1
    assert world.audit.actions(incident_id).count("reboot_requested") == 1


def test_a_replacement_killed_after_its_request_is_not_sent_again():
    world = eks_world()
    incident_id = world.decided("approve", isolated=True)
    deps = dataclasses.replace(
        world.deps, hyperpod=Killing(world.hyperpod, "replace_nodes", before=False)
    )
    with pytest.raises(Killed):
        recovery.replace_node(IncidentRef(incident_id), deps)

    result = recovery.replace_node(IncidentRef(incident_id), world.deps)

    assert result == {"status": "requested"}
    assert len(world.hyperpod.calls_to(REPLACE)) == 1


# -- the failure close keeps the node -----------------------------------------------------------


def test_a_failure_close_during_a_reboot_keeps_the_node_cordoned_and_records_recovery_unknown():
    world = eks_world()
    incident_id = world.decided("reboot", isolated=True)
    killed_reboot(world, incident_id, before=False)

    closed = close_failed(world, incident_id)

    incident = world.incident(incident_id)
    node = world.kube.node(EKS, NODE)
    assert closed["state"] == "failed"
    assert node["unschedulable"] is True and node["taints"]
    assert world.kube.count("uncordon") == 0
    assert incident.recovery_unknown is not None and incident.reconciled_at is None
    assert world.store.open_incident_id(CLUSTER, INSTANCE) == incident_id
    assert incident_id in world.store.guard_state(CLUSTER).open_ids
    actions = world.audit.actions(incident_id)
    assert "recovery_unknown" in actions and "node_released" not in actions
    assert "Node kept: a reboot or replacement may still be running" in (
        world.notifier.published[-1].message
    )


def test_closing_again_while_the_recovery_is_unknown_audits_it_once_and_still_keeps_the_node():
    world = eks_world()
    incident_id = world.decided("reboot", isolated=True)
    killed_reboot(world, incident_id, before=False)
    close_failed(world, incident_id)

    close_failed(world, incident_id)

    assert world.audit.actions(incident_id).count("recovery_unknown") == 1
    assert world.kube.count("uncordon") == 0


def test_a_failure_close_after_the_reboot_was_done_releases_the_node():
    world = eks_world()
    incident_id = world.decided("reboot", isolated=True)
    recovery.reboot_node(IncidentRef(incident_id), world.deps)
    while not recovery.check_reboot(IncidentRef(incident_id), world.deps)["done"]:
        pass

    close_failed(world, incident_id)

    assert world.kube.count("uncordon") == 1
    assert world.incident(incident_id).recovery_unknown is None
    assert world.store.open_incident_id(CLUSTER, INSTANCE) is None


def test_a_health_check_started_and_saved_but_not_audited_is_audited_on_the_retry_not_restarted():
    world = eks_world()
    incident_id = world.opened()
    dying_audit = dataclasses.replace(world.deps, audit=Killing(world.audit, "append", before=True))
    with pytest.raises(Killed):  # the check started and was saved; the audit entry was not
        health_check.start_health_check(IncidentRef(incident_id), dying_audit)

    health_check.start_health_check(IncidentRef(incident_id), world.deps)

    assert len(world.hyperpod.calls_to("StartClusterHealthCheck")) == 1
    entries = [e for e in world.audit.entries(incident_id) if e.action == "health_check_started"]
    assert len(entries) == 1 and entries[0].details["recorded_late"] is True
