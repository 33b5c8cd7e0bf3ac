"""Node isolation logic: cordon and taint while the incident is open, undo on closing."""

from __future__ import annotations

import pytest

from sdc_remediation.lambdas.logic import approval, closing, isolation, recovery
from sdc_remediation.lambdas.logic.ports import Deps
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.errors import (
    KubernetesConflict,
    KubernetesNotConfigured,
    KubernetesNotFound,
    KubernetesUnauthorized,
    KubernetesUnreachable,
    SettingsError,
)
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.isolation import IsolationState
from sdc_remediation.lambdas.models.kubernetes import (
    TAINT_KEY,
    incident_taint,
    instance_of_provider_id,
    label_value,
)
from sdc_remediation.lambdas.models.payloads import CloseRequest, IncidentRef, Outcome
from sdc_remediation.lambdas.models.settings import IsolationConfig, Settings
from sdc_remediation.lambdas.wording import cards
from tests.unit.world import CLUSTER, EKS, INSTANCE, NODE, World, settings

ON = {CLUSTER: IsolationConfig(isolate=True, eks_cluster=EKS)}


def eks_world(**changes) -> World:
    return World(eks_cluster=EKS, settings=settings(node_isolation=ON, **changes))


def isolate(world: World, incident_id: str):
    return isolation.isolate_node(IncidentRef(incident_id), world.deps)


def close(world: World, incident_id: str, outcome: Outcome):
    return closing.close_incident(CloseRequest(incident_id, outcome, None), world.deps)


def card_of(world: World, incident_id: str) -> str:
    incident = world.incident(incident_id)
    return cards.approval_card(incident, world.settings).text


# -- isolating ----------------------------------------------------------------------------------


def test_the_suspect_node_is_found_by_its_provider_id_cordoned_and_tainted_with_the_incident():
    world = eks_world()
    incident_id = world.opened()

    result = isolate(world, incident_id)

    node = world.kube.node(EKS, NODE)
    assert result == {"isolated": True, "state": "isolated", "reason": None}
    assert node["unschedulable"] is True
    assert node["taints"] == [
        {"key": TAINT_KEY, "value": label_value(incident_id), "effect": "NoSchedule"}
    ]
    recorded = world.incident(incident_id).isolation
    assert recorded.nodes[INSTANCE].node_name == NODE
    assert recorded.nodes[INSTANCE].cordoned_by_us is True


def test_isolating_is_audited_with_the_node_name_and_resource_version():
    world = eks_world()
    incident_id = world.opened()

    isolate(world, incident_id)

    entry = next(e for e in world.audit.entries(incident_id) if e.action == "node_isolated")
    assert entry.details["node_name"] == NODE
    assert entry.details["resource_version"] == world.kube.node(EKS, NODE)["rv"]
    assert entry.details["instance_id"] == INSTANCE


def test_the_approval_card_says_plainly_that_the_node_is_cordoned_and_tainted():
    world = eks_world()
    incident_id = world.opened()
    isolate(world, incident_id)

    text = card_of(world, incident_id)

    taint = f"{TAINT_KEY}={label_value(incident_id)}:NoSchedule"
    assert f"cordoned and tainted {taint} on node {NODE}" in text
    assert "NOT isolated" not in text


def test_isolating_twice_patches_the_node_once():
    world = eks_world()
    incident_id = world.opened()

    first = isolate(world, incident_id)
    second = isolate(world, incident_id)

    assert first == second
    assert world.kube.count("cordon") == 1


def test_a_retry_after_a_crash_between_patch_and_record_keeps_the_cordon_as_ours():
    world = eks_world()
    incident_id = world.opened()
    original = world.kube.cordon

    def cordon_then_die(eks, name, taint):
        original(eks, name, taint)
        raise RuntimeError("the function died after the patch")

    world.kube.cordon = cordon_then_die  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        isolate(world, incident_id)
    world.kube.cordon = original  # type: ignore[method-assign]
    incident = world.incident(incident_id)
    incident.state = IncidentState.OPENED  # as a retry after the process died would find it
    incident.error = None
    world.store.incidents[incident_id] = incident

    isolate(world, incident_id)
    close(world, incident_id, Outcome.FAILED)

    node = world.kube.node(EKS, NODE)
    assert world.incident(incident_id).isolation.nodes[INSTANCE].cordoned_by_us is True
    assert node["unschedulable"] is False
    assert node["taints"] == []


