"""The Kubernetes adapter against the local stand-in of an EKS cluster's API, on moto's EKS:
EKS tokens, nodes found by providerID, conditional patches, and the isolation logic on top."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import yaml

from sdc_remediation.infra.local.kube_api import KubeApi
from sdc_remediation.infra.stack.node_isolation import KUBERNETES_GROUP, RECOVERY_GROUP
from sdc_remediation.lambdas.adapters import kubernetes
from sdc_remediation.lambdas.adapters._aws import client_factory
from sdc_remediation.lambdas.adapters.eks_token import EksTokens, sts_factory
from sdc_remediation.lambdas.adapters.kubernetes import EksKubernetesNodes
from sdc_remediation.lambdas.logic import approval, closing, health_check, isolation
from sdc_remediation.lambdas.models.errors import (
    KubernetesConflict,
    KubernetesError,
    KubernetesNotFound,
    KubernetesUnauthorized,
    KubernetesUnreachable,
)
from sdc_remediation.lambdas.models.kubernetes import (
    NODE_HEALTH_LABEL,
    PENDING_REBOOT,
    PENDING_REPLACEMENT,
    incident_taint,
)
from sdc_remediation.lambdas.models.payloads import (
    ApprovalRequest,
    CloseRequest,
    IncidentRef,
    Outcome,
)
from sdc_remediation.lambdas.models.settings import IsolationConfig
from sdc_remediation.lambdas.wording import cards
from tests.docs.blocks import blocks_of
from tests.integration.conftest import REGION, SESSION
from tests.unit.world import CLUSTER, EKS, INSTANCE, NODE, World, settings

OTHERS = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
TAINT = incident_taint("sdc-ml-cluster-1-i-0abc1234def567890-20261130T081504")


@dataclass
class Kube:
    api: KubeApi
    url: str

    def adapter(self, **overrides: str) -> EksKubernetesNodes:
        return EksKubernetesNodes(
            client_factory("eks", SESSION),
            EksTokens(sts_factory(SESSION)),
            endpoint_overrides={EKS: self.url, **overrides},
        )


def _cluster_api(cluster_name: str = EKS, trusted: dict[str, str] | None = None) -> KubeApi:
    api = KubeApi(cluster_name, REGION, trusted or _caller())
    api.add_node(NODE, INSTANCE, taints=[OTHERS])
    # Named the way a guess from the instance id would name it, but another instance.
    api.add_node(f"hyperpod-{INSTANCE}", "i-0fff0000000000001")
    # Its instance id starts with ours: a prefix match would pick it.
    api.add_node("ip-10-1-99-1.us-west-2.compute.internal", INSTANCE + "1")
    return api


@pytest.fixture
def kube(eks_account: None) -> Iterator[Kube]:
    api = _cluster_api()
    with api.serve() as url:
        yield Kube(api, url)


# -- authentication -----------------------------------------------------------------------------


def test_the_eks_token_of_the_functions_role_is_accepted(kube):
    node = kube.adapter().find_node(EKS, INSTANCE)

    assert node.name == NODE
    assert {r.status for r in kube.api.requests} == {200}


def test_a_node_found_by_its_name_gives_the_instance_of_its_own_provider_id(kube):
    named = kube.adapter().find_node_named(EKS, f"hyperpod-{INSTANCE}")

    # the name holds INSTANCE, the providerID another instance: the providerID is the truth
    assert named.instance_id == "i-0fff0000000000001"
    assert kube.adapter().find_node_named(EKS, NODE).instance_id == INSTANCE
    with pytest.raises(KubernetesNotFound):
        kube.adapter().find_node_named(EKS, "ip-10-1-99-9.us-west-2.compute.internal")


@pytest.mark.parametrize(
    "api",
    [
        lambda: _cluster_api(cluster_name="another-eks"),
        lambda: _cluster_api(trusted={"someone-else": "their-secret"}),
        lambda: _cluster_api(trusted={key: "not-the-secret" for key in _caller()}),
    ],
    ids=["token-for-another-cluster", "unknown-caller", "bad-signature"],
)
def test_a_token_not_signed_for_this_cluster_by_a_known_caller_is_refused(eks_account, api):
    stand_in = api()
    with stand_in.serve() as url:
        adapter = Kube(stand_in, url).adapter()
        with pytest.raises(KubernetesUnauthorized, match="access entry") as refused:
            adapter.find_node(EKS, INSTANCE)

    assert refused.value.status == 401
    assert [r.status for r in stand_in.requests] == [401, 401]  # a fresh token is tried once


def test_rbac_refusal_names_the_group_and_the_manifest(kube):
    kube.api.forbid = True

    with pytest.raises(KubernetesUnauthorized, match="sdc-remediation") as refused:
        kube.adapter().find_node(EKS, INSTANCE)

    assert refused.value.status == 403


# -- finding and patching -----------------------------------------------------------------------


def test_the_node_is_found_by_its_provider_id_exactly_not_by_a_name_guess_or_a_prefix(kube):
    kube.api.nodes.pop(NODE)

    with pytest.raises(KubernetesNotFound, match=INSTANCE):
        kube.adapter().find_node(EKS, INSTANCE)


def test_nodes_are_listed_page_by_page(kube):
    for n in range(7):
        kube.api.add_node(f"zz-{n}", f"i-0ee000000000000{n}")
    adapter = kube.adapter()

    found = adapter.find_node(EKS, "i-0ee0000000000006")

    assert found.name == "zz-6"


def test_the_nodes_a_jobs_pods_run_on_are_listed_by_label_in_every_namespace_page_by_page(
    kube, monkeypatch
):
    monkeypatch.setattr(kubernetes, "LIST_PAGE", 2)
    job = {"training.kubeflow.org/job-name": "llama"}
    kube.api.add_pod("llama-worker-0", NODE, job, namespace="team-a")
    kube.api.add_pod("llama-worker-1", NODE, job, namespace="team-b")
    kube.api.add_pod("llama-worker-2", "ip-10-1-99-1.us-west-2.compute.internal", job)
    kube.api.add_pod("other-0", f"hyperpod-{INSTANCE}", {"training.kubeflow.org/job-name": "x"})

    nodes = kube.adapter().pod_nodes(EKS, "training.kubeflow.org/job-name=llama")

    assert nodes == {NODE, "ip-10-1-99-1.us-west-2.compute.internal"}
    assert len([r for r in kube.api.requests if r.path == "/api/v1/pods"]) == 2


def test_cordon_adds_our_taint_and_keeps_every_other_one(kube):
    change = kube.adapter().cordon(EKS, NODE, TAINT)

    spec = kube.api.spec(NODE)
    assert spec["unschedulable"] is True
    assert spec["taints"] == [OTHERS, TAINT.to_json()]
    assert change.resource_version == kube.api.node(NODE)["metadata"]["resourceVersion"]
    assert (change.unschedulable_changed, change.taint_changed) == (True, True)


def test_uncordon_removes_only_our_taint_and_the_cordon_only_when_asked(kube):
    adapter = kube.adapter()
    adapter.cordon(EKS, NODE, TAINT)
    other_incident = incident_taint("sdc-ml-cluster-1-other")
    node = kube.api.nodes[NODE]
    node["spec"]["taints"].append({**other_incident.to_json(), "effect": "NoExecute"})

    adapter.uncordon(EKS, NODE, TAINT, clear_unschedulable=False)

    spec = kube.api.spec(NODE)
    assert spec["unschedulable"] is True
    assert spec["taints"] == [OTHERS, {**other_incident.to_json(), "effect": "NoExecute"}]


@pytest.mark.parametrize(("conflicts", "attempts"), [(1, 2), (3, 4)])
def test_a_conflict_rereads_the_node_and_patches_again(kube, conflicts, attempts):
    kube.api.conflict_next(conflicts)

    change = kube.adapter().cordon(EKS, NODE, TAINT)

    assert change.attempts == attempts
    assert [r.status for r in kube.api.patches()] == [409] * conflicts + [200]
    assert kube.api.spec(NODE)["taints"] == [OTHERS, TAINT.to_json()]


def test_a_taint_added_by_someone_else_between_read_and_patch_is_not_lost(kube):
    adapter = kube.adapter()
    theirs = {"key": "team/maintenance", "value": "x", "effect": "NoSchedule"}
    original = kube.api.handle

    def someone_writes_first(method, target, headers, body):
        if method == "PATCH" and not kube.api.patches():
            kube.api.nodes[NODE]["spec"]["taints"].append(theirs)
            kube.api.nodes[NODE]["metadata"]["resourceVersion"] = "9999"
        return original(method, target, headers, body)

    kube.api.handle = someone_writes_first  # type: ignore[method-assign]

    adapter.cordon(EKS, NODE, TAINT)

    assert kube.api.spec(NODE)["taints"] == [OTHERS, theirs, TAINT.to_json()]


def test_a_node_that_keeps_changing_ends_in_a_conflict_error(kube):
    kube.api.conflict_next(10)

    with pytest.raises(KubernetesConflict, match="409"):
        kube.adapter().cordon(EKS, NODE, TAINT)


def test_an_api_that_does_not_answer_is_reported_unreachable(eks_account):
    with pytest.raises(KubernetesUnreachable, match="did not answer"):
        Kube(KubeApi(EKS, REGION, {}), _closed_port_url()).adapter().find_node(EKS, INSTANCE)


def test_without_the_local_override_only_https_with_the_clusters_ca_is_used(eks_account):
    adapter = EksKubernetesNodes(client_factory("eks", SESSION), EksTokens(sts_factory(SESSION)))

    # moto's DescribeCluster gives an https endpoint whose CA data is no PEM certificate.
    with pytest.raises(KubernetesUnreachable, match="certificate authority"):
        adapter.find_node(EKS, INSTANCE)


# -- the isolation logic on the stand-in --------------------------------------------------------


def _world(adapter: EksKubernetesNodes) -> World:
    world = World(
        eks_cluster=EKS,
        settings=settings(node_isolation={CLUSTER: IsolationConfig(True, EKS)}),
    )
    world.kube = adapter  # type: ignore[assignment]
    return world


@pytest.mark.parametrize("admission", [False, True], ids=["rbac-only", "docs-admission-policy"])
def test_an_incident_isolates_its_node_once_and_a_reject_releases_exactly_that(kube, admission):
    if admission:
        _admit_as(kube.api, KUBERNETES_GROUP)
    world = _world(kube.adapter())
    incident_id = world.opened()
    ref = IncidentRef(incident_id)

    isolation.isolate_node(ref, world.deps)
    isolation.isolate_node(ref, world.deps)  # a retried step
    during = kube.api.spec(NODE)
    health_check.start_health_check(ref, world.deps)
    while health_check.check_health(ref, world.deps)["in_progress"]:
        pass
    world.workflow.waiting_tokens.add("token")
    approval.request_approval(ApprovalRequest(incident_id, "token"), world.deps)
    card = world.notifier.published[-1].message
    approval.decide(world.decision(incident_id, "reject"), world.deps)
    closing.close_incident(CloseRequest(incident_id, Outcome.REJECTED, None), world.deps)

    taint = incident_taint(incident_id)
    assert len(kube.api.patches()) == 2  # one cordon, one release
    assert during["unschedulable"] is True
    assert during["taints"] == [OTHERS, taint.to_json()]
    assert f"cordoned and tainted {taint} on node {NODE}" in card
    # Released: schedulable again, which the API server writes by leaving `unschedulable` out.
    assert kube.api.spec(NODE) == {"providerID": during["providerID"], "taints": [OTHERS]}
    actions = world.audit.actions(incident_id)
    assert "node_isolated" in actions and "node_released" in actions


def test_an_unreachable_api_leaves_the_incident_open_saying_not_isolated_and_the_card_warns(
    eks_account,
):
    world = _world(Kube(KubeApi(EKS, REGION, {}), _closed_port_url()).adapter())
    incident_id = world.opened()

    result = isolation.isolate_node(IncidentRef(incident_id), world.deps)

    incident = world.incident(incident_id)
    text = cards.approval_card(incident, world.settings).text
    assert result["isolated"] is False
    assert incident.isolation.cause == "unreachable"
    assert incident.state.value == "opened"
    assert "WARNING: the node is NOT isolated: " in text
    assert "did not answer" in text


# -- the admission policy of docs/deploy.md's RBAC manifest ------------------------------------

DENIED_BY = "ValidatingAdmissionPolicy 'sdc-remediation-node-{}'"
MERGE_PATCH = "application/merge-patch+json"


def _admit_as(api: KubeApi, group: str) -> None:
    """The cluster holds the docs' manifest; the functions' role is mapped to `group`."""
    (block,) = [b for b in blocks_of("yaml") if b.argument == "rbac"]
    api.admit_with(yaml.safe_load_all(block.text))
    api.groups = {key: (group,) for key in _caller()}


def _patch(api: KubeApi, body: dict) -> tuple[int, dict]:
    """A merge patch of NODE by the functions' role, straight to the stand-in."""
    token = EksTokens(sts_factory(SESSION)).token(EKS)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": MERGE_PATCH}
    answer = api.handle("PATCH", f"/api/v1/nodes/{NODE}", headers, json.dumps(body).encode())
    return answer.status, answer.body


