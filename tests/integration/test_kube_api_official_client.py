"""The Kubernetes API stand-in (`sdc_remediation.infra.local.kube_api`) driven by the official Kubernetes Python
client, which nobody here wrote: what it sends is what kubectl-era clients send (a dict body is a
strategic merge patch, a list a JSON patch), and its models refuse any field the API does not
have. So the stand-in is checked against the Kubernetes API, not against our idea of it.

The client authenticates with the token the Lambda's own adapter sends, made the same way
(`EksTokens` on the functions' credentials, in moto), and every call the adapter makes is read
back through the official client:

- `find_node`: `GET /api/v1/nodes?limit=…[&continue=…]`, matched by providerID;
- `get_node`: `GET /api/v1/nodes/<name>`;
- `cordon` / `uncordon`: `GET` the node, then `PATCH` it with a JSON merge patch of
  `spec.unschedulable` / `spec.taints` conditional on `metadata.resourceVersion`.

The adapter never imports the official client; only these tests do (a dev dependency).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sdc_remediation.infra.local.kube_api import KubeApi
from sdc_remediation.infra.local.kube_patch import JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH
from sdc_remediation.lambdas.adapters import kubernetes as kubernetes_adapter
from sdc_remediation.lambdas.adapters._aws import client_factory
from sdc_remediation.lambdas.adapters.eks_token import EksTokens, sts_factory
from sdc_remediation.lambdas.adapters.kubernetes import EksKubernetesNodes
from sdc_remediation.lambdas.models.kubernetes import (
    KubeNode,
    incident_taint,
    instance_of_provider_id,
)
from tests.conftest import REPO
from tests.integration.conftest import REGION, SESSION
from tests.unit.world import EKS, INSTANCE, NODE

OTHERS = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
TAINT = incident_taint("sdc-ml-cluster-1-i-0abc1234def567890-20261130T081504")
REJECTED = "the server rejected our request due to an error in our request"


@dataclass
class Cluster:
    api: KubeApi
    url: str
    tokens: EksTokens
    core: client.CoreV1Api
    """The official client, sending the adapter's EKS token."""

    def adapter(self) -> EksKubernetesNodes:
        return EksKubernetesNodes(
            client_factory("eks", SESSION), self.tokens, endpoint_overrides={EKS: self.url}
        )

    def client_with(self, token: str | None) -> client.CoreV1Api:
        """The official client sending `token` as its bearer token (none at all: None)."""
        configuration = client.Configuration(host=self.url)
        if token is not None:
            configuration.api_key = {"BearerToken": token}
            configuration.api_key_prefix = {"BearerToken": "Bearer"}
        return client.CoreV1Api(client.ApiClient(configuration))

    def status(self, refused: ApiException) -> client.V1Status:
        """The `Status` object of an error answer, read with the official client's model."""
        status = self.core.api_client.deserialize(refused.body, "V1Status", "application/json")
        assert isinstance(status, client.V1Status)
        assert (status.kind, status.api_version, status.status) == ("Status", "v1", "Failure")
        assert status.code == refused.status
        return status

    def refusal(self, call: Callable[[], Any]) -> tuple[int, client.V1Status]:
        with pytest.raises(ApiException) as refused:
            call()
        return refused.value.status, self.status(refused.value)


@pytest.fixture
def cluster(eks_account: None) -> Iterator[Cluster]:
    api = KubeApi(EKS, REGION, {_access_key(): _secret_key()})
    api.add_node(NODE, INSTANCE, taints=[OTHERS])
    api.add_node(f"hyperpod-{INSTANCE}", "i-0fff0000000000001")
    api.add_node("ip-10-1-99-1.us-west-2.compute.internal", INSTANCE + "1")
    tokens = EksTokens(sts_factory(SESSION))
    with api.serve() as url:
        configuration = client.Configuration(host=url)
        configuration.api_key = {"BearerToken": tokens.token(EKS)}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
        configuration.refresh_api_key_hook = lambda c: c.api_key.update(
            BearerToken=tokens.token(EKS)
        )
        with client.ApiClient(configuration) as api_client:
            yield Cluster(api, url, tokens, client.CoreV1Api(api_client))