@pytest.mark.parametrize(
    ("arrange", "cause", "card_says"),
    [
        (
            lambda w: setattr(w, "settings", settings()),
            "off",
            "node isolation is off for cluster ml-cluster-1",
        ),
        (
            lambda w: w.hyperpod.clusters[CLUSTER].__setattr__("eks_cluster_arn", None),
            "not_eks",
            "is not orchestrated by EKS",
        ),
        (
            lambda w: setattr(
                w,
                "settings",
                settings(node_isolation={CLUSTER: IsolationConfig(True, "other-eks")}),
            ),
            "mismatch",
            "configured EKS cluster other-eks",
        ),
        (
            lambda w: w.kube.fail_next("find_node", KubernetesUnreachable("connection refused")),
            "unreachable",
            "unreachable: connection refused",
        ),
        (
            lambda w: w.kube.fail_next(
                "cordon", KubernetesUnauthorized("403 forbidden by RBAC", status=403)
            ),
            "unauthorized",
            "unauthorized: 403 forbidden by RBAC",
        ),
        (
            lambda w: w.kube.nodes[EKS].clear(),
            "not_found",
            "not_found: no node names",
        ),
        (
            lambda w: w.kube.fail_next("cordon", KubernetesConflict("changed 4 times")),
            "conflict",
            "conflict: changed 4 times",
        ),
        (lambda w: setattr(w.switch, "value", "true"), "held", "nothing acts"),
    ],
    ids=[
        "off",
        "not-eks",
        "other-eks",
        "unreachable",
        "forbidden",
        "no-node",
        "conflict",
        "paused",
    ],
)
def test_a_node_that_cannot_be_isolated_is_recorded_with_the_cause_and_the_card_warns(
    arrange, cause, card_says
):
    world = eks_world()
    incident_id = world.opened()
    arrange(world)

    result = isolate(world, incident_id)

    incident = world.incident(incident_id)
    assert result["isolated"] is False
    assert incident.isolation.state == "not_isolated"
    assert incident.isolation.cause == cause
    assert incident.state is IncidentState.OPENED  # the flow goes on
    text = card_of(world, incident_id)
    assert "WARNING: the node is NOT isolated" in text
    assert card_says in text
    assert world.kube.count("uncordon") == 0


def test_a_node_an_operator_cordoned_stays_cordoned_after_release():
    world = eks_world()
    world.kube.nodes[EKS].clear()
    world.kube.add_node(EKS, NODE, INSTANCE, unschedulable=True)
    incident_id = world.opened()
    isolate(world, incident_id)

    close(world, incident_id, Outcome.FAILED)

    node = world.kube.node(EKS, NODE)
    assert node["unschedulable"] is True
    assert node["taints"] == []
    assert world.incident(incident_id).isolation.nodes[INSTANCE].cordoned_by_us is False


def test_another_teams_taints_are_kept_on_cordon_and_on_release():
    world = eks_world()
    theirs = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    world.kube.nodes[EKS].clear()
    world.kube.add_node(EKS, NODE, INSTANCE, taints=[theirs])
    incident_id = world.opened()

    isolate(world, incident_id)
    during = world.kube.node(EKS, NODE)["taints"]
    close(world, incident_id, Outcome.FAILED)

    assert during[0] == theirs and len(during) == 2
    assert world.kube.node(EKS, NODE)["taints"] == [theirs]


# -- releasing ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("decision", "outcome"),
    [("reject", Outcome.REJECTED), (None, Outcome.EXPIRED), ("approve", Outcome.FAILED)],
    ids=["rejected", "expired", "failed-after-a-decision"],
)
def test_closing_without_a_replacement_uncordons_and_removes_only_our_taint(decision, outcome):
    world = eks_world()
    incident_id = world.awaiting_approval(isolated=True)
    if decision:
        approval.decide(world.decision(incident_id, decision), world.deps)

    close(world, incident_id, outcome)

    node = world.kube.node(EKS, NODE)
    incident = world.incident(incident_id)
    assert node["unschedulable"] is False
    assert node["taints"] == []
    assert incident.isolation.state == "released"
    assert "node_released" in world.audit.actions(incident_id)
    notice = world.notifier.published[-1].message
    assert f"Isolation: {NODE} ({INSTANCE}) uncordoned, taint removed." in notice


