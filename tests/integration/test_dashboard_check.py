"""The drill's dashboard check: a widget that would plot nothing is a failure, whichever way it
is wrong (name, namespace, a fixed dimension, a Metrics Insights SCHEMA, another stack's
resource), and so is a fact of the run the dashboard does not show."""

from __future__ import annotations

from typing import Any

from sdc_remediation.infra.local.dashboard_check import (
    Published,
    expected_pipeline_metrics,
    facts,
    judge_dashboard,
)
from sdc_remediation.lambdas.metric_names import PIPELINE_NAMESPACE, SERVICE_DIMENSION, SERVICE_NAME
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.models.audit import AuditEntry
from trainer_emitter.contract import NAMESPACE, Metric, metrics_insights_query

SERVICE = {SERVICE_DIMENSION: SERVICE_NAME}
FUNCTION = "OpenIncidentFunction"
QUEUE = "UndeliveredEvents"
ALARM = "arn:aws:cloudwatch:us-west-2:123456789012:alarm:SdcRemediation-function-errors"


def widget(title: str, *metrics: list[Any], alarms: list[str] | None = None) -> dict[str, Any]:
    properties: dict[str, Any] = {"title": title, "metrics": list(metrics)}
    if alarms is not None:
        properties = {"title": title, "alarms": alarms}
    return {"type": "metric", "properties": properties}


def pipeline(name: str, dims: dict[str, str] | None = None, ns: str = PIPELINE_NAMESPACE) -> list:
    pairs = [x for item in (dims if dims is not None else SERVICE).items() for x in item]
    return [ns, name, *pairs, {"stat": "Sum"}]


def query(metric: Metric = Metric.REPLAY_MISMATCH) -> list:
    return [{"expression": metrics_insights_query(metric, NAMESPACE), "period": 60}]


def published(name: str, dims: dict[str, str] | None = None, ns: str = PIPELINE_NAMESPACE):
    return Published(ns, name, frozenset((dims if dims is not None else SERVICE).items()))


SDC_PUBLISHED = published(
    Metric.REPLAY_MISMATCH.value,
    {"ClusterName": "ml-cluster-1", "InstanceId": "i-0bb00000000000002"},
    NAMESPACE,
)


def judge(body_widgets: list[dict[str, Any]], seen: set[Published], expected=frozenset()):
    return judge_dashboard(
        {"widgets": body_widgets},
        seen,
        set(expected),
        sdc_namespace=NAMESPACE,
        resources={"FunctionName": {FUNCTION}, "QueueName": {QUEUE}, "StateMachineArn": set()},
        alarms={ALARM},
    )


def entry(action: str, **details: Any) -> AuditEntry:
    return AuditEntry("sdc-1", 1, "2026-12-01T00:00:00+00:00", "test", action, details, [], "", "")


def test_a_dashboard_that_plots_what_the_run_published_passes():
    problems = judge(
        [widget("SDC", query()), widget("Opened", pipeline("IncidentsOpened"))],
        {SDC_PUBLISHED, published("IncidentsOpened")},
        {(NAMESPACE, "sdc_replay_mismatch"), (PIPELINE_NAMESPACE, "IncidentsOpened")},
    )

    assert problems == []


def test_a_widget_with_another_service_value_plots_nothing_and_fails():
    problems = judge(
        [widget("Opened", pipeline("IncidentsOpened", {SERVICE_DIMENSION: "sdc"}))],
        {published("IncidentsOpened")},
    )

    assert problems == [
        "widget 'Opened' plots SDC/Remediation/IncidentsOpened{service=sdc}, but this run "
        "published it as SDC/Remediation/IncidentsOpened{service=sdc-remediation}: the widget "
        "shows nothing"
    ]


def test_a_widget_without_the_service_dimension_plots_nothing_and_fails():
    problems = judge(
        [widget("Opened", pipeline("IncidentsOpened", {}))],
        {published("IncidentsOpened")},
        {(PIPELINE_NAMESPACE, "IncidentsOpened")},
    )

    assert len(problems) == 2
    assert "the widget shows nothing" in problems[0]
    assert "published no such metric" in problems[1]