def test_under_the_policy_the_isolation_group_cordons_taints_and_releases_through_the_adapter(
    kube,
):
    _admit_as(kube.api, KUBERNETES_GROUP)
    adapter = kube.adapter()
    before = kube.api.spec(NODE)

    adapter.cordon(EKS, NODE, TAINT)
    during = kube.api.spec(NODE)
    adapter.uncordon(EKS, NODE, TAINT, clear_unschedulable=True)

    assert during["taints"] == [OTHERS, TAINT.to_json()] and during["unschedulable"] is True
    assert kube.api.spec(NODE) == before
    assert {r.status for r in kube.api.patches()} == {200}


ISOLATION_GROUP_MAY_NOT = {
    "set-the-health-label": {"metadata": {"labels": {NODE_HEALTH_LABEL: PENDING_REPLACEMENT}}},
    "add-a-label": {"metadata": {"labels": {"team": "x"}}},
    "remove-a-label": {"metadata": {"labels": {"kubernetes.io/hostname": None}}},
    "add-an-annotation": {"metadata": {"annotations": {"team/owner": "x"}}},
    "add-an-owner": {
        "metadata": {
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": "1234"}
            ]
        }
    },
    "add-a-finalizer": {"metadata": {"finalizers": ["example.com/hold"]}},
    "remove-another-taint": {"spec": {"taints": [TAINT.to_json()]}},
    "change-another-taint": {"spec": {"taints": [{**OTHERS, "effect": "NoExecute"}]}},
    "add-another-taint": {
        "spec": {"taints": [OTHERS, {"key": "x", "value": "y", "effect": "NoSchedule"}]}
    },
    "evict-with-our-taint": {
        "spec": {"taints": [OTHERS, {**TAINT.to_json(), "effect": "NoExecute"}]}
    },
    "set-the-pod-cidr": {"spec": {"podCIDR": "10.0.0.0/24"}},
}