# -- reading nodes ------------------------------------------------------------------------------


def test_the_official_client_lists_the_nodes_as_a_node_list_at_the_latest_resource_version(
    cluster,
):
    nodes = cluster.core.list_node()

    assert isinstance(nodes, client.V1NodeList)
    assert [n.metadata.name for n in nodes.items] == sorted(cluster.api.nodes)
    latest = max(int(n["metadata"]["resourceVersion"]) for n in cluster.api.nodes.values())
    assert nodes.metadata.resource_version == str(latest)
    assert nodes.metadata.var_continue is None


def test_the_official_client_pages_through_the_nodes_with_limit_and_continue(cluster):
    for n in range(5):
        cluster.api.add_node(f"zz-{n}", f"i-0ee000000000000{n}")

    pages = _pages(cluster.core, limit=3)

    assert [n.metadata.name for p in pages for n in p.items] == sorted(cluster.api.nodes)
    assert [len(p.items) for p in pages] == [3, 3, 2]
    assert [p.metadata.remaining_item_count for p in pages] == [5, 2, None]
    assert len({p.metadata.resource_version for p in pages}) == 1


def test_a_continue_token_the_server_never_gave_is_a_400_bad_request(cluster):
    code, status = cluster.refusal(lambda: cluster.core.list_node(limit=1, _continue="page-2"))

    assert (code, status.reason) == (400, "BadRequest")
    assert "continue key is not valid" in status.message


def test_the_official_client_finds_the_node_by_provider_id_as_the_adapter_does(cluster):
    nodes = [n for page in _pages(cluster.core, limit=1) for n in page.items]

    found = [
        n.metadata.name for n in nodes if instance_of_provider_id(n.spec.provider_id) == INSTANCE
    ]

    assert found == [NODE] == [cluster.adapter().find_node(EKS, INSTANCE).name]


def test_the_official_client_reads_a_node_with_its_metadata_spec_and_status(cluster):
    node = cluster.core.read_node(NODE)

    assert isinstance(node, client.V1Node)
    assert (node.kind, node.api_version) == ("Node", "v1")
    assert node.metadata.uid
    assert node.metadata.resource_version == cluster.api.nodes[NODE]["metadata"]["resourceVersion"]
    assert isinstance(node.metadata.creation_timestamp, datetime)
    assert node.metadata.labels == {"kubernetes.io/hostname": NODE}
    assert node.spec.provider_id.endswith(f"-{INSTANCE}")
    assert _taints(node) == [OTHERS]
    assert node.spec.unschedulable is None
    assert [(c.type, c.status) for c in node.status.conditions] == [("Ready", "True")]


def test_a_label_selector_lists_only_the_nodes_it_selects(cluster):
    cluster.api.add_node("gpu-a", "i-0ee0000000000001", labels={"sdc.remediation/pool": "a"})
    cluster.api.add_node("gpu-b", "i-0ee0000000000002", labels={"sdc.remediation/pool": "b"})
    unlabelled = sorted(set(cluster.api.nodes) - {"gpu-a", "gpu-b"})

    def names(selector: str) -> list[str]:
        return [n.metadata.name for n in cluster.core.list_node(label_selector=selector).items]

    assert names("sdc.remediation/pool=a") == ["gpu-a"]
    assert names("sdc.remediation/pool in (a, b)") == ["gpu-a", "gpu-b"]
    assert names("sdc.remediation/pool!=a") == sorted([*unlabelled, "gpu-b"])
    assert names("!sdc.remediation/pool") == unlabelled


def test_a_field_selector_on_spec_unschedulable_lists_only_the_cordoned_nodes(cluster):
    cluster.adapter().cordon(EKS, NODE, TAINT)

    cordoned = cluster.core.list_node(field_selector="spec.unschedulable=true")

    assert [n.metadata.name for n in cordoned.items] == [NODE]


