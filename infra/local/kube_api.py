"""A small stand-in for an EKS cluster's Kubernetes API, for tests and the local run: the part of
the API node isolation uses, answered the way a real API server answers it. The official
Kubernetes Python client drives it in tests/integration/test_kube_api_official_client.py.

It serves over plain http on 127.0.0.1 (only the local-only endpoint override of the Kubernetes
adapter may point there):

- `GET /api/v1/nodes`: a `NodeList` with the list's `metadata.resourceVersion`, its items
  without kind / apiVersion (as a real server sends list items); `limit` / `continue` paging with
  opaque continue tokens that resume after the last name served, and `remainingItemCount`;
  `labelSelector` and `fieldSelector` (`metadata.name`, `spec.unschedulable`). `watch` is not
  served (400 saying so). A page after the first reads the nodes as they are now, where a real
  server reads them as they were at the first page.
- `GET /api/v1/pods` (all namespaces): a `PodList` of the pods added with `add_pod` (metadata
  with name, namespace and labels; `spec.nodeName`), filtered by `labelSelector`, paged with
  `limit` / `continue` as nodes are.
- `GET /api/v1/nodes/<name>`: the `Node` (kind, apiVersion, metadata with uid, resourceVersion,
  creationTimestamp and labels, spec, status).
- `PATCH /api/v1/nodes/<name>` as JSON patch, JSON merge patch or strategic merge patch
  (`kube_patch`; the Node's rules in `kube_node`), with `dryRun=All` and `fieldValidation`. A
  patch that carries `metadata.resourceVersion` applies only to that version, else 409 Conflict;
  a patch that changes nothing keeps the resourceVersion; the node's status does not change
  through it; unknown fields are dropped with a `Warning` header. Server-side apply
  (`application/apply-patch+yaml`) is not served: 415 saying so; another content type: 415
  naming the accepted ones, as a real server does.
- errors as `Status` objects (kind, apiVersion, metadata, status, message, reason, details,
  code) with a real server's messages: 404 NotFound for a missing node and for paths not served
  (subresources such as `/status` among them), 409 Conflict, 422 Invalid, 400 BadRequest, 415;
  other methods (create, replace, delete) are not served: 405.
- authentication as EKS does it: a bearer `k8s-aws-v1.` token is a presigned STS
  GetCallerIdentity URL; the stand-in checks its shape, its age, that `x-k8s-aws-id` is among the
  signed headers, and the SigV4 signature recomputed with this cluster's name as that header and
  the secret of a trusted access key (what STS would do). Anything else: 401 with the message
  `Unauthorized` only, as a real server says it; why is kept in `requests`. The caller's access
  key is its user name.

Faults for tests: `conflict_next(n)` (the next n patches answer 409), `forbid` (RBAC refuses
everything: 403 naming the user, the verb and the resource).

Admission: `admit_with(documents)` applies a manifest's ValidatingAdmissionPolicies (bound with
`Deny`; `kube_admission`) to every patch, dry runs included, after the node's own validation; the
request's user is the caller's access key and its groups are `groups[access key]` (what an EKS
access entry maps a role to) and `system:authenticated`. A denial is the server's 422 `Invalid`.
"""

from __future__ import annotations

import base64
import copy
import json
import threading
import urllib.parse
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple

from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from sdc_remediation.infra.local import kube_admission, kube_node
from sdc_remediation.infra.local.kube_patch import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    PATCH_TYPES,
    STRATEGIC_MERGE_PATCH,
    StatusError,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
    bad_request,
    decode_body,
)
from sdc_remediation.infra.local.serving import serving
from sdc_remediation.lambdas.adapters.eks_token import CLUSTER_HEADER, decode_token

TOKEN_LIFETIME = timedelta(minutes=15)
NODES = "/api/v1/nodes"
PODS = "/api/v1/pods"
OPTIMISTIC_LOCK = (
    "the object has been modified; please apply your changes to the latest version and try again"
)
FIELD_VALIDATIONS = ("Ignore", "Warn", "Strict")