@pytest.mark.parametrize("body", ISOLATION_GROUP_MAY_NOT.values(), ids=ISOLATION_GROUP_MAY_NOT)
def test_the_isolation_group_may_change_nothing_of_a_node_but_the_cordon_and_its_taint(kube, body):
    _admit_as(kube.api, KUBERNETES_GROUP)
    before = kube.api.node(NODE)

    status, answer = _patch(kube.api, body)

    assert (status, answer["reason"], answer["code"]) == (422, "Invalid", 422)
    assert DENIED_BY.format("isolation") in answer["message"]
    assert kube.api.node(NODE) == before


def test_without_the_policy_the_isolation_group_could_set_the_health_label(kube):
    # What the finding was: `patch nodes` alone lets the group hand the node to HyperPod.
    status, _ = _patch(kube.api, ISOLATION_GROUP_MAY_NOT["set-the-health-label"])

    assert status == 200
    assert kube.api.node(NODE)["metadata"]["labels"][NODE_HEALTH_LABEL] == PENDING_REPLACEMENT


def test_the_isolation_groups_label_patch_through_the_adapter_is_refused(kube):
    _admit_as(kube.api, KUBERNETES_GROUP)

    with pytest.raises(KubernetesError, match=DENIED_BY.format("isolation")) as refused:
        kube.adapter().label(EKS, NODE, NODE_HEALTH_LABEL, PENDING_REPLACEMENT)

    assert refused.value.status == 422


