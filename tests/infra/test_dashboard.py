"""The dashboard plots what the alarms and the functions actually produce: the detection
alarms' own queries, the functions' Powertools metrics under the namespace and service they are
configured with, and every function, queue and state machine of the stack."""

from __future__ import annotations

from typing import Any

import pytest

from sdc_remediation.infra.stack.dashboard import FLEET_TITLE, PAGE_TITLE, Series, plotted
from sdc_remediation.infra.stack.functions import PAGE
from sdc_remediation.infra.stack.template import pipeline_functions, resources_of_type
from sdc_remediation.lambdas.metric_names import (
    CLOSE_OUTCOMES,
    PIPELINE_NAMESPACE,
    SERVICE_DIMENSION,
    PipelineMetric,
    closed_metric,
)
from tests.infra.template_tools import dashboard_widgets, only, resolved, widget_titled
from trainer_emitter.contract import Metric

M = PipelineMetric


def series_of(template: dict[str, Any], title: str) -> list[Series]:
    return plotted(widget_titled(template, title))


def pipeline_series(template: dict[str, Any]) -> list[Series]:
    return [
        s
        for w in dashboard_widgets(template)
        for s in plotted(w)
        if s.namespace == PIPELINE_NAMESPACE
    ]


def names(series: list[Series]) -> list[str | None]:
    return [s.name for s in series]


def function_env(template: dict[str, Any]) -> list[dict[str, str]]:
    return [
        f["Properties"]["Environment"]["Variables"] for f in pipeline_functions(template).values()
    ]


def test_the_stack_has_one_dashboard_named_after_the_stack_and_region(template):
    _, dashboard = only(template, "AWS::CloudWatch::Dashboard")

    assert resolved(template, dashboard["Properties"]["DashboardName"]) == (
        "SdcRemediation-us-west-2"
    )


def test_the_dashboard_url_output_opens_that_dashboard(template):
    _, dashboard = only(template, "AWS::CloudWatch::Dashboard")
    name = resolved(template, dashboard["Properties"]["DashboardName"])

    url = resolved(template, template["Outputs"]["DashboardUrl"]["Value"])

    assert url == (
        "https://us-west-2.console.aws.amazon.com/cloudwatch/home?region=us-west-2"
        f"#dashboards/dashboard/{name}"
    )