def test_a_metric_name_nothing_emits_fails():
    problems = judge([widget("Opened", pipeline("IncidentOpened"))], set())

    assert problems == [
        "widget 'Opened' plots SDC/Remediation/IncidentOpened{service=sdc-remediation}: "
        "nothing emits a metric named IncidentOpened"
    ]


def test_a_namespace_nothing_publishes_to_fails():
    problems = judge([widget("Opened", pipeline("IncidentsOpened", ns="SDCRemediation"))], set())

    assert "nothing this pipeline runs publishes to namespace SDCRemediation" in problems[0]


def test_a_fact_of_the_run_the_dashboard_does_not_show_fails():
    problems = judge(
        [widget("Opened", pipeline("IncidentsOpened"))],
        {published("IncidentsOpened"), published("ClosedRejected")},
        {(PIPELINE_NAMESPACE, "IncidentsOpened"), (PIPELINE_NAMESPACE, "ClosedRejected")},
    )

    assert problems == [
        "the dashboard does not show SDC/Remediation/ClosedRejected, which this run's "
        "incidents emit"
    ]


def test_an_sdc_query_over_another_dimension_set_than_the_published_one_fails():
    with_service = published(
        Metric.REPLAY_MISMATCH.value,
        {"ClusterName": "ml-cluster-1", "InstanceId": "i-0bb00000000000002", "service": "x"},
        NAMESPACE,
    )

    problems = judge([widget("SDC", query())], {with_service}, {(NAMESPACE, "sdc_replay_mismatch")})

    assert "over SCHEMA(ClusterName, InstanceId), but this run published it as" in problems[0]


def test_aws_service_series_and_alarms_must_name_this_stack_s_resources():
    problems = judge(
        [
            widget("Errors", ["AWS/Lambda", "Errors", "FunctionName", FUNCTION, {"stat": "Sum"}]),
            widget("Depth", ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", "x"]),
            widget("Alarms", alarms=[ALARM, "arn:aws:cloudwatch:us-west-2:1:alarm:other"]),
        ],
        set(),
    )

    assert problems == [
        "widget 'Depth' plots AWS/SQS/ApproximateNumberOfMessagesVisible for QueueName=x, not a "
        "resource of this stack",
        "the alarm widget shows arn:aws:cloudwatch:us-west-2:1:alarm:other, not an alarm of "
        "this stack",
    ]


def test_the_audit_log_says_what_the_dashboard_must_show():
    entries = [
        entry("incident_opened", source="report"),
        entry("approval_requested"),
        entry("decision_accepted", decision="approve"),
        entry("incident_closed", state="replaced", dry_run=False),
    ]

    assert expected_pipeline_metrics(entries) == {
        M.INCIDENTS_OPENED,
        M.APPROVALS_REQUESTED,
        M.APPROVALS_WAITING,
        M.DECISIONS_ACCEPTED,
        M.DECISION_LATENCY,
        M.CLOSED_REPLACED,
        M.RECOVERY_LATENCY,
    }


def test_held_job_level_and_dry_run_facts_map_to_their_metrics():
    entries = [
        entry("incident_opened", scope="job"),
        entry("incident_held", kind="muted"),
        entry("incident_closed", state="replaced", dry_run=True),
        entry("decision_accepted", decision="reset"),
    ]

    assert expected_pipeline_metrics(entries) == {
        M.JOB_INCIDENTS_OPENED,
        M.INCIDENTS_HELD,
        M.CLOSED_REPLACED,
    }


def test_facts_join_the_pipeline_metrics_and_the_published_sdc_metrics():
    found = facts([entry("incident_held")], {(NAMESPACE, "sdc_replay_mismatch")})

    assert found == {(PIPELINE_NAMESPACE, "IncidentsHeld"), (NAMESPACE, "sdc_replay_mismatch")}
