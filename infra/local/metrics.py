"""The functions' own metrics in the local run: what CloudWatch Logs makes of their EMF lines.

On Lambda, Powertools prints an invocation's metrics as one embedded-metric-format (EMF) JSON
document when the handler returns, and CloudWatch Logs extracts the metrics from it. Here the
handlers run in-process: `EmfCapture` takes that same document from Powertools' flush (nothing
is printed), and after the invocation, outside its measured time, puts its metrics into the
local account with PutMetricData, namespace and dimensions exactly as the document declares
them. So the drill's account holds the pipeline metrics a deployed stack would have, next to
the SDC metrics the emitter published.

Each function reads `POWERTOOLS_METRICS_NAMESPACE` and `POWERTOOLS_SERVICE_NAME` from its own
environment on AWS; in one process the Metrics object is shared, so `for_function` applies the
invoked function's values for the duration of its invocation.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sdc_remediation.lambdas.models.environment import EnvVar

MAX_DATUMS_PER_CALL = 1000
"""PutMetricData's limit of metrics per call."""


def datums(document: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(namespace, MetricDatum) for every value of every metric an EMF document declares, under
    each of its dimension sets, as CloudWatch Logs extracts them."""
    aws = document["_aws"]
    at = datetime.fromtimestamp(int(aws["Timestamp"]) / 1000, UTC)
    found: list[tuple[str, dict[str, Any]]] = []
    for directive in aws["CloudWatchMetrics"]:
        for dimension_set in directive.get("Dimensions") or [[]]:
            dimensions = [{"Name": name, "Value": str(document[name])} for name in dimension_set]
            for metric in directive["Metrics"]:
                raw = document[metric["Name"]]
                for value in raw if isinstance(raw, list) else [raw]:
                    found.append(
                        (
                            directive["Namespace"],
                            {
                                "MetricName": metric["Name"],
                                "Dimensions": dimensions,
                                "Value": float(value),
                                "Unit": metric.get("Unit") or "None",
                                "Timestamp": at,
                            },
                        )
                    )
    return found


@contextmanager
def flushed_to(take: Callable[[dict[str, Any]], None]) -> Iterator[None]:
    """While active, each metric flush of the functions hands its EMF document to `take`
    instead of printing it (a flush with no metrics hands nothing)."""
    from sdc_remediation.lambdas.observability import metrics

    # The handlers' `log_metrics` decorator flushes through the provider, not the wrapper.
    provider = metrics.provider

    def flush(raise_on_empty_metrics: bool = False) -> None:
        if provider.metric_set:
            take(dict(provider.serialize_metric_set()))
        provider.clear_metrics()

    provider.flush_metrics = flush  # type: ignore[method-assign]
    try:
        yield
    finally:
        del provider.flush_metrics  # the class's own method again


class EmfCapture:
    """Takes the handlers' EMF documents instead of printing them; `publish` delivers them."""

    def __init__(self, session: Any) -> None:
        self._cloudwatch = session.client("cloudwatch")
        self._lock = threading.Lock()
        self._pending: list[dict[str, Any]] = []
        self.documents: list[dict[str, Any]] = []
        """Every document captured, in order (what the functions' logs would hold)."""

    @contextmanager
    def installed(self) -> Iterator[EmfCapture]:
        """While active, the functions' metric flush lands here (metrics on or off)."""
        with flushed_to(self._take):
            try:
                yield self
            finally:
                self.publish()

    def _take(self, document: dict[str, Any]) -> None:
        with self._lock:
            self._pending.append(document)
            self.documents.append(document)

    @contextmanager
    def for_function(self, environment: Mapping[str, str]) -> Iterator[None]:
        """The invoked function's namespace and service, as its own process would have them."""
        from sdc_remediation.lambdas.observability import metrics

        saved = (metrics.namespace, metrics.service)
        metrics.namespace = environment.get(EnvVar.POWERTOOLS_METRICS_NAMESPACE) or saved[0]
        metrics.service = environment.get(EnvVar.POWERTOOLS_SERVICE_NAME) or saved[1]
        try:
            yield
        finally:
            metrics.namespace, metrics.service = saved

    def publish(self) -> int:
        """Put what was captured since the last call into the account; returns the datums."""
        with self._lock:
            pending, self._pending = self._pending, []
        by_namespace: dict[str, list[dict[str, Any]]] = {}
        for document in pending:
            for namespace, datum in datums(document):
                by_namespace.setdefault(namespace, []).append(datum)
        sent = 0
        for namespace, items in by_namespace.items():
            for start in range(0, len(items), MAX_DATUMS_PER_CALL):
                batch = items[start : start + MAX_DATUMS_PER_CALL]
                self._cloudwatch.put_metric_data(Namespace=namespace, MetricData=batch)
                sent += len(batch)
        return sent


COMPARISONS: dict[str, Any] = {
    "GreaterThanThreshold": lambda value, threshold: value > threshold,
    "GreaterThanOrEqualToThreshold": lambda value, threshold: value >= threshold,
    "LessThanThreshold": lambda value, threshold: value < threshold,
    "LessThanOrEqualToThreshold": lambda value, threshold: value <= threshold,
}


def alarm_breaching(cloudwatch: Any, alarm: Mapping[str, Any], now: datetime | None = None) -> bool:
    """Whether a single-metric alarm (the template's properties: namespace, metric, dimensions,
    statistic, period, threshold, comparison) would be in ALARM on the account's data now: its
    statistic over the last `EvaluationPeriods` periods, each compared with the threshold (moto
    never evaluates alarms; the pipeline's own alarms are read here, as CloudWatch would)."""
    from datetime import timedelta

    now = now or datetime.now(UTC)
    if "Metrics" in alarm:  # one MetricStat (CDK writes a labelled metric this way)
        (query,) = [m for m in alarm["Metrics"] if m.get("ReturnData", True)]
        stat = query["MetricStat"]
        metric = stat["Metric"]
        period, statistic = int(stat["Period"]), str(stat["Stat"])
    else:
        metric = alarm
        period, statistic = int(alarm["Period"]), str(alarm["Statistic"])
    periods = int(alarm.get("EvaluationPeriods", 1))
    answer = cloudwatch.get_metric_statistics(
        Namespace=metric["Namespace"],
        MetricName=metric["MetricName"],
        Dimensions=metric.get("Dimensions") or [],
        StartTime=now - timedelta(seconds=period * periods),
        EndTime=now + timedelta(seconds=period),
        Period=period,
        Statistics=[statistic],
    )
    compare = COMPARISONS[alarm["ComparisonOperator"]]
    threshold = float(alarm["Threshold"])
    return any(compare(float(point[statistic]), threshold) for point in answer["Datapoints"])
