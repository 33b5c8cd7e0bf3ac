"""Prometheus for tests and the local run: dcgm-exporter's series for a few GPUs, served by a
real Prometheus (Debian's `prometheus` package: the series are backfilled with `promtool tsdb
create-blocks-from openmetrics`) or, where none is installed, by a small stand-in.

    series = gpu_series(host="hyperpod-i-0bb00000000000002", gpu="1", uuid="GPU-…", start=t0, end=t1,
                        changes={"DCGM_FI_DEV_XID_ERRORS": [(t0 + 600, 79)]})
    with real_prometheus(series) as server:        # needs /usr/bin/prometheus and promtool
        server.base_url                              # http://127.0.0.1:<port>
    with StandIn(series).serve() as base_url: ...    # answers the queries the pipeline asks

The real server scrapes nothing (its configuration has no scrape job), so its head block stays
empty and the backfilled blocks, whatever their times, never overlap it.

The stand-in answers `/api/v1/query_range` for vector selectors joined by `or` (exactly what
`sdc_remediation.lambdas.logic.evidence.telemetry` asks), with Prometheus's five-minute lookback; anything else is a 400.
It can also refuse (403, as AMP refuses a role without aps:QueryMetrics), fail (500), answer
too slowly, or answer garbage; with `trusted` credentials it checks the SigV4 signature (service
`aps`) the way the workspace would, and refuses a bad one.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from sdc_remediation.infra.local.serving import serving
from sdc_remediation.lambdas.logic.evidence.dcgm import stored_name

DEFAULT_COUNTERS: Final[Mapping[str, float]] = {
    "DCGM_FI_DEV_GPU_TEMP": 61,
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0,
    "DCGM_FI_DEV_XID_ERRORS": 0,
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 0,
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 0,
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0,
}
"""The error and health fields of dcgm-exporter's shipped default-counters.csv (names up to
exporter 4.8), with a healthy GPU's values. ECC totals, retired pages, NVLink errors and clock
throttle reasons are commented out there: a cluster has them only if it enables them."""
MODEL: Final = "NVIDIA H100 80GB HBM3"
LOOKBACK_SECONDS: Final = 300
INSTALL_HINT: Final = (
    "Debian's prometheus package is not installed (no prometheus and promtool on PATH): run "
    "`make test` (it installs it), or `apt-get update && apt-get install -y prometheus` as root"
)


@dataclass(frozen=True)
class Series:
    name: str
    labels: Mapping[str, str]
    points: tuple[tuple[int, float], ...]
    """(epoch seconds, value), oldest first."""


def dcgm_labels(
    host: str,
    gpu: str,
    uuid: str,
    *,
    host_label: str = "Hostname",
    uuid_label: str = "UUID",
    model: str = MODEL,
) -> dict[str, str]:
    """The labels dcgm-exporter puts on a GPU's series (`host_label`: `Hostname` up to
    exporter 4.8.2, `hostname` since 4.8.3; `uuid_label`: `uuid` with `--use-old-namespace`)."""
    return {
        "gpu": gpu,
        uuid_label: uuid,
        "pci_bus_id": f"00000000:{0x10 + int(gpu):02X}:00.0",
        "device": f"nvidia{gpu}",
        "modelName": model,
        host_label: host,
    }


def collector_labels(exporter_pod: str, pod_ip: str) -> dict[str, str]:
    """The labels the HyperPod observability add-on's collector adds when it scrapes a
    dcgm-exporter pod (its Kubernetes service discovery): the exporter's own pod, not the node."""
    return {
        "job": "dcgm-exporter",
        "instance": f"{pod_ip}:9400",
        "pod": exporter_pod,
        "namespace": "hyperpod-observability",
        "container": "dcgm-exporter",
    }


def gpu_series(
    *,
    host: str,
    gpu: str,
    uuid: str,
    start: int,
    end: int,
    every: int = 15,
    host_label: str = "Hostname",
    uuid_label: str = "UUID",
    counters: Mapping[str, float] = DEFAULT_COUNTERS,
    changes: Mapping[str, Sequence[tuple[int, float]]] | None = None,
    collector: Mapping[str, str] | None = None,
) -> list[Series]:
    """One GPU's series, scraped every `every` seconds from `start` to `end` (epoch seconds):
    each counter at its value in `counters`, and from each (time, value) of `changes` on at that
    value. A name only in `changes` starts at 0.

    With `collector` (`collector_labels(...)`): as the HyperPod observability add-on stores
    them: those labels added, and each counter-type family under its name with `_total`."""
    changes = changes or {}
    labels = {**dcgm_labels(host, gpu, uuid, host_label=host_label, uuid_label=uuid_label)}
    labels.update(collector or {})
    found = []
    for name in dict.fromkeys([*counters, *changes]):
        steps = sorted(changes.get(name, ()))
        points = []
        for at in range(start, end + 1, every):
            value = counters.get(name, 0.0)
            for when, changed in steps:
                if when <= at:
                    value = changed
            points.append((at, float(value)))
        stored = stored_name(name) if collector is not None else name
        found.append(Series(stored, dict(labels), tuple(points)))
    return found


