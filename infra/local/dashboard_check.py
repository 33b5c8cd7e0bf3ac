"""The drill's check of the deployed dashboard against what the run actually published.

A dashboard fails quietly: a widget whose metric name, namespace or dimensions are off by one
character plots an empty graph, and nobody notices until the day it matters. The local run
publishes what a deployed stack would (the emitter's SDC metrics with PutMetricData, the
functions' EMF through `sdc_remediation.infra.local.metrics`), so after a scenario the drill compares:

- what happened in the run (the audit log: incidents opened, held, closed; approvals requested,
  decisions; the metrics the emitter published) must show on the dashboard: some widget plots
  the metric, and what the run published matches the widget's namespace, name and every
  dimension the widget fixes (a Metrics Insights query: its SCHEMA's exact dimension set);
- every series the dashboard plots in the project's namespaces names a metric that something
  emits (the contract's SDC metrics, `sdc_remediation.lambdas.metric_names.PipelineMetric`), and, when this run
  published that metric, under exactly the widget's namespace and dimensions;
- the AWS service series (Lambda, SQS, Step Functions) and the alarm widget name resources of
  this stack (their metrics exist only on AWS).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sdc_remediation.infra.local.evaluator import InsightsQuery
from sdc_remediation.infra.stack.dashboard import Series, plotted
from sdc_remediation.lambdas.metric_names import PIPELINE_NAMESPACE, PipelineMetric, closed_metric
from sdc_remediation.lambdas.models.audit import AuditAction, AuditEntry
from sdc_remediation.lambdas.models.incident import IncidentState
from trainer_emitter.contract import Metric

M = PipelineMetric
RECOVERED = (IncidentState.REPLACED.value, IncidentState.REPLACED_BY_HYPERPOD.value)
SERVICE_RESOURCES = {
    "AWS/Lambda": "FunctionName",
    "AWS/SQS": "QueueName",
    "AWS/States": "StateMachineArn",
}
"""The dimension that names a resource of the stack in each AWS namespace the dashboard uses."""


@dataclass(frozen=True)
class Published:
    """One metric in the account: namespace, name and its dimensions."""

    namespace: str
    name: str
    dimensions: frozenset[tuple[str, str]]

    @classmethod
    def from_listing(cls, metric: Mapping[str, Any]) -> Published:
        return cls(
            metric["Namespace"],
            metric["MetricName"],
            frozenset((d["Name"], d["Value"]) for d in metric.get("Dimensions", [])),
        )


def published_metrics(cloudwatch: Any) -> set[Published]:
    """Every metric of the account (ListMetrics, all pages)."""
    found: set[Published] = set()
    for page in cloudwatch.get_paginator("list_metrics").paginate():
        found |= {Published.from_listing(m) for m in page["Metrics"]}
    return found


def expected_pipeline_metrics(entries: Iterable[AuditEntry]) -> set[PipelineMetric]:
    """What a run's audit log says the dashboard must show: each fact → the metric plotting it."""
    expected: set[PipelineMetric] = set()
    for entry in entries:
        details = entry.details
        if entry.action == AuditAction.INCIDENT_OPENED:
            expected.add(
                M.JOB_INCIDENTS_OPENED if details.get("scope") == "job" else M.INCIDENTS_OPENED
            )
        elif entry.action == AuditAction.INCIDENT_HELD:
            expected.add(M.INCIDENTS_HELD)
        elif entry.action == AuditAction.APPROVAL_REQUESTED:
            expected |= {M.APPROVALS_REQUESTED, M.APPROVALS_WAITING}
            if details.get("notified") is False:
                expected.add(M.CARDS_UNDELIVERED)
        elif entry.action == AuditAction.NOTIFICATION_FAILED:
            expected.add(M.NOTICES_UNDELIVERED)
        elif entry.action == AuditAction.RECOVERY_UNKNOWN:
            expected.add(M.RECOVERIES_UNKNOWN)
        elif entry.action == AuditAction.RECONCILED:
            expected.add(M.INCIDENTS_RECONCILED)
        elif entry.action == AuditAction.RECONCILE_NEEDS_PERSON:
            expected.add(M.RECONCILE_NEEDS_PERSON)
        elif entry.action == AuditAction.DECISION_ACCEPTED and details.get("decision") in (
            "approve",
            "reject",
        ):
            expected |= {M.DECISIONS_ACCEPTED, M.DECISION_LATENCY}
        elif entry.action == AuditAction.INCIDENT_CLOSED:
            expected.add(closed_metric(IncidentState(details["state"])))
            if details["state"] in RECOVERED and not details.get("dry_run"):
                expected.add(M.RECOVERY_LATENCY)
    return expected