@dataclass
class Request:
    method: str
    path: str
    status: int
    body: Any = None
    content_type: str | None = None
    user: str | None = None
    """The access key the bearer token was signed with, once authenticated."""
    refused: str | None = None
    """Why the token was refused (a 401 does not tell the caller)."""


class Answer(NamedTuple):
    status: int
    body: Any
    warnings: tuple[str, ...] = ()


@dataclass
class KubeApi:
    """The cluster's state and the rules; `serve()` puts it on a port."""

    cluster_name: str
    region: str
    trusted: Mapping[str, str]
    """Access key id → secret access key: the callers STS would recognise."""
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    """`<namespace>/<name>` → Pod."""
    requests: list[Request] = field(default_factory=list)
    forbid: bool = False
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Access key → the Kubernetes groups its EKS access entry maps it to."""
    policies: list[kube_admission.Policy] = field(default_factory=list)
    _conflicts: int = 0
    _revision: int = 99
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add_node(
        self,
        name: str,
        instance_id: str,
        *,
        zone: str = "usw2-az2",
        cluster_id: str = "ab12cd34ef56",
        taints: list[dict[str, Any]] | None = None,
        unschedulable: bool = False,
        provider_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        node = {
            "kind": "Node",
            "apiVersion": "v1",
            "metadata": {
                "name": name,
                "uid": str(uuid.uuid4()),
                "resourceVersion": self._next_version(),
                "creationTimestamp": now,
                "labels": {"kubernetes.io/hostname": name, **(labels or {})},
            },
            "spec": {
                "providerID": provider_id
                or f"aws:///{zone}/sagemaker/cluster/hyperpod-{cluster_id}-{instance_id}",
                "taints": [dict(t) for t in taints or []],
                "unschedulable": unschedulable,
            },
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                    }
                ],
                "addresses": [{"type": "Hostname", "address": name}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            },
        }
        self.nodes[name] = kube_node.canonical(node)

    def node(self, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.nodes[name])

    def add_pod(
        self, name: str, node_name: str, labels: Mapping[str, str], *, namespace: str = "default"
    ) -> None:
        self.pods[f"{namespace}/{name}"] = {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": str(uuid.uuid4()),
                "resourceVersion": self._next_version(),
                "labels": dict(labels),
            },
            "spec": {"nodeName": node_name},
            "status": {"phase": "Running"},
        }

    def spec(self, name: str) -> dict[str, Any]:
        return dict(self.node(name)["spec"])

    def admit_with(self, documents: Iterable[Any]) -> None:
        """Apply the ValidatingAdmissionPolicies a manifest binds (other documents are skipped)."""
        self.policies.extend(kube_admission.policies(documents))

    def conflict_next(self, times: int = 1) -> None:
        self._conflicts += times

    def patches(self) -> list[Request]:
        return [r for r in self.requests if r.method == "PATCH"]

    def _next_version(self) -> str:
        self._revision += 1
        return str(self._revision)

    # -- the API ----------------------------------------------------------------------------

    def handle(self, method: str, target: str, headers: Mapping[str, str], body: bytes) -> Answer:
        with self._lock:
            parts = urllib.parse.urlsplit(target)
            request = Request(method, parts.path, 0)
            lowered = {key.lower(): value for key, value in headers.items()}
            try:
                answer = self._route(method, parts, lowered, body, request)
            except StatusError as err:
                answer = Answer(err.code, err.status())
            request.status = answer.status
            self.requests.append(request)
            return answer

    def _route(
        self,
        method: str,
        parts: urllib.parse.SplitResult,
        headers: Mapping[str, str],
        body: bytes,
        request: Request,
    ) -> Answer:
        request.user, request.refused = self.identify(headers.get("authorization", ""))
        if request.refused:
            raise StatusError(401, "Unauthorized", "Unauthorized")
        query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
        path = parts.path
        if path == PODS and method == "GET" and not _param(query, "watch"):
            if self.forbid:
                raise _forbidden(request.user or "", "list", "")
            return Answer(200, self._list_pods(query))
        name = urllib.parse.unquote(path[len(NODES) + 1 :]) if path.startswith(NODES + "/") else ""
        if path != NODES and (not name or "/" in name):
            raise StatusError(
                404, "NotFound", "the server could not find the requested resource", {}
            )
        verb = _verb(method, query, collection=not name)
        if self.forbid:
            raise _forbidden(request.user or "", verb, name)
        if verb == "list":
            return Answer(200, self._list(query))
        if verb == "get":
            if name not in self.nodes:
                raise _not_found(name)
            return Answer(200, self.node(name))
        if verb == "patch":
            return self._patch(name, query, headers, body, request)
        if verb == "watch":
            raise bad_request("the stand-in does not serve watch")
        raise StatusError(
            405,
            "MethodNotAllowed",
            f'{verb} is not supported by the stand-in on resources of kind "nodes"',
            {"kind": "nodes"},
        )

    def _list_pods(self, query: Mapping[str, list[str]]) -> dict[str, Any]:
        limit = _int_param(query, "limit")
        text = _param(query, "labelSelector")
        matches = kube_node.label_selector(text) if text else (lambda pod: True)
        keys = sorted(k for k in self.pods if matches(self.pods[k]))
        revision = self._revision
        token = _param(query, "continue")
        if token:
            start, revision = _decode_continue(token)
            keys = [k for k in keys if k >= start]
        page = keys[:limit] if limit > 0 else keys
        metadata: dict[str, Any] = {"resourceVersion": str(revision)}
        if len(page) < len(keys):
            metadata["continue"] = _encode_continue(page[-1] + "\x00", revision)
        items = [copy.deepcopy(self.pods[k]) for k in page]
        return {"kind": "PodList", "apiVersion": "v1", "metadata": metadata, "items": items}

    def _list(self, query: Mapping[str, list[str]]) -> dict[str, Any]:
        limit = _int_param(query, "limit")
        matchers = [
            make(text)
            for param, make in (
                ("labelSelector", kube_node.label_selector),
                ("fieldSelector", kube_node.field_selector),
            )
            if (text := _param(query, param))
        ]
        names = sorted(n for n in self.nodes if all(m(self.nodes[n]) for m in matchers))
        revision = self._revision
        token = _param(query, "continue")
        if token:
            start, revision = _decode_continue(token)
            names = [n for n in names if n >= start]
        page = names[:limit] if limit > 0 else names
        rest = len(names) - len(page)
        metadata: dict[str, Any] = {"resourceVersion": str(revision)}
        if rest:
            metadata["continue"] = _encode_continue(page[-1] + "\x00", revision)
            if not matchers:
                metadata["remainingItemCount"] = rest
        items = []
        for name in page:
            item = self.node(name)
            item.pop("kind"), item.pop("apiVersion")
            items.append(item)
        return {"kind": "NodeList", "apiVersion": "v1", "metadata": metadata, "items": items}

    def _patch(
        self,
        name: str,
        query: Mapping[str, list[str]],
        headers: Mapping[str, str],
        body: bytes,
        request: Request,
    ) -> Answer:
        content_type = (headers.get("content-type") or "").split(";")[0].strip()
        request.content_type = content_type
        if content_type not in PATCH_TYPES:
            accepted = ", ".join(PATCH_TYPES)
            raise StatusError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types "
                f"include: {accepted}",
            )
        if content_type == APPLY_PATCH:
            raise StatusError(
                415,
                "UnsupportedMediaType",
                "the stand-in does not serve server-side apply - accepted media types include: "
                + ", ".join(PATCH_TYPES[:3]),
            )
        dry_run, directive = _patch_options(query)
        if name not in self.nodes:
            raise _not_found(name)
        patch = decode_body(body)
        request.body = patch
        if self._conflicts > 0:
            self._conflicts -= 1
            raise _conflict(name)
        stored = self.nodes[name]
        if content_type == JSON_PATCH:
            patched = apply_json_patch(stored, patch)
        elif content_type == MERGE_PATCH:
            patched = apply_merge_patch(stored, patch)
        else:
            assert content_type == STRATEGIC_MERGE_PATCH
            patched = apply_strategic_merge_patch(stored, patch, kube_node.NODE_STRATEGY)
        node, warnings = kube_node.decode(patched, directive)
        kube_node.check_name(node, name)
        wanted = node["metadata"].get("resourceVersion")
        current = stored["metadata"]["resourceVersion"]
        if wanted and wanted != current:
            raise _conflict(name)
        node = kube_node.prepare_update(node, stored)
        node["metadata"]["resourceVersion"] = current
        kube_node.validate_update(node, stored)
        user = request.user or ""
        kube_admission.admit(
            self.policies,
            operation="UPDATE",
            resource="nodes",
            name=name,
            user=user,
            groups=(*self.groups.get(user, ()), "system:authenticated"),
            obj=node,
            old=stored,
        )
        if node != stored and not dry_run:
            node["metadata"]["resourceVersion"] = self._next_version()
            self.nodes[name] = node
        return Answer(200, copy.deepcopy(node), tuple(warnings))

    # -- authentication ---------------------------------------------------------------------

    def identify(self, header: str) -> tuple[str | None, str | None]:
        """(the access key that signed the bearer token, None) when it is a valid EKS token for
        this cluster, else (None, why not)."""
        if not header.startswith("Bearer "):
            return None, "no bearer token"
        try:
            url = decode_token(header[len("Bearer ") :])
        except ValueError as err:
            return None, str(err)
        parts = urllib.parse.urlsplit(url)
        pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        params = dict(pairs)
        expected_host = f"sts.{self.region}.amazonaws.com"
        if parts.scheme != "https" or parts.netloc != expected_host or parts.path not in ("", "/"):
            return None, f"not a presigned request to {expected_host}"
        if params.get("Action") != "GetCallerIdentity" or params.get("Version") != "2011-06-15":
            return None, "not a GetCallerIdentity request"
        if params.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" or "X-Amz-Signature" not in params:
            return None, "not SigV4-presigned"
        signed = params.get("X-Amz-SignedHeaders", "").split(";")
        if CLUSTER_HEADER not in signed:
            return None, f"{CLUSTER_HEADER} is not a signed header"
        try:
            signed_at = datetime.strptime(params["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(
                tzinfo=UTC
            )
            key, _, region, service, _ = params["X-Amz-Credential"].split("/")
        except (KeyError, ValueError):
            return None, "malformed X-Amz-Date or X-Amz-Credential"
        if datetime.now(UTC) - signed_at > TOKEN_LIFETIME:
            return None, "the token expired"
        secret = self.trusted.get(key)
        if secret is None:
            return None, f"unknown access key {key}"
        unsigned = "&".join(
            p for p in parts.query.split("&") if not p.startswith("X-Amz-Signature=")
        )
        request = AWSRequest(
            method="GET",
            url=urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/", unsigned, "")),
            headers={"host": parts.netloc, CLUSTER_HEADER: self.cluster_name},
        )
        request.context["timestamp"] = params["X-Amz-Date"]
        auth = SigV4QueryAuth(
            Credentials(key, secret, params.get("X-Amz-Security-Token")),
            service,
            region,
            expires=int(params.get("X-Amz-Expires", "60")),
        )
        canonical = auth.canonical_request(request)
        expected = auth.signature(auth.string_to_sign(request, canonical), request)
        if expected != params["X-Amz-Signature"]:
            return None, f"the signature does not match a request for cluster {self.cluster_name}"
        return key, None

    # -- serving ----------------------------------------------------------------------------

    @contextmanager
    def serve(self) -> Iterator[str]:
        """Serve on 127.0.0.1 (a free port) until the block ends; yields the base URL."""
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                answer = api.handle(self.command, self.path, dict(self.headers.items()), body)
                data = json.dumps(answer.body).encode()
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                for warning in answer.warnings:
                    self.send_header("Warning", '299 - "' + warning.replace('"', '\\"') + '"')
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PATCH = do_PUT = do_POST = do_DELETE = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler), "kube-api") as url:
            yield url


def _verb(method: str, query: Mapping[str, list[str]], *, collection: bool) -> str:
    """The RBAC verb of a request, as the API server names it."""
    if method == "GET":
        if _param(query, "watch") in ("true", "1"):
            return "watch"
        return "list" if collection else "get"
    verbs = {"PATCH": "patch", "PUT": "update", "POST": "create", "DELETE": "delete"}
    verb = verbs.get(method, method.lower())
    return "deletecollection" if collection and verb == "delete" else verb


def _param(query: Mapping[str, list[str]], name: str) -> str:
    return (query.get(name) or [""])[0]


def _int_param(query: Mapping[str, list[str]], name: str) -> int:
    text = _param(query, name)
    try:
        return int(text) if text else 0
    except ValueError:
        raise bad_request(f'strconv.ParseInt: parsing "{text}": invalid syntax') from None


def _patch_options(query: Mapping[str, list[str]]) -> tuple[bool, str]:
    """(dry run, field validation) from a patch's query; 422 on values a server refuses."""
    dry_run = query.get("dryRun") or []
    directive = _param(query, "fieldValidation") or "Warn"
    causes = []
    if any(value != "All" for value in dry_run):
        causes.append(("dryRun", f'Unsupported value: {dry_run}: supported values: "All"'))
    if directive not in FIELD_VALIDATIONS:
        supported = ", ".join(f'"{v}"' for v in FIELD_VALIDATIONS)
        causes.append(
            ("fieldValidation", f'Unsupported value: "{directive}": supported values: {supported}')
        )
    if causes:
        listed = ", ".join(f"{path}: {message}" for path, message in causes)
        raise StatusError(
            422,
            "Invalid",
            f'PatchOptions.meta.k8s.io "" is invalid: {listed}',
            {
                "group": "meta.k8s.io",
                "kind": "PatchOptions",
                "causes": [
                    {"reason": "FieldValueNotSupported", "message": message, "field": path}
                    for path, message in causes
                ],
            },
        )
    return bool(dry_run), directive