def openmetrics(series: Sequence[Series]) -> str:
    """The series as OpenMetrics text with explicit timestamps, one family after the other."""
    lines = []
    by_name: dict[str, list[Series]] = {}
    for one in series:
        by_name.setdefault(one.name, []).append(one)
    for name, members in by_name.items():
        lines.append(f"# TYPE {name} gauge")
        for member in members:
            labels = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(member.labels.items()))
            lines.extend(f"{name}{{{labels}}} {_value(v)} {at}" for at, v in member.points)
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


# -- the real one -------------------------------------------------------------------------------


def binaries() -> tuple[str, str] | None:
    """Paths of `prometheus` and `promtool`, or None when either is missing."""
    found = (shutil.which("prometheus"), shutil.which("promtool"))
    if found[0] and found[1]:
        return found[0], found[1]
    return None


@dataclass
class RealPrometheus:
    base_url: str
    version: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


class PrometheusNotInstalled(RuntimeError):
    pass


@contextmanager
def real_prometheus(
    series: Sequence[Series], *, ready_timeout: float = 30.0, rules: str | None = None
) -> Iterator[RealPrometheus]:
    """Backfill `series` into a fresh TSDB and serve it with Debian's Prometheus on 127.0.0.1
    (a free port) until the block ends. `rules`: a rule file (YAML) the server loads and
    evaluates every second (its alerts at `/api/v1/alerts`); without it nothing is evaluated."""
    found = binaries()
    if found is None:
        raise PrometheusNotInstalled(INSTALL_HINT)
    prometheus, promtool = found
    with tempfile.TemporaryDirectory(prefix="sdc-prometheus-") as scratch:
        root = Path(scratch)
        data = root / "data"
        source = root / "series.om"
        source.write_text(openmetrics(series))
        backfill = subprocess.run(
            [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if backfill.returncode != 0:
            raise RuntimeError(f"promtool could not backfill the series: {backfill.stderr[-2000:]}")
        config = root / "prometheus.yml"
        if rules is None:
            config.write_text("global:\n  evaluation_interval: 1h\n")
        else:
            (root / "rules.yml").write_text(rules)
            config.write_text(
                f"global:\n  evaluation_interval: 1s\nrule_files:\n  - {root / 'rules.yml'}\n"
            )
        port = _free_port()
        log = root / "prometheus.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [
                    prometheus,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={data}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--storage.tsdb.retention.time=30d",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        server = RealPrometheus(
            f"http://127.0.0.1:{port}", _version(prometheus), process, root / "prometheus.log"
        )
        try:
            _wait_ready(server, ready_timeout)
            yield server
        finally:
            server.stop()


def _wait_ready(server: RealPrometheus, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not server.running:
            raise RuntimeError(f"prometheus exited: {server.log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{server.base_url}/-/ready", timeout=1) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"prometheus was not ready within {timeout:g} s")


def _version(prometheus: str) -> str:
    try:
        out = subprocess.run(
            [prometheus, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    first = (out.stdout or out.stderr).splitlines()[:1]
    match = re.search(r"version (\S+)", first[0]) if first else None
    return match.group(1) if match else "unknown"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- the stand-in -------------------------------------------------------------------------------


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    form: dict[str, str]
    status: int


@dataclass
class StandIn:
    """A Prometheus HTTP API stand-in. `mode`: "serve" (answer from `series`), "forbid" (403),
    "fail" (500), "slow" (answer only after `delay` seconds), "garbage" (200, not JSON)."""

    series: Sequence[Series] = ()
    mode: str = "serve"
    delay: float = 30.0
    trusted: Mapping[str, str] = field(default_factory=dict)
    """Access key id → secret: when set, a request must carry a valid SigV4 signature by one
    of them for service `aps` and `region`."""
    region: str = "us-west-2"
    requests: list[Request] = field(default_factory=list)
    _stopping: threading.Event = field(default_factory=threading.Event)

    def handle(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, bytes]:
        parts = urllib.parse.urlsplit(target)
        form = dict(urllib.parse.parse_qsl(parts.query))
        if method == "POST":
            form.update(urllib.parse.parse_qsl(body.decode(errors="replace")))
        status, answer = self._route(method, parts.path, headers, body, form)
        self.requests.append(Request(method, parts.path, dict(headers), form, status))
        return status, answer

    def _route(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes,
        form: Mapping[str, str],
    ) -> tuple[int, bytes]:
        if self.trusted:
            refused = verify_sigv4(method, path, headers, body, self.trusted, self.region)
            if refused:
                return 403, _json({"message": f"The request signature is not valid: {refused}"})
        if self.mode == "forbid":
            return 403, _json(
                {
                    "message": "User: arn:aws:sts::111122223333:assumed-role/request-approval "
                    "is not authorized to perform: aps:QueryMetrics"
                }
            )
        if self.mode == "fail":
            return 500, _json({"message": "internal failure"})
        if self.mode == "slow":
            self._stopping.wait(self.delay)
        if self.mode == "garbage":
            return 200, b"<html>not prometheus</html>"
        if path.rstrip("/").endswith("/-/ready"):
            return 200, b"Prometheus Server is Ready.\n"
        if not path.endswith("/api/v1/query_range"):
            return 404, _json({"status": "error", "errorType": "not_found", "error": path})
        try:
            result = self.query_range(
                form["query"], float(form["start"]), float(form["end"]), _seconds(form["step"])
            )
        except (KeyError, ValueError) as err:
            return 400, _json({"status": "error", "errorType": "bad_data", "error": str(err)})
        return 200, _json({"status": "success", "data": {"resultType": "matrix", "result": result}})

    def query_range(
        self, query: str, start: float, end: float, step: float
    ) -> list[dict[str, Any]]:
        selectors = parse_selectors(query)
        result = []
        for one in self.series:
            labels = {"__name__": one.name, **one.labels}
            if not any(all(m.matches(labels) for m in selector) for selector in selectors):
                continue
            values = []
            at = start
            while at <= end + 1e-9:
                seen = [v for t, v in one.points if at - LOOKBACK_SECONDS < t <= at]
                if seen:
                    values.append([_stamp(at), _value(seen[-1])])
                at += step
            if values:
                result.append({"metric": labels, "values": values})
        return result

    @contextmanager
    def serve(self) -> Iterator[str]:
        """Serve on 127.0.0.1 (a free port) until the block ends; yields the base URL."""
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, data = stand_in.handle(self.command, self.path, dict(self.headers), body)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (a slow answer): nothing to do
                    pass

            do_GET = do_POST = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        with serving(server, "prometheus") as url:
            try:
                yield url
            finally:
                self._stopping.set()


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str
    value: str

    def matches(self, labels: Mapping[str, str]) -> bool:
        actual = labels.get(self.label, "")
        if self.op == "=":
            return actual == self.value
        if self.op == "!=":
            return actual != self.value
        found = re.fullmatch(self.value, actual) is not None
        return found if self.op == "=~" else not found


_SELECTOR: Final = re.compile(r"\{([^{}]*)\}")
_MATCHER: Final = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*')


def parse_selectors(query: str) -> list[list[Matcher]]:
    """`{a="x", b=~"y"} or {…}` → one list of matchers per selector; ValueError otherwise."""
    selectors = []
    rest = query.strip()
    while True:
        found = _SELECTOR.match(rest)
        if not found:
            raise ValueError(f"the stand-in answers only vector selectors joined by or: {query!r}")
        matchers = []
        for part in _split_matchers(found.group(1)):
            matcher = _MATCHER.fullmatch(part)
            if not matcher:
                raise ValueError(f"not a label matcher: {part!r}")
            label, op, raw = matcher.groups()
            matchers.append(Matcher(label, op, _unquote(raw)))
        selectors.append(matchers)
        rest = rest[found.end() :].strip()
        if not rest:
            return selectors
        if not rest.startswith("or "):
            raise ValueError(f"the stand-in answers only vector selectors joined by or: {query!r}")
        rest = rest[3:].strip()


def _split_matchers(text: str) -> list[str]:
    """Split on the commas between matchers (not those inside quoted values)."""
    parts: list[str] = []
    current: list[str] = []
    quoted = escaped = False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    if "".join(current).strip():
        parts.append("".join(current))
    return parts


def verify_sigv4(
    method: str,
    path: str,
    headers: Mapping[str, str],
    body: bytes,
    trusted: Mapping[str, str],
    region: str,
) -> str | None:
    """None when `Authorization` is a valid SigV4 signature for service `aps` in `region` by a
    trusted key over this very request, else why not."""
    lower = {k.lower(): v for k, v in headers.items()}
    match = re.fullmatch(
        r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
        r"SignedHeaders=([^,]+), Signature=([0-9a-f]{64})",
        lower.get("authorization", ""),
    )
    if not match:
        return "no SigV4 Authorization header"
    key, _, scope_region, service, signed, signature = match.groups()
    if service != "aps" or scope_region != region:
        return f"signed for {service} in {scope_region}, not aps in {region}"
    secret = trusted.get(key)
    if secret is None:
        return f"unknown access key {key}"
    names = signed.split(";")
    request = AWSRequest(
        method=method,
        url=f"http://{lower.get('host', '')}{path}",
        data=body,
        headers={name: lower[name] for name in names if name in lower and name != "host"},
    )
    request.context["timestamp"] = lower.get("x-amz-date", "")
    auth = SigV4Auth(
        Credentials(key, secret, lower.get("x-amz-security-token")), "aps", scope_region
    )
    expected = auth.signature(
        auth.string_to_sign(request, auth.canonical_request(request)), request
    )
    return None if expected == signature else "the signature does not match the request"


def _unquote(raw: str) -> str:
    return re.sub(r"\\(.)", r"\1", raw)


def _seconds(step: str) -> float:
    return float(step[:-1]) if step.endswith("s") else float(step)


def _stamp(at: float) -> float | int:
    return int(at) if float(at).is_integer() else round(at, 3)


def _value(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()
