"""A small stand-in for an EKS cluster's Kubernetes API, for tests and the local run.

It serves over plain http on 127.0.0.1 (only the local-only endpoint override of the
Kubernetes adapter may point there) what node isolation uses:

- `GET /api/v1/nodes` (with `limit` / `continue` paging), `GET /api/v1/nodes/<name>`;
- `PATCH /api/v1/nodes/<name>` with a JSON merge patch (RFC 7386); a patch that carries
  `metadata.resourceVersion` applies only to that version, else 409 Conflict, as the real
  API server does;
- authentication as EKS does it: a bearer `k8s-aws-v1.` token is a presigned STS
  GetCallerIdentity URL; the stand-in checks its shape, its age, that `x-k8s-aws-id` is among the
  signed headers, and the SigV4 signature recomputed with this cluster's name as that header and
  the secret of a trusted access key (what STS would do). Anything else: 401.

Faults for tests: `conflict_next(n)` (the next n patches answer 409), `forbid` (RBAC refuses
everything: 403).
"""

from __future__ import annotations

import itertools
import json
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from lambdas.adapters.eks_token import CLUSTER_HEADER, decode_token

TOKEN_LIFETIME = timedelta(minutes=15)


@dataclass
class Request:
    method: str
    path: str
    status: int
    body: Any = None


@dataclass
class KubeApi:
    """The cluster's state and the rules; `serve()` puts it on a port."""

    cluster_name: str
    region: str
    trusted: Mapping[str, str]
    """Access key id → secret access key: the callers STS would recognise."""
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    forbid: bool = False
    _conflicts: int = 0
    _versions: Iterator[int] = field(default_factory=lambda: itertools.count(100))
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
    ) -> None:
        spec: dict[str, Any] = {
            "providerID": provider_id
            or f"aws:///{zone}/sagemaker/cluster/hyperpod-{cluster_id}-{instance_id}"
        }
        if taints:
            spec["taints"] = list(taints)
        if unschedulable:
            spec["unschedulable"] = True
        self.nodes[name] = {
            "kind": "Node",
            "apiVersion": "v1",
            "metadata": {"name": name, "resourceVersion": str(next(self._versions))},
            "spec": spec,
        }

    def node(self, name: str) -> dict[str, Any]:
        return json.loads(json.dumps(self.nodes[name]))

    def spec(self, name: str) -> dict[str, Any]:
        return dict(self.node(name)["spec"])

    def conflict_next(self, times: int = 1) -> None:
        self._conflicts += times

    def patches(self) -> list[Request]:
        return [r for r in self.requests if r.method == "PATCH"]

    # -- the API ----------------------------------------------------------------------------

    def handle(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, Any]:
        with self._lock:
            parts = urllib.parse.urlsplit(target)
            status, answer, parsed = self._route(method, parts, headers, body)
            self.requests.append(Request(method, parts.path, status, parsed))
            return status, answer

    def _route(
        self, method: str, parts: urllib.parse.SplitResult, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, Any, Any]:
        refused = self.authenticate(headers.get("Authorization", ""))
        if refused:
            return 401, _status(401, "Unauthorized", refused), None
        if self.forbid:
            return 403, _status(403, "Forbidden", "nodes is forbidden for this user"), None
        path = parts.path
        if path == "/api/v1/nodes" and method == "GET":
            return 200, self._list(urllib.parse.parse_qs(parts.query)), None
        prefix = "/api/v1/nodes/"
        if not path.startswith(prefix) or "/" in path[len(prefix) :]:
            return 404, _status(404, "NotFound", f"no route {method} {path}"), None
        name = urllib.parse.unquote(path[len(prefix) :])
        if name not in self.nodes:
            return 404, _status(404, "NotFound", f'nodes "{name}" not found'), None
        if method == "GET":
            return 200, self.node(name), None
        if method != "PATCH":
            return 405, _status(405, "MethodNotAllowed", method), None
        if headers.get("Content-Type") != "application/merge-patch+json":
            return 415, _status(415, "UnsupportedMediaType", "merge patches only"), None
        try:
            patch = json.loads(body)
        except json.JSONDecodeError as err:
            return 400, _status(400, "BadRequest", str(err)), None
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        current = self.nodes[name]["metadata"]["resourceVersion"]
        if self._conflicts > 0 or (wanted is not None and wanted != current):
            self._conflicts = max(0, self._conflicts - 1)
            message = (
                f'Operation cannot be fulfilled on nodes "{name}": the object has been modified'
            )
            return 409, _status(409, "Conflict", message), patch
        merged = _merge(self.nodes[name], patch)
        keys = [(t.get("key"), t.get("effect")) for t in merged["spec"].get("taints") or []]
        if len(keys) != len(set(keys)):
            return 422, _status(422, "Invalid", "taints must be unique by key and effect"), patch
        merged["metadata"]["resourceVersion"] = str(next(self._versions))
        self.nodes[name] = merged
        return 200, self.node(name), patch

    def _list(self, query: Mapping[str, list[str]]) -> dict[str, Any]:
        names = sorted(self.nodes)
        start = int((query.get("continue") or ["0"])[0])
        limit = int((query.get("limit") or [str(len(names) or 1)])[0])
        page = names[start : start + limit]
        more = start + limit < len(names)
        return {
            "kind": "NodeList",
            "apiVersion": "v1",
            "metadata": {"continue": str(start + limit)} if more else {},
            "items": [self.node(n) for n in page],
        }

    # -- authentication ---------------------------------------------------------------------

    def authenticate(self, header: str) -> str | None:
        """None when the bearer token is a valid EKS token for this cluster, else why not."""
        if not header.startswith("Bearer "):
            return "no bearer token"
        try:
            url = decode_token(header[len("Bearer ") :])
        except ValueError as err:
            return str(err)
        parts = urllib.parse.urlsplit(url)
        pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        params = dict(pairs)
        expected_host = f"sts.{self.region}.amazonaws.com"
        if parts.scheme != "https" or parts.netloc != expected_host or parts.path not in ("", "/"):
            return f"not a presigned request to {expected_host}"
        if params.get("Action") != "GetCallerIdentity" or params.get("Version") != "2011-06-15":
            return "not a GetCallerIdentity request"
        if params.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" or "X-Amz-Signature" not in params:
            return "not SigV4-presigned"
        signed = params.get("X-Amz-SignedHeaders", "").split(";")
        if CLUSTER_HEADER not in signed:
            return f"{CLUSTER_HEADER} is not a signed header"
        try:
            signed_at = datetime.strptime(params["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(
                tzinfo=UTC
            )
            key, _, region, service, _ = params["X-Amz-Credential"].split("/")
        except (KeyError, ValueError):
            return "malformed X-Amz-Date or X-Amz-Credential"
        if datetime.now(UTC) - signed_at > TOKEN_LIFETIME:
            return "the token expired"
        secret = self.trusted.get(key)
        if secret is None:
            return f"unknown access key {key}"
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
            return f"the signature does not match a request for cluster {self.cluster_name}"
        return None

    # -- serving ----------------------------------------------------------------------------

    @contextmanager
    def serve(self) -> Iterator[str]:
        """Serve on 127.0.0.1 (a free port) until the block ends; yields the base URL."""
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, answer = api.handle(self.command, self.path, dict(self.headers), body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PATCH = do_PUT = do_POST = do_DELETE = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True, name="kube-api")
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (metadata.resourceVersion is a precondition, not a change)."""
    if not isinstance(patch, dict):
        return json.loads(json.dumps(patch))
    result = json.loads(json.dumps(target)) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result