@dataclass(frozen=True)
class Plotted:
    """A series of the dashboard, reduced to what can be compared with a published metric."""

    widget: str
    namespace: str
    name: str
    dimensions: Mapping[str, str] | None
    """Fixed dimension values; None for a Metrics Insights query (see `schema`)."""
    schema: tuple[str, ...] = ()
    """A Metrics Insights query's SCHEMA: the exact dimension names it matches."""

    def matches(self, metric: Published) -> bool:
        if (metric.namespace, metric.name) != (self.namespace, self.name):
            return False
        if self.dimensions is None:
            return {name for name, _ in metric.dimensions} == set(self.schema)
        return dict(metric.dimensions) == dict(self.dimensions)

    def describe(self) -> str:
        if self.dimensions is None:
            return f"{self.namespace}/{self.name} over SCHEMA({', '.join(self.schema)})"
        dims = ", ".join(f"{k}={v}" for k, v in sorted(self.dimensions.items()))
        return f"{self.namespace}/{self.name}{{{dims}}}"


def _series(body: Mapping[str, Any]) -> tuple[list[Plotted], list[tuple[str, Series]]]:
    """The comparable series, and the others (AWS service metrics) with their widget titles."""
    comparable: list[Plotted] = []
    others: list[tuple[str, Series]] = []
    for widget in body.get("widgets", []):
        title = str(widget.get("properties", {}).get("title") or widget.get("type"))
        for series in plotted(widget):
            if series.expression is not None:
                query = InsightsQuery.parse(series.expression)
                if query is not None:
                    comparable.append(
                        Plotted(title, query.namespace, query.metric, None, query.dimensions)
                    )
                continue
            if series.namespace and series.namespace.startswith("AWS/"):
                others.append((title, series))
            elif series.namespace and series.name:
                comparable.append(
                    Plotted(title, series.namespace, series.name, dict(series.dimensions))
                )
    return comparable, others


def judge_dashboard(
    body: Mapping[str, Any],
    published: set[Published],
    expected: set[tuple[str, str]],
    *,
    sdc_namespace: str,
    resources: Mapping[str, set[str]],
    alarms: set[str],
) -> list[str]:
    """Problems of the dashboard `body` against a run: `published` (the account's metrics),
    `expected` ((namespace, name) that the run's story must show), the stack's `resources`
    (dimension name → the values naming this stack's resources) and `alarms` (their ARNs)."""
    problems: list[str] = []
    comparable, others = _series(body)
    emitted = {
        PIPELINE_NAMESPACE: {m.value for m in PipelineMetric},
        sdc_namespace: {m.value for m in Metric},
    }
    for series in comparable:
        known = emitted.get(series.namespace)
        if known is None:
            problems.append(
                f"widget {series.widget!r} plots {series.describe()}: nothing this pipeline "
                f"runs publishes to namespace {series.namespace}"
            )
            continue
        if series.name not in known:
            problems.append(
                f"widget {series.widget!r} plots {series.describe()}: nothing emits a metric "
                f"named {series.name}"
            )
            continue
        same_name = [
            p for p in published if (p.namespace, p.name) == (series.namespace, series.name)
        ]
        if same_name and not any(series.matches(p) for p in same_name):
            found = "; ".join(sorted(_describe(p) for p in same_name))
            problems.append(
                f"widget {series.widget!r} plots {series.describe()}, but this run published "
                f"it as {found}: the widget shows nothing"
            )
    for namespace, name in sorted(expected):
        showing = [s for s in comparable if (s.namespace, s.name) == (namespace, name)]
        if not showing:
            problems.append(
                f"the dashboard does not show {namespace}/{name}, which this run's incidents emit"
            )
        elif not any(s.matches(p) for s in showing for p in published):
            problems.append(
                f"the dashboard shows {namespace}/{name} ({showing[0].describe()}) but this run "
                "published no such metric"
            )
    for title, service in others:
        key = SERVICE_RESOURCES.get(str(service.namespace))
        value = service.dimensions.get(key) if key else None
        if key is None or value not in resources.get(key, set()):
            problems.append(
                f"widget {title!r} plots {service.namespace}/{service.name} for "
                f"{key or 'an unknown dimension'}={value}, not a resource of this stack"
            )
    for widget in body.get("widgets", []):
        for arn in widget.get("properties", {}).get("alarms", []) or []:
            if arn not in alarms:
                problems.append(f"the alarm widget shows {arn}, not an alarm of this stack")
    return problems


def _describe(metric: Published) -> str:
    dims = ", ".join(f"{k}={v}" for k, v in sorted(metric.dimensions))
    return f"{metric.namespace}/{metric.name}{{{dims}}}"


def facts(entries: Sequence[AuditEntry], sdc: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
    """(namespace, metric) the dashboard must show for a run: the pipeline metrics its audit
    log implies, and the SDC metrics (namespace, name) the emitter published."""
    return {(PIPELINE_NAMESPACE, m.value) for m in expected_pipeline_metrics(entries)} | set(sdc)