def test_a_replaced_node_is_not_released_and_the_record_says_it_is_gone():
    world = eks_world()
    incident_id = world.awaiting_approval(isolated=True)
    approval.decide(world.decision(incident_id, "approve"), world.deps)
    ref = IncidentRef(incident_id)
    recovery.replace_node(ref, world.deps)
    while not recovery.check_replacement(ref, world.deps)["done"]:
        pass

    close(world, incident_id, Outcome.REPLACED)

    record = world.incident(incident_id).isolation
    assert world.kube.count("uncordon") == 0
    assert record.nodes[INSTANCE].state == "gone"
    assert "nothing to release" in record.nodes[INSTANCE].reason


def test_a_dry_run_replacement_leaves_the_node_in_place_so_it_is_released():
    world = eks_world(dry_run=True)
    incident_id = world.awaiting_approval(isolated=True)
    approval.decide(world.decision(incident_id, "approve"), world.deps)
    ref = IncidentRef(incident_id)
    recovery.replace_node(ref, world.deps)
    recovery.check_replacement(ref, world.deps)

    close(world, incident_id, Outcome.REPLACED)

    assert world.kube.node(EKS, NODE)["unschedulable"] is False
    assert world.incident(incident_id).isolation.state == "released"


def test_a_release_the_api_refuses_is_recorded_the_notice_warns_and_closing_again_retries():
    world = eks_world()
    incident_id = world.awaiting_approval(isolated=True)
    approval.decide(world.decision(incident_id, "reject"), world.deps)
    world.kube.fail_next("uncordon", KubernetesUnreachable("timed out"))

    close(world, incident_id, Outcome.REJECTED)
    failed = world.incident(incident_id)
    notice = world.notifier.published[-1].message
    close(world, incident_id, Outcome.REJECTED)

    assert failed.state is IncidentState.REJECTED
    assert failed.isolation.state == "release_failed"
    assert f"WARNING: {NODE} ({INSTANCE}) is still cordoned" in notice
    assert f"kubectl uncordon {NODE}" in notice
    assert world.incident(incident_id).isolation.state == "released"
    assert world.kube.node(EKS, NODE)["unschedulable"] is False


def test_a_node_gone_from_kubernetes_at_release_is_recorded_as_gone():
    world = eks_world()
    incident_id = world.awaiting_approval(isolated=True)
    world.kube.fail_next("uncordon", KubernetesNotFound("nodes not found", status=404))

    close(world, incident_id, Outcome.EXPIRED)

    assert world.incident(incident_id).isolation.nodes[INSTANCE].state == "gone"


def test_an_incident_never_isolated_closes_without_calling_kubernetes():
    world = eks_world()
    incident_id = world.opened()

    close(world, incident_id, Outcome.FAILED)

    assert world.kube.calls == []


# -- models and settings ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider_id", "instance_id"),
    [
        ("aws:///usw2-az2/sagemaker/cluster/hyperpod-ab12cd34ef56-i-0123456789abcdef0",
         "i-0123456789abcdef0"),
        ("aws:///us-west-2a/i-0abcd1234", "i-0abcd1234"),
        ("aws:///usw2-az2/sagemaker/cluster/hyperpod-ab12cd34ef56-i-0abcd", None),
        ("aws:///usw2-az2/sagemaker/cluster/hyperpod-ab12cd34ef56", None),
        ("", None),
        (None, None),
    ],
)  # fmt: skip
def test_the_instance_id_is_the_whole_last_part_of_the_provider_id(provider_id, instance_id):
    assert instance_of_provider_id(provider_id) == instance_id


def test_a_prefix_of_an_instance_id_does_not_match_a_longer_one():
    world = eks_world()
    world.kube.nodes[EKS].clear()
    world.kube.add_node(EKS, "longer", INSTANCE + "1")

    with pytest.raises(KubernetesNotFound):
        world.kube.find_node(EKS, INSTANCE)


def test_a_long_incident_id_becomes_a_label_safe_value_that_stays_distinct():
    a = "sdc-" + "x" * 70 + "-a"
    b = "sdc-" + "x" * 70 + "-b"

    va, vb = incident_taint(a).value, incident_taint(b).value

    assert len(va) <= 63 and va != vb
    assert va[0].isalnum() and va[-1].isalnum()