def test_a_field_selector_on_a_field_nodes_are_not_selected_by_is_a_400_bad_request(cluster):
    code, status = cluster.refusal(lambda: cluster.core.list_node(field_selector="spec.podCIDR=x"))

    assert (code, status.reason, status.message) == (
        400,
        "BadRequest",
        "field label not supported: spec.podCIDR",
    )


# -- every call of the adapter, read back with the official client -------------------------------


def test_the_official_client_sends_the_eks_token_the_adapter_sends(cluster):
    seen = _authorization_headers(cluster.api)

    cluster.adapter().get_node(EKS, NODE)
    cluster.core.read_node(NODE)

    assert len(seen) == 2 and len(set(seen)) == 1
    assert seen[0].startswith("Bearer k8s-aws-v1.")
    assert [(r.status, r.user) for r in cluster.api.requests] == [(200, _access_key())] * 2


def test_the_adapter_reads_the_node_the_official_client_reads(cluster):
    adapter = cluster.adapter()

    found, got = adapter.find_node(EKS, INSTANCE), adapter.get_node(EKS, NODE)

    official = cluster.core.read_node(NODE)
    assert found == got == _as_adapter_sees_it(official)


def test_the_adapter_pages_with_the_continue_tokens_the_official_client_gets(cluster, monkeypatch):
    monkeypatch.setattr(kubernetes_adapter, "LIST_PAGE", 1)
    official_pages = _pages(cluster.core, limit=1)
    cluster.api.requests.clear()

    found = cluster.adapter().find_node(EKS, INSTANCE)

    lists = [r for r in cluster.api.requests if r.path == "/api/v1/nodes"]
    names = [n.metadata.name for p in official_pages for n in p.items]
    assert found.name == NODE
    assert len(lists) == names.index(NODE) + 1  # one page per node up to ours
    assert all(r.status == 200 for r in lists)


def test_after_the_adapters_cordon_the_official_client_reads_our_taint_added_and_the_others_kept(
    cluster,
):
    before = cluster.core.read_node(NODE)

    change = cluster.adapter().cordon(EKS, NODE, TAINT)

    after = cluster.core.read_node(NODE)
    assert after.spec.unschedulable is True
    assert _taints(after) == [OTHERS, TAINT.to_json()]
    assert after.metadata.labels == before.metadata.labels
    assert after.metadata.resource_version == change.resource_version
    assert change.resource_version != before.metadata.resource_version


def test_the_adapters_cordon_is_a_merge_patch_conditional_on_the_version_the_client_read(cluster):
    before = cluster.core.read_node(NODE)

    cluster.adapter().cordon(EKS, NODE, TAINT)

    (patch,) = cluster.api.patches()
    assert patch.content_type == MERGE_PATCH
    assert patch.body["metadata"] == {"resourceVersion": before.metadata.resource_version}


def test_after_the_adapters_uncordon_the_official_client_reads_the_node_released(cluster):
    adapter = cluster.adapter()
    adapter.cordon(EKS, NODE, TAINT)

    adapter.uncordon(EKS, NODE, TAINT, clear_unschedulable=True)

    after = cluster.core.read_node(NODE)
    assert after.spec.unschedulable is None  # false: left out of the JSON, as the server does
    assert _taints(after) == [OTHERS]


def test_an_uncordon_that_keeps_the_cordon_leaves_the_official_client_reading_it_cordoned(cluster):
    adapter = cluster.adapter()
    adapter.cordon(EKS, NODE, TAINT)

    adapter.uncordon(EKS, NODE, TAINT, clear_unschedulable=False)

    after = cluster.core.read_node(NODE)
    assert after.spec.unschedulable is True
    assert _taints(after) == [OTHERS]


