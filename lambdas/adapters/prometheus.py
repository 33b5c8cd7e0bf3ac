"""The Prometheus HTTP API of an Amazon Managed Service for Prometheus workspace, over plain HTTPS
(no client library): one SigV4-signed `POST /api/v1/query_range` (service `aps`), bounded in
total time, every failure mapped to a TelemetryError.

The bound is hard: the query runs on a daemon thread the caller waits for at most `timeout`
seconds (connect, TLS, DNS, a server that trickles its answer: whatever is slow, the approval
request never waits longer). The socket's own timeout is the same, so an abandoned query ends
soon after.

`endpoint_overrides` is for local runs and tests only: it points a workspace (by id) at another
base URL (plain http allowed there, nowhere else). The functions' own adapter never sets it.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

from sdc_remediation.lambdas.models.errors import (
    TelemetryBadAnswer,
    TelemetryError,
    TelemetryRefused,
    TelemetrySlow,
    TelemetryUnreachable,
)
from sdc_remediation.lambdas.models.settings import TelemetryWorkspace

SERVICE: Final = "aps"
QUERY_RANGE: Final = "/api/v1/query_range"
TIMEOUT_SECONDS: Final = 5.0
MAX_ANSWER_BYTES: Final = 16 * 1024 * 1024
CHUNK: Final = 64 * 1024
QUERY_HINT: Final = "the function's role needs aps:QueryMetrics on the workspace (sdc:telemetry)"

CredentialsSource = Callable[[], Any]
"""Returns botocore credentials (or None when there are none), e.g. `session.get_credentials`."""


class AmpPrometheus:
    """The `PrometheusQueries` port for Amazon Managed Service for Prometheus workspaces."""

    def __init__(
        self,
        credentials: CredentialsSource,
        *,
        timeout: float = TIMEOUT_SECONDS,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        endpoint_overrides: Mapping[str, str] | None = None,
    ) -> None:
        self._credentials = credentials
        self._timeout = timeout
        self._max_bytes = max_answer_bytes
        self._overrides = dict(endpoint_overrides or {})

    @property
    def timeout(self) -> float:
        return self._timeout

    def query_range(
        self,
        workspace: TelemetryWorkspace,
        query: str,
        start: datetime,
        end: datetime,
        step_seconds: int,
    ) -> Mapping[str, Any]:
        form = {
            "query": query,
            "start": f"{start.timestamp():.3f}",
            "end": f"{end.timestamp():.3f}",
            "step": f"{int(step_seconds)}s",
        }
        deadline = time.monotonic() + self._timeout
        outcome: list[tuple[bool, Any]] = []

        def run() -> None:
            try:
                outcome.append((True, self._query(workspace, form, deadline)))
            except BaseException as err:  # handed to the waiting caller below
                outcome.append((False, err))

        worker = threading.Thread(target=run, name="prometheus-query", daemon=True)
        worker.start()
        worker.join(self._timeout)
        if not outcome:
            raise TelemetrySlow(
                f"workspace {workspace.workspace_id} did not answer within {self._timeout:g} s"
            )
        ok, value = outcome[0]
        if not ok:
            raise value
        return value

    # -- one request, on the worker thread --------------------------------------------------

    def _query(
        self, workspace: TelemetryWorkspace, form: Mapping[str, str], deadline: float
    ) -> Mapping[str, Any]:
        url = self._url(workspace)
        body = urllib.parse.urlencode(form).encode()
        headers = self._signed_headers(workspace, url, body)
        parts = urllib.parse.urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        where = f"workspace {workspace.workspace_id} at {parts.hostname}"
        connection: http.client.HTTPConnection | None = None
        try:
            connection = self._connection(parts, max(deadline - time.monotonic(), 0.001))
            connection.request("POST", target, body=body, headers=headers)
            response = connection.getresponse()
            status = response.status
            raw = self._read(response, deadline, where)
        except TelemetryError:
            raise
        except TimeoutError as err:
            raise TelemetrySlow(
                f"{where} did not answer within {self._timeout:g} s ({err})"
            ) from err
        except (OSError, http.client.HTTPException) as err:
            raise TelemetryUnreachable(
                f"{where} could not be reached: {type(err).__name__}: {err}"
            ) from err
        finally:
            if connection is not None:
                connection.close()
        return _check(where, status, raw)

    def _url(self, workspace: TelemetryWorkspace) -> str:
        override = self._overrides.get(workspace.workspace_id)
        base = (override or workspace.query_url).rstrip("/")
        scheme = urllib.parse.urlsplit(base).scheme
        if scheme != "https" and not (override and scheme == "http"):
            raise TelemetryBadAnswer(
                f"workspace {workspace.workspace_id}'s query URL {base!r} is not an https URL"
            )
        return base + QUERY_RANGE

    def _signed_headers(
        self, workspace: TelemetryWorkspace, url: str, body: bytes
    ) -> dict[str, str]:
        try:
            credentials = self._credentials()
        except Exception as err:  # a broken credential chain: nothing was sent
            raise TelemetryRefused(
                f"no AWS credentials to sign the query to workspace {workspace.workspace_id}: "
                f"{type(err).__name__}: {err}"
            ) from err
        if credentials is None:
            raise TelemetryRefused(
                f"no AWS credentials to sign the query to workspace {workspace.workspace_id}"
            )
        request = AWSRequest(
            method="POST",
            url=url,
            data=body,
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
            },
        )
        SigV4Auth(credentials, SERVICE, workspace.region).add_auth(request)
        return {key: str(value) for key, value in request.headers.items()}

    def _connection(
        self, parts: urllib.parse.SplitResult, timeout: float
    ) -> http.client.HTTPConnection:
        host = parts.hostname or ""
        if parts.scheme == "http":
            return http.client.HTTPConnection(host, parts.port or 80, timeout=timeout)
        return http.client.HTTPSConnection(host, parts.port or 443, timeout=timeout)

    def _read(self, response: http.client.HTTPResponse, deadline: float, where: str) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            if time.monotonic() > deadline:
                raise TelemetrySlow(f"{where} did not finish its answer within {self._timeout:g} s")
            chunk = response.read(CHUNK)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > self._max_bytes:
                raise TelemetryBadAnswer(
                    f"{where} answered with more than {self._max_bytes} bytes", status=200
                )
            chunks.append(chunk)


def _check(where: str, status: int, raw: bytes) -> Mapping[str, Any]:
    """The answer's `data`, or the TelemetryError that says what went wrong."""
    try:
        answer: Any = json.loads(raw) if raw else {}
    except (json.JSONDecodeError, UnicodeDecodeError):
        answer = {"message": raw[:300].decode(errors="replace")}
    if not isinstance(answer, dict):
        answer = {"message": str(answer)[:300]}
    said = answer.get("error") or answer.get("message") or answer.get("Message")
    detail = f"{status}" + (f": {str(said)[:300]}" if said else "")
    if status in (401, 403):
        raise TelemetryRefused(f"{where} refused the query ({detail}); {QUERY_HINT}", status=status)
    if status == 404:
        raise TelemetryRefused(f"{where} has no such workspace ({detail})", status=status)
    if status == 429 or status >= 500:
        raise TelemetryUnreachable(f"{where} failed on its side ({detail})", status=status)
    if status != 200 or answer.get("status") != "success":
        kind = answer.get("errorType")
        raise TelemetryBadAnswer(
            f"{where} did not run the query ({detail}" + (f", {kind}" if kind else "") + ")",
            status=status,
        )
    data = answer.get("data")
    if not isinstance(data, dict):
        raise TelemetryBadAnswer(f"{where} answered without a data object", status=status)
    return data


if TYPE_CHECKING:
    from sdc_remediation.lambdas.logic.ports import PrometheusQueries

    _port: PrometheusQueries = AmpPrometheus(lambda: None)
