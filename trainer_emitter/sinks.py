"""Where a report goes: CloudWatch + EventBridge, CloudWatch embedded metric format on stdout,
or memory (for users' own tests). A sink raises `DeliveryError` when a part did not arrive; the
emitter decides what to spool."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import IO, Any, Protocol

from trainer_emitter.contract import DIMENSIONS, REPORT_DETAIL_TYPE, REPORT_SOURCE
from trainer_emitter.mapping import Datapoint

MAX_DATUMS_PER_CALL = 500  # PutMetricData takes 1000 datums and 1 MB; 500 stays well inside both.
MAX_EVENT_BYTES = 256 * 1024


class DeliveryError(Exception):
    """A part of a report (metrics or event) was not delivered."""


class SinkName(StrEnum):
    """The sinks a setting may name (`sink=` or `SDC_SINK`)."""

    AWS = "aws"
    EMF = "emf"
    MEMORY = "memory"


class Sink(Protocol):
    def put_metrics(self, namespace: str, datapoints: Sequence[Datapoint]) -> None: ...

    def put_event(self, detail: dict[str, Any]) -> None: ...


SINK_METHODS = ("put_metrics", "put_event")
"""What an object passed as `sink=` must have: the `Sink` port's methods."""


def sink_problem(sink: object) -> str | None:
    """Why `sink` cannot take a report (the port's methods it lacks), or None."""
    missing = [name for name in SINK_METHODS if not callable(getattr(sink, name, None))]
    if not missing:
        return None
    return (
        f"sink {sink!r} is neither a sink name ({', '.join(SinkName)}) nor an object with "
        f"the sink methods (it lacks {' and '.join(missing)}: put_metrics(namespace, "
        "datapoints) and put_event(detail))"
    )


class AwsSink:
    """PutMetricData and PutEvents through boto3. Clients are made on first use."""

    def __init__(
        self,
        *,
        region: str | None,
        endpoint_url: str | None = None,
        event_bus: str = "default",
        connect_timeout: float = 1.0,
        read_timeout: float = 2.0,
        max_attempts: int = 3,
        session_factory: Callable[[], Any] | None = None,
    ) -> None:
        self.region = region
        self.endpoint_url = endpoint_url
        self.event_bus = event_bus
        self._timeouts = (connect_timeout, read_timeout, max_attempts)
        self._session_factory = session_factory
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _client(self, service: str) -> Any:
        with self._lock:
            if service not in self._clients:
                import boto3  # keeps `import trainer_emitter` cheap
                from botocore.config import Config

                connect, read, attempts = self._timeouts
                session = (
                    self._session_factory() if self._session_factory else boto3.session.Session()
                )
                self._clients[service] = session.client(
                    service,
                    region_name=self.region,
                    endpoint_url=self.endpoint_url,
                    config=Config(
                        connect_timeout=connect,
                        read_timeout=read,
                        retries={"total_max_attempts": attempts, "mode": "standard"},
                    ),
                )
            return self._clients[service]

    def put_metrics(self, namespace: str, datapoints: Sequence[Datapoint]) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        client = self._client("cloudwatch")
        for start in range(0, len(datapoints), MAX_DATUMS_PER_CALL):
            chunk = datapoints[start : start + MAX_DATUMS_PER_CALL]
            try:
                client.put_metric_data(
                    Namespace=namespace, MetricData=[d.to_metric_datum() for d in chunk]
                )
            except (BotoCoreError, ClientError) as exc:
                raise DeliveryError(f"PutMetricData failed: {exc}") from exc

    def put_event(self, detail: dict[str, Any]) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        body = event_detail_json(detail)
        try:
            response = self._client("events").put_events(
                Entries=[
                    {
                        "Source": REPORT_SOURCE,
                        "DetailType": REPORT_DETAIL_TYPE,
                        "Detail": body,
                        "EventBusName": self.event_bus,
                    }
                ]
            )
        except (BotoCoreError, ClientError) as exc:
            raise DeliveryError(f"PutEvents failed: {exc}") from exc
        if response.get("FailedEntryCount"):
            entry = response["Entries"][0]
            raise DeliveryError(
                f"PutEvents refused the report: {entry.get('ErrorCode')}: {entry.get('ErrorMessage')}"
            )


def event_detail_json(detail: dict[str, Any]) -> str:
    """The event detail as JSON within EventBridge's 256 KB entry limit: the raw alarm copy is
    dropped first (the parsed evidence stays), and the report says so."""
    body = json.dumps(detail, separators=(",", ":"), allow_nan=False)
    if len(body.encode()) <= MAX_EVENT_BYTES - 1024:
        return body
    trimmed = {k: v for k, v in detail.items() if k != "alarm"}  # optional in the schema
    trimmed["errors"] = [*detail["errors"], "raw alarm copy dropped: event over 256 KB"]
    return json.dumps(trimmed, separators=(",", ":"), allow_nan=False)


class EmfSink:
    """CloudWatch embedded metric format on stdout, for clusters that ship container logs to
    CloudWatch Logs: one EMF document per instance and one line with the full report. The
    report event itself needs EventBridge; a subscription on the log group can forward it."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self._stream = stream

    def put_metrics(self, namespace: str, datapoints: Sequence[Datapoint]) -> None:
        by_instance: dict[tuple[str, str], list[Datapoint]] = {}
        for point in datapoints:
            by_instance.setdefault((point.cluster_name, point.instance_id), []).append(point)
        for (cluster, instance), points in by_instance.items():
            document: dict[str, Any] = {
                "_aws": {
                    "Timestamp": int(points[0].timestamp.timestamp() * 1000),
                    "CloudWatchMetrics": [
                        {
                            "Namespace": namespace,
                            "Dimensions": [list(DIMENSIONS)],
                            "Metrics": [{"Name": p.metric.value, "Unit": p.unit} for p in points],
                        }
                    ],
                },
                "ClusterName": cluster,
                "InstanceId": instance,
            }
            for point in points:
                document[point.metric.value] = point.value
            self._write(document)

    def put_event(self, detail: dict[str, Any]) -> None:
        self._write({"sdc_report": detail})

    def _write(self, document: dict[str, Any]) -> None:
        stream = self._stream or sys.stdout
        try:
            stream.write(json.dumps(document, separators=(",", ":"), allow_nan=False) + "\n")
            stream.flush()
        except (OSError, ValueError) as exc:
            raise DeliveryError(f"could not write EMF to {stream!r}: {exc}") from exc


@dataclass
class MemorySink:
    """Keeps what it is given, for tests of training code. `fail=True` makes every delivery fail,
    so a test can see the spool path work too."""

    fail: bool = False
    metrics: list[tuple[str, Datapoint]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    def put_metrics(self, namespace: str, datapoints: Sequence[Datapoint]) -> None:
        if self.fail:
            raise DeliveryError("memory sink set to fail")
        self.metrics.extend((namespace, d) for d in datapoints)

    def put_event(self, detail: dict[str, Any]) -> None:
        if self.fail:
            raise DeliveryError("memory sink set to fail")
        self.events.append(detail)