def test_the_adapter_sees_a_cordon_and_taint_the_official_client_wrote_and_adds_nothing(cluster):
    cluster.core.patch_node(
        NODE, {"spec": {"unschedulable": True, "taints": [OTHERS, TAINT.to_json()]}}
    )

    change = cluster.adapter().cordon(EKS, NODE, TAINT)

    assert (change.unschedulable_changed, change.taint_changed) == (False, False)
    assert [r.method for r in cluster.api.requests[-1:]] == ["GET"]


# -- what the official client writes is applied as a real API server applies it ------------------


def test_a_dict_body_goes_as_a_strategic_merge_patch_and_cordons_as_kubectl_cordon_does(cluster):
    node = cluster.core.patch_node(NODE, {"spec": {"unschedulable": True}})

    (patch,) = cluster.api.patches()
    assert patch.content_type == STRATEGIC_MERGE_PATCH
    assert node.spec.unschedulable is True
    assert _taints(node) == [OTHERS]
    assert cluster.core.read_node(NODE).spec.unschedulable is True


def test_a_strategic_merge_patch_with_null_uncordons_as_kubectl_uncordon_does(cluster):
    cluster.core.patch_node(NODE, {"spec": {"unschedulable": True}})

    node = cluster.core.patch_node(NODE, {"spec": {"unschedulable": None}})

    assert node.spec.unschedulable is None
    assert "unschedulable" not in cluster.api.spec(NODE)


def test_a_strategic_merge_patch_replaces_the_taints_list_whole_not_merged_by_key(cluster):
    node = cluster.core.patch_node(NODE, {"spec": {"taints": [TAINT.to_json()]}})

    assert _taints(node) == [TAINT.to_json()]


def test_a_strategic_merge_patch_merges_labels_key_by_key_and_null_deletes_one(cluster):
    cluster.core.patch_node(NODE, {"metadata": {"labels": {"sdc/a": "1", "sdc/b": "2"}}})

    node = cluster.core.patch_node(NODE, {"metadata": {"labels": {"sdc/b": None, "sdc/c": "3"}}})

    assert node.metadata.labels == {"kubernetes.io/hostname": NODE, "sdc/a": "1", "sdc/c": "3"}


def test_a_strategic_merge_patch_replace_directive_replaces_the_labels_whole(cluster):
    node = cluster.core.patch_node(
        NODE, {"metadata": {"labels": {"$patch": "replace", "sdc/only": "this"}}}
    )

    assert node.metadata.labels == {"sdc/only": "this"}


def test_a_strategic_merge_patch_merges_finalizers_as_a_set_and_deletes_by_directive(cluster):
    cluster.core.patch_node(NODE, {"metadata": {"finalizers": ["sdc.remediation/a"]}})
    merged = cluster.core.patch_node(
        NODE, {"metadata": {"finalizers": ["sdc.remediation/a", "sdc.remediation/b"]}}
    )

    node = cluster.core.patch_node(
        NODE, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["sdc.remediation/a"]}}
    )

    assert merged.metadata.finalizers == ["sdc.remediation/a", "sdc.remediation/b"]
    assert node.metadata.finalizers == ["sdc.remediation/b"]


def test_a_list_body_goes_as_a_json_patch_that_appends_a_taint_and_cordons(cluster):
    node = cluster.core.patch_node(
        NODE,
        [
            {"op": "add", "path": "/spec/taints/-", "value": TAINT.to_json()},
            {"op": "add", "path": "/spec/unschedulable", "value": True},
        ],
    )

    (patch,) = cluster.api.patches()
    assert patch.content_type == JSON_PATCH
    assert _taints(node) == [OTHERS, TAINT.to_json()]
    assert node.spec.unschedulable is True


def test_a_json_patch_labels_a_node_with_the_slash_of_the_key_escaped_as_tilde_one(cluster):
    node = cluster.core.patch_node(
        NODE, [{"op": "add", "path": "/metadata/labels/sdc.remediation~1state", "value": "suspect"}]
    )

    assert node.metadata.labels["sdc.remediation/state"] == "suspect"