def _encode_continue(start: str, revision: int) -> str:
    token = json.dumps({"v": "meta.k8s.io/v1", "rv": revision, "start": start})
    return base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[str, int]:
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        start, revision = decoded["start"], int(decoded["rv"])
        if decoded.get("v") != "meta.k8s.io/v1" or not start or revision <= 0:
            raise ValueError("not a meta.k8s.io/v1 continue key")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as err:
        raise bad_request(f"invalid continue token: continue key is not valid: {err}") from None
    return str(start), revision


def _not_found(name: str) -> StatusError:
    return StatusError(
        404, "NotFound", f'nodes "{name}" not found', {"name": name, "kind": "nodes"}
    )


def _conflict(name: str) -> StatusError:
    return StatusError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on nodes "{name}": {OPTIMISTIC_LOCK}',
        {"name": name, "kind": "nodes"},
    )


def _forbidden(user: str, verb: str, name: str) -> StatusError:
    why = f'User "{user}" cannot {verb} resource "nodes" in API group "" at the cluster scope'
    if name:
        return StatusError(
            403, "Forbidden", f'nodes "{name}" is forbidden: {why}', {"name": name, "kind": "nodes"}
        )
    return StatusError(403, "Forbidden", f"nodes is forbidden: {why}", {"kind": "nodes"})