@pytest.mark.parametrize("metric", list(Metric))
def test_each_sdc_metric_is_plotted_with_its_alarm_s_own_query(template, metric):
    (alarm,) = [
        a["Properties"]
        for a in resources_of_type(template, "AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("AlarmName") == metric.alarm_name
    ]

    (series,) = series_of(template, metric.value)

    assert series.expression == alarm["Metrics"][0]["Expression"]
    assert series.options["period"] == alarm["Metrics"][0]["Period"]


def test_the_sdc_widgets_follow_the_deployment_s_namespace(variant_template):
    for metric in Metric:
        (series,) = series_of(variant_template, metric.value)
        assert 'SCHEMA("ML/SDC", ClusterName, InstanceId)' in (series.expression or "")


def test_pipeline_metrics_carry_the_namespace_and_service_the_functions_are_given(template):
    environments = function_env(template)
    namespaces = {env["POWERTOOLS_METRICS_NAMESPACE"] for env in environments}
    services = {env["POWERTOOLS_SERVICE_NAME"] for env in environments}

    found = pipeline_series(template)

    assert namespaces == {PIPELINE_NAMESPACE}
    assert found, "the dashboard plots none of the functions' own metrics"
    assert {tuple(s.dimensions.items()) for s in found} == {((SERVICE_DIMENSION, services.pop()),)}


def test_every_pipeline_metric_plotted_is_one_the_functions_emit(template):
    unknown = {s.name for s in pipeline_series(template)} - {m.value for m in PipelineMetric}

    assert unknown == set()


def test_incidents_opened_and_held_are_plotted(template):
    plotted_names = names(series_of(template, "Incidents opened and held"))

    assert {M.INCIDENTS_OPENED, M.JOB_INCIDENTS_OPENED, M.INCIDENTS_HELD} <= set(plotted_names)


def test_incidents_closed_are_plotted_for_every_outcome(template):
    plotted_names = names(series_of(template, "Incidents closed"))

    assert plotted_names == [closed_metric(state).value for state in CLOSE_OUTCOMES]
    assert all(s.options["stat"] == "Sum" for s in series_of(template, "Incidents closed"))


def test_approvals_waiting_is_plotted_as_a_level_beside_the_requests_and_decisions(template):
    series = {s.name: s for s in series_of(template, "Approvals")}

    assert series[M.APPROVALS_WAITING].options["stat"] == "Maximum"
    assert series[M.APPROVALS_REQUESTED].options == {
        "label": M.APPROVALS_REQUESTED.value,
        "stat": "Sum",
        "yAxis": "right",
    }
    assert series[M.DECISIONS_ACCEPTED].options["yAxis"] == "right"


def test_time_to_decision_and_to_recovery_are_plotted_as_median_p90_and_maximum(template):
    series = series_of(template, "Time from incident opened")

    assert {(s.name, s.options["stat"]) for s in series} == {
        (metric.value, stat)
        for metric in (M.DECISION_LATENCY, M.RECOVERY_LATENCY)
        for stat in ("p50", "p90", "Maximum")
    }


def test_the_fleet_figures_counts_are_summed_over_the_time_range_shown(template):
    widget = widget_titled(template, FLEET_TITLE)

    assert widget["type"] == "metric" and widget["properties"]["view"] == "singleValue"
    assert widget["properties"]["setPeriodToTimeRange"] is True
    assert [(s.name, s.options["stat"]) for s in plotted(widget)] == [
        (m.value, "Sum")
        for m in (
            M.INCIDENTS_OPENED,
            M.INCIDENTS_HELD,
            M.DECISIONS_ACCEPTED,
            M.REPLACEMENTS_DONE,
            M.REBOOTS_DONE,
            M.NODES_RELEASED,
        )
    ]


@pytest.mark.parametrize(
    ("title", "metric"), [("Function errors", "Errors"), ("Function throttles", "Throttles")]
)
def test_errors_and_throttles_are_plotted_for_every_function(template, title, metric):
    functions = {
        resolved(template, {"Ref": logical_id}) for logical_id in pipeline_functions(template)
    }

    series = series_of(template, title)

    assert {(s.namespace, s.name) for s in series} == {("AWS/Lambda", metric)}
    assert {s.dimensions["FunctionName"] for s in series} == functions
    assert len(series) == len(functions)


def test_every_dead_letter_queues_depth_is_plotted(template):
    queues = {
        f"<{logical_id}.QueueName>" for logical_id in resources_of_type(template, "AWS::SQS::Queue")
    }

    series = series_of(template, "Dead-letter queues")

    assert {s.dimensions["QueueName"] for s in series} == queues
    assert {(s.namespace, s.name, s.options["stat"]) for s in series} == {
        ("AWS/SQS", "ApproximateNumberOfMessagesVisible", "Maximum")
    }


def test_failed_and_timed_out_remediation_executions_are_plotted(template):
    remediation = resolved(template, {"Ref": "RemediationStateMachine"})

    series = series_of(template, "Remediation executions")

    on_remediation = {s.name for s in series if s.dimensions.get("StateMachineArn") == remediation}
    assert {"ExecutionsFailed", "ExecutionsTimedOut"} <= on_remediation
    assert {s.namespace for s in series} == {"AWS/States"}


def test_the_pipeline_alarms_are_on_the_dashboard(template):
    alarms = {
        f"<{logical_id}>"
        for logical_id, alarm in resources_of_type(template, "AWS::CloudWatch::Alarm").items()
        if alarm["Properties"].get("AlarmActions")
    }

    widget = widget_titled(template, "The pipeline's own alarms")

    assert set(widget["properties"]["alarms"]) == alarms
    # three dead-letter queues (undelivered events, failed alarms, failed reports), failed
    # executions, two function-errors, intake-errors, broken audit chains, cards undelivered,
    # reconciliation needing a person, an incident closed with no decision after its approval
    # request
    assert len(alarms) == 11


def test_the_open_incidents_page_is_a_custom_widget_of_the_page_function_under_the_title(template):
    widgets = dashboard_widgets(template)
    page = widget_titled(template, PAGE_TITLE)

    assert widgets.index(page) == 1
    assert page["type"] == "custom"
    assert page["width"] == 24
    assert page["properties"]["endpoint"] == resolved(
        template, {"Fn::GetAtt": [PAGE.logical_id, "Arn"]}
    )
    assert page["properties"]["updateOn"] == {"refresh": True, "resize": False, "timeRange": False}
    handler = template["Resources"][PAGE.logical_id]["Properties"]["Handler"]
    assert handler == "sdc_remediation.lambdas.handlers.incidents_page.handler"