def test_a_json_patch_whose_tests_hold_applies_its_replace_and_remove(cluster):
    node = cluster.core.patch_node(
        NODE,
        [
            {"op": "test", "path": "/spec/taints/0/key", "value": OTHERS["key"]},
            {"op": "test", "path": "/spec/unschedulable", "value": None},
            {"op": "replace", "path": "/metadata/labels/kubernetes.io~1hostname", "value": "n1"},
            {"op": "remove", "path": "/spec/taints/0"},
        ],
    )

    assert node.spec.taints is None
    assert node.metadata.labels == {"kubernetes.io/hostname": "n1"}


def test_a_json_patch_whose_test_fails_is_refused_with_422_and_changes_nothing(cluster):
    before = cluster.api.node(NODE)
    operations = [
        {"op": "add", "path": "/spec/unschedulable", "value": True},
        {"op": "test", "path": "/spec/taints/0/value", "value": "absent"},
    ]

    code, status = cluster.refusal(lambda: cluster.core.patch_node(NODE, operations))

    assert (code, status.reason, status.message) == (422, "Invalid", REJECTED)
    assert cluster.api.node(NODE) == before


def test_a_json_patch_removing_a_label_the_node_does_not_have_is_refused_with_422(cluster):
    operations = [{"op": "remove", "path": "/metadata/labels/sdc~1absent"}]

    code, status = cluster.refusal(lambda: cluster.core.patch_node(NODE, operations))

    assert (code, status.reason, status.message) == (422, "Invalid", REJECTED)


def test_a_merge_patch_replaces_the_taints_and_null_deletes_a_label(cluster):
    cluster.core.patch_node(NODE, {"metadata": {"labels": {"sdc/a": "1"}}})

    node = cluster.core.patch_node(
        NODE,
        {"metadata": {"labels": {"sdc/a": None}}, "spec": {"taints": [TAINT.to_json()]}},
        _content_type=MERGE_PATCH,
    )

    assert cluster.api.patches()[-1].content_type == MERGE_PATCH
    assert _taints(node) == [TAINT.to_json()]
    assert node.metadata.labels == {"kubernetes.io/hostname": NODE}


def test_a_patch_of_a_media_type_the_server_does_not_take_is_a_415_naming_those_it_takes(cluster):
    code, status = cluster.refusal(
        lambda: cluster.core.patch_node(
            NODE, {"spec": {"unschedulable": True}}, _content_type="application/json"
        )
    )

    assert (code, status.reason) == (415, "UnsupportedMediaType")
    assert status.message == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, "
        "application/strategic-merge-patch+json, application/apply-patch+yaml"
    )