ENV = {"INCIDENTS_TABLE": "i", "AUDIT_TABLE": "a", "TOPIC_ARN": "t"}


def test_node_isolation_is_read_per_cluster_from_the_environment():
    loaded = Settings.from_env(
        {**ENV, "NODE_ISOLATION": '{"c1": {"isolate": true, "eks_cluster": "e1"}}'}
    )

    assert loaded.isolation_for("c1") == IsolationConfig(True, "e1")
    assert loaded.isolation_for("c2").isolate is False


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("{not json", "not JSON"),
        ('["c1"]', "got list"),
        ('{"c1": {"eks_cluster": "e1"}}', '"isolate": true or false'),
        ('{"c1": {"isolate": "yes"}}', '"isolate": true or false'),
        ('{"c1": {"isolate": true, "eks": "e1"}}', "unknown keys ['eks']"),
        ('{"c1": {"isolate": true, "eks_cluster": "bad name!"}}', "bad eks_cluster"),
    ],
)
def test_a_bad_node_isolation_variable_is_refused_naming_the_problem(raw, says):
    with pytest.raises(SettingsError, match="NODE_ISOLATION") as refused:
        Settings.from_env({**ENV, "NODE_ISOLATION": raw})

    assert says in str(refused.value)


def test_the_default_deps_have_no_kubernetes_access():
    deps = World().deps
    plain = Deps(
        settings=deps.settings,
        hyperpod=deps.hyperpod,
        incidents=deps.incidents,
        reports=deps.reports,
        audit=deps.audit,
        notifier=deps.notifier,
        workflow=deps.workflow,
        guard=deps.guard,
        history=deps.history,
    )
    with pytest.raises(KubernetesNotConfigured, match="no Kubernetes API access"):
        plain.kubernetes.find_node(EKS, INSTANCE)


# -- a close no decision explains -----------------------------------------------------------------


@pytest.mark.parametrize(
    "outcome", [Outcome.REJECTED, Outcome.FAILED], ids=["token-answered-reject", "failed"]
)
def test_a_close_with_no_decision_on_the_approval_keeps_the_node_isolated_and_alarms(outcome):
    """Whoever holds the task token can answer the waiting task without decide: a reject (or
    an approve, which replace_node refuses, so the incident fails) with no recorded decision
    releases nothing."""
    world = eks_world()
    incident_id = world.awaiting_approval(isolated=True)

    close(world, incident_id, outcome)

    node = world.kube.node(EKS, NODE)
    incident = world.incident(incident_id)
    assert (incident.state, incident.closed_at is not None) == (IncidentState.FAILED, True)
    assert node["unschedulable"] is True
    assert [t["key"] for t in node["taints"]] == [TAINT_KEY]
    assert incident.isolation.nodes[INSTANCE].state == IsolationState.KEPT
    assert "no decision on its approval request" in incident.isolation.nodes[INSTANCE].reason
    (entry,) = [
        e for e in world.audit.entries(incident_id) if e.action == AuditAction.CLOSED_UNDECIDED
    ]
    assert entry.details["outcome"] == outcome.value
    assert not world.deps.guard.guard_state(CLUSTER).open_ids


def test_a_close_after_a_reboot_with_no_decision_on_the_second_card_keeps_the_node():
    world = eks_world()
    incident_id = world.awaiting_approval(isolated=True)
    approval.decide(world.decision(incident_id, "reboot"), world.deps)
    incident = world.incident(incident_id)  # as after the reboot's check failed: asked again
    incident.state = IncidentState.AWAITING_APPROVAL
    incident.approval_requested_at = "2999-01-01T00:00:00+00:00"
    world.deps.incidents.save(incident)

    close(world, incident_id, Outcome.REJECTED)

    assert world.kube.node(EKS, NODE)["unschedulable"] is True
    assert AuditAction.CLOSED_UNDECIDED in world.audit.actions(incident_id)


def test_an_expired_approval_releases_the_node_and_raises_no_alarm():
    world = eks_world()
    incident_id = world.awaiting_approval(isolated=True)

    close(world, incident_id, Outcome.EXPIRED)

    assert world.kube.node(EKS, NODE)["unschedulable"] is False
    assert AuditAction.CLOSED_UNDECIDED not in world.audit.actions(incident_id)
