"""The Kubernetes API of a HyperPod EKS cluster, over plain HTTPS (no client library): list and
read nodes, cordon and taint one, undo that; list the nodes a job's pods run on.

The endpoint and its CA come from eks:DescribeCluster; TLS verifies the server against that CA
only. The bearer token is EKS's presigned STS request (`eks_token`). Patches are JSON merge
patches carrying the node's resourceVersion, so the API server applies them only to the node
as it was read (the taints list is replaced whole): a 409 Conflict re-reads the node and tries
again, and another writer's taints are never lost.

`endpoint_overrides` is for local runs and tests only: it points a cluster at another base URL
(plain http allowed there, nowhere else). The functions' own adapters never set it.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from sdc_remediation.lambdas.adapters._aws import ClientFactory, LazyClient, error_code
from sdc_remediation.lambdas.adapters.eks_token import EksTokens
from sdc_remediation.lambdas.models.errors import (
    KubernetesConflict,
    KubernetesError,
    KubernetesNotFound,
    KubernetesUnauthorized,
    KubernetesUnreachable,
)
from sdc_remediation.lambdas.models.kubernetes import KubeNode, NodeChange, Taint, is_workload_pod

TIMEOUT_SECONDS = 5.0
PATCH_ATTEMPTS = 4
LIST_PAGE = 500
MERGE_PATCH = "application/merge-patch+json"
RBAC_HINT = (
    "the function's role needs an EKS access entry on this cluster mapped to the Kubernetes "
    "group sdc-remediation (sdc-remediation-recovery for the functions that set HyperPod's node "
    "health label), and that group a ClusterRole allowing get, list and patch on nodes "
    "(or, for the functions that check report claims, the group sdc-remediation-readers with "
    "get and list on nodes, and on pods with sdc:jobPods) (docs/deploy.md, 'Node isolation')"
)


_Plan = tuple[dict[str, Any], bool, bool, str | None]
"""A node change to make: (merge-patch spec, sets or clears unschedulable, adds or removes the
taint, the value of another incident's taint found in the slot)."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    scheme: str
    host: str
    port: int
    base_path: str
    ca_pem: str | None


class EksKubernetesNodes:
    """The `KubernetesNodes` port for EKS clusters."""

    def __init__(
        self,
        eks_factory: ClientFactory,
        tokens: EksTokens,
        *,
        timeout: float = TIMEOUT_SECONDS,
        patch_attempts: int = PATCH_ATTEMPTS,
        endpoint_overrides: Mapping[str, str] | None = None,
    ) -> None:
        self._eks = LazyClient(eks_factory)
        self._tokens = tokens
        self._timeout = timeout
        self._patch_attempts = patch_attempts
        self._overrides = dict(endpoint_overrides or {})
        self._endpoints: dict[str, Endpoint] = {}

    # -- the port -------------------------------------------------------------------------

    def find_node(self, eks_cluster: str, instance_id: str) -> KubeNode:
        found = self._first_node(eks_cluster, lambda node: node.instance_id == instance_id)
        if found is None:
            raise KubernetesNotFound(
                f"no node of EKS cluster {eks_cluster} has a providerID naming {instance_id}",
                status=404,
            )
        return found

    def find_node_named(self, eks_cluster: str, name: str) -> KubeNode:
        found = self._first_node(eks_cluster, lambda node: node.name == name)
        if found is None:
            raise KubernetesNotFound(
                f"EKS cluster {eks_cluster} has no node called {name}", status=404
            )
        return found

    def _first_node(self, eks_cluster: str, wanted: Callable[[KubeNode], bool]) -> KubeNode | None:
        """Every page of `GET /api/v1/nodes` until a node is `wanted`."""
        return next((node for node in self._nodes(eks_cluster) if wanted(node)), None)

    def list_nodes(self, eks_cluster: str) -> list[KubeNode]:
        return list(self._nodes(eks_cluster))

    def _nodes(self, eks_cluster: str) -> Iterator[KubeNode]:
        """The nodes of `GET /api/v1/nodes`, a page at a time (read only as far as needed)."""
        cursor: str | None = None
        while True:
            query = {"limit": str(LIST_PAGE), **({"continue": cursor} if cursor else {})}
            page = self._call(eks_cluster, "GET", "/api/v1/nodes", query=query)
            for raw in page.get("items") or []:
                yield KubeNode.from_json(raw)
            cursor = (page.get("metadata") or {}).get("continue") or None
            if not cursor:
                return

    def pod_nodes(self, eks_cluster: str, label_selector: str) -> set[str]:
        """Every page of `GET /api/v1/pods?labelSelector=…` (all namespaces): the nodes the
        matching pods are scheduled on."""
        return {node for node, _ in self._pods(eks_cluster, {"labelSelector": label_selector})}

    def workload_nodes(self, eks_cluster: str) -> set[str]:
        """Every page of `GET /api/v1/pods` (all namespaces): the nodes a workload pod is
        scheduled on (`is_workload_pod`)."""
        return {node for node, raw in self._pods(eks_cluster, {}) if is_workload_pod(raw)}

    def _pods(
        self, eks_cluster: str, query: Mapping[str, str]
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(node name, pod) of each pod scheduled on a node, a page at a time."""
        cursor: str | None = None
        while True:
            page = self._call(
                eks_cluster,
                "GET",
                "/api/v1/pods",
                query={
                    **query,
                    "limit": str(LIST_PAGE),
                    **({"continue": cursor} if cursor else {}),
                },
            )
            for raw in page.get("items") or []:
                node = (raw.get("spec") or {}).get("nodeName")
                if isinstance(node, str) and node:
                    yield node, raw
            cursor = (page.get("metadata") or {}).get("continue") or None
            if not cursor:
                return

    def get_node(self, eks_cluster: str, node_name: str) -> KubeNode:
        return KubeNode.from_json(self._call(eks_cluster, "GET", _node_path(node_name)))

    def cordon(self, eks_cluster: str, node_name: str, taint: Taint) -> NodeChange:
        def plan(node: KubeNode) -> _Plan:
            occupant = next((t for t in node.taints if taint.same_slot(t)), None)
            found = None if occupant is None or taint.matches(occupant) else occupant.get("value")
            spec: dict[str, Any] = {}
            if not node.unschedulable:
                spec["unschedulable"] = True
            if occupant is None:
                spec["taints"] = [*node.taints, taint.to_json()]
            return spec, not node.unschedulable, occupant is None, found

        return self._change(eks_cluster, node_name, plan)

    def uncordon(
        self, eks_cluster: str, node_name: str, taint: Taint, *, clear_unschedulable: bool
    ) -> NodeChange:
        def plan(node: KubeNode) -> _Plan:
            kept = [t for t in node.taints if not taint.matches(t)]
            clear = clear_unschedulable and node.unschedulable
            spec: dict[str, Any] = {}
            if clear:
                spec["unschedulable"] = False
            if len(kept) != len(node.taints):
                spec["taints"] = kept
            return spec, clear, "taints" in spec, None

        return self._change(eks_cluster, node_name, plan)

    def label(self, eks_cluster: str, node_name: str, key: str, value: str) -> str:
        """A merge patch of `metadata.labels` (labels merge key by key: the others stay)."""
        body = {"metadata": {"labels": {key: value}}}
        answer = self._call(
            eks_cluster, "PATCH", _node_path(node_name), body=body, content_type=MERGE_PATCH
        )
        return KubeNode.from_json(answer).resource_version

    def _change(
        self, eks_cluster: str, node_name: str, plan: Callable[[KubeNode], _Plan]
    ) -> NodeChange:
        """Read the node, `plan` the merge patch against what it holds now, patch it with that
        resourceVersion; a 409 (the node changed meanwhile) reads and plans again, bounded."""
        for attempt in range(1, self._patch_attempts + 1):
            node = self.get_node(eks_cluster, node_name)
            spec, unschedulable, tainted, found = plan(node)
            if not spec:
                return NodeChange(node.name, node.resource_version, False, False, found, attempt)
            patched = self._patch(eks_cluster, node, spec)
            if patched is not None:
                return NodeChange(
                    node.name, patched.resource_version, unschedulable, tainted, found, attempt
                )
        raise self._conflict(eks_cluster, node_name)

    # -- HTTP -----------------------------------------------------------------------------

    def _patch(self, eks_cluster: str, node: KubeNode, spec: dict[str, Any]) -> KubeNode | None:
        """The patched node, or None on 409 Conflict (the node changed since it was read)."""
        body = {"metadata": {"resourceVersion": node.resource_version}, "spec": spec}
        try:
            answer = self._call(
                eks_cluster, "PATCH", _node_path(node.name), body=body, content_type=MERGE_PATCH
            )
        except KubernetesConflict:
            return None
        return KubeNode.from_json(answer)

    def _conflict(self, eks_cluster: str, node_name: str) -> KubernetesConflict:
        return KubernetesConflict(
            f"node {node_name} of EKS cluster {eks_cluster} changed during each of "
            f"{self._patch_attempts} attempts (409 Conflict)",
            status=409,
        )

    def _call(
        self,
        eks_cluster: str,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        endpoint = self._endpoint(eks_cluster)
        target = endpoint.base_path + path
        if query:
            target += "?" + urllib.parse.urlencode(query)
        payload = json.dumps(body).encode() if body is not None else None
        for fresh_token in (False, True):
            if fresh_token:
                self._tokens.forget(eks_cluster)
            status, answer = self._send(
                endpoint, method, target, payload, content_type, eks_cluster
            )
            if status != 401:
                break
        return self._check(eks_cluster, method, path, status, answer)

    def _send(
        self,
        endpoint: Endpoint,
        method: str,
        target: str,
        payload: bytes | None,
        content_type: str,
        eks_cluster: str,
    ) -> tuple[int, Any]:
        try:
            token = self._tokens.token(eks_cluster)
        except Exception as err:  # no credentials, a bad region: nothing reached the cluster
            raise KubernetesUnauthorized(
                f"could not make a token for EKS cluster {eks_cluster}: {type(err).__name__}: {err}"
            ) from err
        headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json",
        }
        if payload is not None:
            headers["Content-Type"] = content_type
        connection: http.client.HTTPConnection | None = None
        try:
            connection = self._connection(endpoint)
            connection.request(method, target, body=payload, headers=headers)
            response = connection.getresponse()
            raw = response.read()
            status = response.status
        except (OSError, http.client.HTTPException) as err:
            raise KubernetesUnreachable(
                f"the Kubernetes API of EKS cluster {eks_cluster} at {endpoint.host}:"
                f"{endpoint.port} did not answer {method} {target}: {type(err).__name__}: {err}"
            ) from err
        finally:
            if connection is not None:
                connection.close()
        try:
            return status, json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            return status, {"message": raw[:500].decode(errors="replace")}

    def _connection(self, endpoint: Endpoint) -> http.client.HTTPConnection:
        if endpoint.scheme == "http":
            return http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=self._timeout)
        context = ssl.create_default_context(cadata=endpoint.ca_pem)
        return http.client.HTTPSConnection(
            endpoint.host, endpoint.port, timeout=self._timeout, context=context
        )

    def _check(
        self, eks_cluster: str, method: str, path: str, status: int, answer: Any
    ) -> dict[str, Any]:
        if 200 <= status < 300 and isinstance(answer, dict):
            return answer
        message = answer.get("message") if isinstance(answer, dict) else None
        said = f"{method} {path} on EKS cluster {eks_cluster}: {status}" + (
            f" ({message})" if message else ""
        )
        if status in (401, 403):
            kind = "token refused" if status == 401 else "forbidden by RBAC"
            raise KubernetesUnauthorized(f"{said}: {kind}; {RBAC_HINT}", status=status)
        if status == 404:
            raise KubernetesNotFound(said, status=status)
        if status == 409:
            raise KubernetesConflict(said, status=status)
        if status >= 500:
            raise KubernetesUnreachable(said, status=status)
        raise KubernetesError(said, status=status)

    def _endpoint(self, eks_cluster: str) -> Endpoint:
        known = self._endpoints.get(eks_cluster)
        if known is not None:
            return known
        url, ca_data = self._describe(eks_cluster)
        override = self._overrides.get(eks_cluster)
        parts = urllib.parse.urlsplit(override or url)
        if parts.scheme != "https" and not (override and parts.scheme == "http"):
            raise KubernetesUnreachable(
                f"EKS cluster {eks_cluster}'s endpoint {url!r} is not an https URL"
            )
        ca_pem = _pem(eks_cluster, ca_data) if parts.scheme == "https" else None
        endpoint = Endpoint(
            scheme=parts.scheme,
            host=parts.hostname or "",
            port=parts.port or (443 if parts.scheme == "https" else 80),
            base_path=parts.path.rstrip("/"),
            ca_pem=ca_pem,
        )
        self._endpoints[eks_cluster] = endpoint
        return endpoint

    def _describe(self, eks_cluster: str) -> tuple[str, str | None]:
        try:
            cluster = self._eks.get().describe_cluster(name=eks_cluster)["cluster"]
        except ClientError as err:
            code = error_code(err)
            if code == "ResourceNotFoundException":
                raise KubernetesNotFound(f"no EKS cluster {eks_cluster}: {err}") from err
            if code in ("AccessDeniedException", "UnauthorizedOperation"):
                raise KubernetesUnauthorized(
                    f"eks:DescribeCluster on {eks_cluster} was denied: {err}; the function's "
                    "role needs it on the cluster the deployment isolates nodes of"
                ) from err
            raise KubernetesUnreachable(f"eks:DescribeCluster {eks_cluster} failed: {err}") from err
        except BotoCoreError as err:
            raise KubernetesUnreachable(f"eks:DescribeCluster {eks_cluster} failed: {err}") from err
        ca_data = (cluster.get("certificateAuthority") or {}).get("data")
        return str(cluster.get("endpoint") or ""), ca_data or None


def _pem(eks_cluster: str, ca_data: str | None) -> str:
    """DescribeCluster's certificateAuthority.data (base64 of PEM) as PEM text."""
    if not ca_data:
        raise KubernetesUnreachable(
            f"EKS cluster {eks_cluster} has no certificate authority data to verify TLS with"
        )
    try:
        pem = base64.b64decode(ca_data, validate=True).decode()
    except (ValueError, UnicodeDecodeError) as err:
        raise KubernetesUnreachable(
            f"EKS cluster {eks_cluster}'s certificate authority data is not base64 PEM: {err}"
        ) from err
    if "-----BEGIN CERTIFICATE-----" not in pem:
        raise KubernetesUnreachable(
            f"EKS cluster {eks_cluster}'s certificate authority data holds no PEM certificate"
        )
    return pem


def _node_path(node_name: str) -> str:
    return "/api/v1/nodes/" + urllib.parse.quote(node_name, safe="")


if TYPE_CHECKING:
    from sdc_remediation.lambdas.logic.ports import KubernetesNodes

    _port: KubernetesNodes = EksKubernetesNodes(lambda: None, EksTokens(lambda: None))
