"""A hardware alert the intake cannot take (Kubernetes or HyperPod unreachable while its node is
resolved or checked, the incident table failing) is audited before it is raised into the
function's failure queue: the audit log says which alert failed and why, once."""

from __future__ import annotations

import pytest

from sdc_remediation.lambdas.logic.core.steps import was_audited
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.errors import (
    DependencyFailed,
    KubernetesUnauthorized,
    KubernetesUnreachable,
    ServiceUnavailable,
)
from tests.unit.test_hardware_intake import alert, deliver, isolating_world, sns_event
from tests.unit.world import CLUSTER, EKS, INSTANCE, World
from tests.unit.world import NODE as KUBE_NODE

SUBJECT = "event#sns-m-1"


@pytest.mark.parametrize(
    "error",
    [
        KubernetesUnreachable("EKS endpoint timed out"),
        KubernetesUnauthorized("token refused", status=401),
    ],
)
def test_kubernetes_failing_while_the_alerts_node_is_resolved_is_audited_then_raised(error):
    world = isolating_world()
    world.kube.fail_next("find_node_named", error)

    with pytest.raises(type(error)) as raised:
        deliver(world, sns_event(alert(node=KUBE_NODE)))

    (entry,) = world.audit.entries(SUBJECT)
    assert entry.action == AuditAction.OPEN_FAILED
    assert (entry.details["type"], entry.details["message"]) == (
        type(error).__name__,
        str(error),
    )
    assert entry.details["cluster_name"] == CLUSTER
    assert entry.details["source"] == "hardware"
    assert entry.details["alert"]["node_name"] == KUBE_NODE
    assert entry.details["alert"]["rule"] == "hardware_throttling"
    assert was_audited(raised.value)
    assert ("find_node_named", EKS, KUBE_NODE) in world.kube.calls
    assert world.store.open_incident_id(CLUSTER, INSTANCE) is None
    assert world.workflow.executions == {}


def test_the_same_alert_delivered_again_once_kubernetes_answers_opens_the_incident():
    world = isolating_world()
    world.kube.fail_next("find_node_named", KubernetesUnreachable("EKS endpoint timed out"))
    with pytest.raises(KubernetesUnreachable):
        deliver(world, sns_event(alert(node=KUBE_NODE)))

    (result,) = deliver(world, sns_event(alert(node=KUBE_NODE)))

    assert result["action"] == "opened"
    actions = [e.action for e in world.audit.entries(SUBJECT)]
    assert actions == [AuditAction.OPEN_FAILED]


def test_hyperpod_failing_while_the_node_is_checked_is_audited_once(world: World):
    world.hyperpod.fail_next("DescribeClusterNode", ServiceUnavailable("HyperPod is down"))

    with pytest.raises(ServiceUnavailable):
        deliver(world, sns_event(alert()))

    (entry,) = world.audit.entries(SUBJECT)
    assert entry.action == AuditAction.OPEN_FAILED
    assert entry.details["instance_id"] == INSTANCE
    assert entry.details["message"] == "HyperPod is down"


def test_a_resolved_alert_that_cannot_be_attached_is_audited_then_raised(world: World):
    (opened,) = deliver(world, sns_event(alert()))
    world.store.fail_next_save = DependencyFailed("the table refused the write")

    with pytest.raises(DependencyFailed):
        deliver(world, sns_event(alert(status="resolved"), message_id="m-2"))

    (entry,) = world.audit.entries("event#sns-m-2")
    assert entry.action == AuditAction.OPEN_FAILED
    assert entry.details["alert"]["status"] == "resolved"
    assert [e["status"] for e in world.incident(opened["incident_id"]).evidence] == ["firing"]


def test_an_audit_log_that_fails_too_never_hides_the_alerts_own_error(monkeypatch):
    world = isolating_world()
    world.kube.fail_next("find_node_named", KubernetesUnreachable("EKS endpoint timed out"))

    def refuse(entry: object) -> None:
        raise DependencyFailed("the audit table is down")

    monkeypatch.setattr(world.audit, "append", refuse)

    with pytest.raises(KubernetesUnreachable):
        deliver(world, sns_event(alert(node=KUBE_NODE)))
