"""The Kubernetes adapter against the local stand-in of an EKS cluster's API, on moto's EKS:
EKS tokens, nodes found by providerID, conditional patches, and the isolation logic on top."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from infra.local.kube_api import KubeApi
from lambdas.adapters import kubernetes
from lambdas.adapters._aws import client_factory
from lambdas.adapters.eks_token import EksTokens, sts_factory
from lambdas.adapters.kubernetes import EksKubernetesNodes
from lambdas.logic import approval, closing, health_check, isolation
from lambdas.models.errors import (
    KubernetesConflict,
    KubernetesNotFound,
    KubernetesUnauthorized,
    KubernetesUnreachable,
)
from lambdas.models.kubernetes import incident_taint
from lambdas.models.payloads import ApprovalRequest, CloseRequest, IncidentRef, Outcome
from lambdas.models.settings import IsolationConfig
from lambdas.wording import cards
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


def test_an_incident_isolates_its_node_once_and_a_reject_releases_exactly_that(kube):
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