def test_a_patch_of_a_node_that_does_not_exist_is_a_404_not_found_status(cluster):
    code, status = cluster.refusal(
        lambda: cluster.core.patch_node("ip-10-9-9-9", {"spec": {"unschedulable": True}})
    )

    assert (code, status.reason, status.message) == (
        404,
        "NotFound",
        'nodes "ip-10-9-9-9" not found',
    )
    assert (status.details.name, status.details.kind) == ("ip-10-9-9-9", "nodes")


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        (
            STRATEGIC_MERGE_PATCH,
            lambda rv: {"metadata": {"resourceVersion": rv}, "spec": {"unschedulable": True}},
        ),
        (MERGE_PATCH, lambda rv: {"metadata": {"resourceVersion": rv}, "spec": {"taints": []}}),
        (
            JSON_PATCH,
            lambda rv: [
                {"op": "replace", "path": "/metadata/resourceVersion", "value": rv},
                {"op": "add", "path": "/spec/unschedulable", "value": True},
            ],
        ),
    ],
    ids=["strategic-merge", "merge", "json-patch"],
)
def test_a_patch_carrying_a_stale_resource_version_is_a_409_conflict_and_changes_nothing(
    cluster, content_type, body
):
    stale = cluster.core.read_node(NODE).metadata.resource_version
    cluster.core.patch_node(NODE, {"metadata": {"labels": {"sdc/meanwhile": "x"}}})
    meanwhile = cluster.api.node(NODE)

    code, status = cluster.refusal(
        lambda: cluster.core.patch_node(NODE, body(stale), _content_type=content_type)
    )

    assert (code, status.reason) == (409, "Conflict")
    assert status.message == (
        f'Operation cannot be fulfilled on nodes "{NODE}": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert cluster.api.node(NODE) == meanwhile


def test_a_taint_with_an_effect_kubernetes_does_not_have_is_refused_as_invalid(cluster):
    bogus = {"key": "sdc.remediation/x", "effect": "Sometimes"}

    code, status = cluster.refusal(
        lambda: cluster.core.patch_node(
            NODE, [{"op": "add", "path": "/spec/taints/-", "value": bogus}]
        )
    )

    assert (code, status.reason) == (422, "Invalid")
    assert [(c.var_field, c.reason) for c in status.details.causes] == [
        ("spec.taints[1].effect", "FieldValueNotSupported")
    ]


def test_a_second_taint_of_the_same_key_and_effect_is_refused_as_invalid(cluster):
    twin = {**OTHERS, "value": "another"}

    code, status = cluster.refusal(
        lambda: cluster.core.patch_node(NODE, {"spec": {"taints": [OTHERS, twin]}})
    )

    assert (code, status.reason) == (422, "Invalid")
    assert status.message.startswith(f'Node "{NODE}" is invalid: spec.taints[1]: Duplicate value')
    assert [(c.var_field, c.reason) for c in status.details.causes] == [
        ("spec.taints[1]", "FieldValueDuplicate")
    ]


def test_a_value_of_the_wrong_type_is_refused_as_invalid(cluster):
    code, status = cluster.refusal(
        lambda: cluster.core.patch_node(NODE, {"spec": {"unschedulable": "yes"}})
    )

    assert (code, status.reason) == (422, "Invalid")
    assert (
        "cannot unmarshal string into Go struct field NodeSpec.spec.unschedulable" in status.message
    )


def test_a_patch_that_renames_the_node_is_a_400_bad_request(cluster):
    code, status = cluster.refusal(
        lambda: cluster.core.patch_node(NODE, {"metadata": {"name": "ip-10-9-9-9"}})
    )

    assert (code, status.reason) == (400, "BadRequest")
    assert status.message == (
        f"the name of the object (ip-10-9-9-9) does not match the name on the URL ({NODE})"
    )


def test_a_dry_run_patch_answers_the_patched_node_and_stores_nothing(cluster):
    before = cluster.api.node(NODE)

    node = cluster.core.patch_node(NODE, {"spec": {"unschedulable": True}}, dry_run="All")

    assert node.spec.unschedulable is True
    assert cluster.api.node(NODE) == before


def test_a_patch_that_changes_nothing_keeps_the_resource_version(cluster):
    before = cluster.core.read_node(NODE).metadata.resource_version

    node = cluster.core.patch_node(NODE, {"spec": {"taints": [OTHERS], "unschedulable": False}})

    assert node.metadata.resource_version == before


def test_the_status_of_a_node_does_not_change_through_a_patch_of_the_node(cluster):
    not_ready = {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}

    cluster.core.patch_node(NODE, not_ready)

    conditions = cluster.core.read_node(NODE).status.conditions
    assert [(c.type, c.status) for c in conditions] == [("Ready", "True")]


def test_a_field_the_node_does_not_have_is_dropped_with_a_warning(cluster):
    node, _, headers = cluster.core.patch_node_with_http_info(
        NODE, {"spec": {"unschedulable": True, "suspect": True}}
    )

    assert headers["Warning"] == '299 - "unknown field \\"spec.suspect\\""'
    assert node.spec.unschedulable is True
    assert "suspect" not in cluster.api.spec(NODE)


def test_with_strict_field_validation_a_field_the_node_does_not_have_is_refused(cluster):
    code, status = cluster.refusal(
        lambda: cluster.core.patch_node(
            NODE, {"spec": {"suspect": True}}, field_validation="Strict"
        )
    )

    assert (code, status.reason) == (422, "Invalid")
    assert 'strict decoding error: unknown field "spec.suspect"' in status.message


# -- authentication and authorization ------------------------------------------------------------


@pytest.mark.parametrize(
    "token",
    [None, "k8s-aws-v1.aHR0cHM6Ly9leGFtcGxlLmNvbS8", "eyJhbGciOiJSUzI1NiJ9.e30.c2ln"],
    ids=["no-token", "not-a-presigned-sts-url", "not-an-eks-token"],
)
def test_a_request_without_a_valid_eks_token_is_a_401_status_that_says_no_more(cluster, token):
    stranger = cluster.client_with(token)

    code, status = cluster.refusal(lambda: stranger.list_node())

    assert (code, status.reason, status.message) == (401, "Unauthorized", "Unauthorized")
    assert cluster.api.requests[-1].refused  # why is kept for the test, not told to the caller


def test_an_rbac_refusal_is_a_403_status_naming_the_user_the_verb_and_the_resource(cluster):
    cluster.api.forbid = True

    code, status = cluster.refusal(
        lambda: cluster.core.patch_node(NODE, {"spec": {"unschedulable": True}})
    )

    assert (code, status.reason) == (403, "Forbidden")
    assert status.message == (
        f'nodes "{NODE}" is forbidden: User "{_access_key()}" cannot patch resource "nodes" '
        'in API group "" at the cluster scope'
    )
    assert (status.details.name, status.details.kind) == (NODE, "nodes")


# -- the Lambda's own client ---------------------------------------------------------------------


def test_the_lambda_code_never_imports_the_official_client():
    imported = {
        (path.relative_to(REPO).as_posix(), name)
        for path in sorted((REPO / "lambdas").rglob("*.py"))
        for name in _absolute_imports(path)
        if name == "kubernetes" or name.startswith("kubernetes.")
    }

    assert imported == set()


# -- helpers --------------------------------------------------------------------------------------


def _absolute_imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


def _pages(core: client.CoreV1Api, *, limit: int) -> list[client.V1NodeList]:
    pages = [core.list_node(limit=limit)]
    while pages[-1].metadata.var_continue:
        pages.append(core.list_node(limit=limit, _continue=pages[-1].metadata.var_continue))
    return pages


def _taints(node: client.V1Node) -> list[dict[str, str]]:
    return [
        {k: v for k, v in (("key", t.key), ("value", t.value), ("effect", t.effect)) if v}
        for t in node.spec.taints or []
    ]


def _as_adapter_sees_it(node: client.V1Node) -> KubeNode:
    return KubeNode(
        name=node.metadata.name,
        provider_id=node.spec.provider_id,
        unschedulable=bool(node.spec.unschedulable),
        taints=tuple(_taints(node)),
        resource_version=node.metadata.resource_version,
        labels=tuple((node.metadata.labels or {}).items()),
    )


def _authorization_headers(api: KubeApi) -> list[str]:
    """Records the Authorization header of every request the stand-in gets from now on."""
    seen: list[str] = []
    handle = api.handle

    def recording(method: str, target: str, headers: Any, body: bytes) -> Any:
        seen.extend(v for k, v in headers.items() if k.lower() == "authorization")
        return handle(method, target, headers, body)

    api.handle = recording  # type: ignore[method-assign]
    return seen


def _access_key() -> str:
    credentials = SESSION.get_credentials()
    assert credentials is not None
    return credentials.get_frozen_credentials().access_key


def _secret_key() -> str:
    credentials = SESSION.get_credentials()
    assert credentials is not None
    return credentials.get_frozen_credentials().secret_key