@pytest.mark.parametrize("value", [PENDING_REBOOT, PENDING_REPLACEMENT])
def test_the_recovery_group_may_set_the_health_label_to_a_pending_value(kube, value):
    _admit_as(kube.api, RECOVERY_GROUP)

    kube.adapter().label(EKS, NODE, NODE_HEALTH_LABEL, value)

    assert kube.api.node(NODE)["metadata"]["labels"][NODE_HEALTH_LABEL] == value


RECOVERY_GROUP_MAY_NOT = {
    "set-the-health-label-schedulable": {
        "metadata": {"labels": {NODE_HEALTH_LABEL: "Schedulable"}}
    },
    "add-another-label": {"metadata": {"labels": {NODE_HEALTH_LABEL: PENDING_REBOOT, "team": "x"}}},
    "add-an-annotation": {"metadata": {"annotations": {"team/owner": "x"}}},
    "cordon": {"spec": {"unschedulable": True}},
    "taint": {"spec": {"taints": [OTHERS, TAINT.to_json()]}},
}


@pytest.mark.parametrize("body", RECOVERY_GROUP_MAY_NOT.values(), ids=RECOVERY_GROUP_MAY_NOT)
def test_the_recovery_group_may_change_nothing_but_the_health_label_to_a_pending_value(kube, body):
    _admit_as(kube.api, RECOVERY_GROUP)
    before = kube.api.node(NODE)

    status, answer = _patch(kube.api, body)

    assert (status, answer["reason"]) == (422, "Invalid")
    assert DENIED_BY.format("recovery") in answer["message"]
    assert kube.api.node(NODE) == before


def test_the_recovery_group_may_not_take_the_health_label_away(kube):
    kube.api.nodes[NODE]["metadata"]["labels"][NODE_HEALTH_LABEL] = PENDING_REBOOT
    _admit_as(kube.api, RECOVERY_GROUP)

    status, answer = _patch(kube.api, {"metadata": {"labels": {NODE_HEALTH_LABEL: None}}})

    assert status == 422
    assert DENIED_BY.format("recovery") in answer["message"]


def _caller() -> dict[str, str]:
    """The functions' credentials (moto's), as STS would know them."""
    credentials = SESSION.get_credentials()
    assert credentials is not None
    frozen = credentials.get_frozen_credentials()
    return {frozen.access_key: frozen.secret_key}


def _closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"
