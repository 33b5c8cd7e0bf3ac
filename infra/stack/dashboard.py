"""The deployment's CloudWatch dashboard: what the pipeline sees, and how the pipeline itself is.

One dashboard per deployment (`<stack>-<region>`, its URL the `DashboardUrl` output). Rows:

0. the open incidents, a custom widget the `incidents_page` function renders
   (`sdc_remediation.lambdas.wording.page`): each with its evidence, recommendation, deadline, exposure and
   Approve / Reject (and Reboot instead, where allowed) buttons that show how to decide as yourself;
1. the three SDC metrics, with the detection alarms' own Metrics Insights queries
   (`sdc_remediation.infra.stack.alarms.detection_query`): one series per cluster and instance;
2. incidents opened and held, closed by outcome, approvals (waiting, requested, decided);
3. time from an incident opened to its decision and to its node recovered (median, p90,
   maximum), then the fleet figures' counts over the time range shown (`sdc report` gives the
   rest: docs/figures.md);
4. errors and throttles of every function;
5. the dead-letter queues' depth, and the state machines' failed, timed-out and aborted
   executions; the pipeline's own alarms.

Rows 2 and 3 plot the functions' Powertools metrics (`sdc_remediation.lambdas.metric_names`: namespace, names
and the `service` dimension Powertools adds); the drill's judge checks that a run publishes
exactly what they plot (infra/local/drill/judge.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from aws_cdk import Aws, Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from sdc_remediation.infra.stack.alarms import detection_query
from sdc_remediation.lambdas.metric_names import (
    CLOSE_OUTCOMES,
    PIPELINE_NAMESPACE,
    SERVICE_DIMENSION,
    SERVICE_NAME,
    PipelineMetric,
    closed_metric,
)
from trainer_emitter.contract import Metric

M = PipelineMetric
PERIOD: Final = Duration.minutes(5)
WIDTH: Final = 24
"""A dashboard row is 24 units wide."""
HEIGHT: Final = 6
PAGE_TITLE: Final = "Open incidents (awaiting approval first)"
PAGE_HEIGHT: Final = 10
"""The page of open incidents scrolls inside its widget beyond this."""

OPENED_AND_HELD: Final = (
    M.INCIDENTS_OPENED,
    M.JOB_INCIDENTS_OPENED,
    M.INCIDENTS_HELD,
    M.INCIDENTS_HELD_IN_FLIGHT,
    M.INCIDENTS_SKIPPED,
)
CLOSED: Final = tuple(closed_metric(state) for state in CLOSE_OUTCOMES)
APPROVAL_FLOW: Final = (M.APPROVALS_REQUESTED, M.DECISIONS_ACCEPTED, M.DECISIONS_REFUSED)
LATENCIES: Final = (M.DECISION_LATENCY, M.RECOVERY_LATENCY)
LATENCY_STATISTICS: Final = ("p50", "p90", "Maximum")
"""The median and p90 `sdc report` gives of the same spans (`sdc_remediation.lambdas.logic.core.figures`), and
the worst one."""
FLEET_TITLE: Final = "Fleet figures over the time range shown (the rest: sdc report)"
FLEET: Final = (
    M.INCIDENTS_OPENED,
    M.INCIDENTS_HELD,
    M.DECISIONS_ACCEPTED,
    M.REPLACEMENTS_DONE,
    M.REBOOTS_DONE,
    M.NODES_RELEASED,
)
"""The counts behind `sdc report`'s figures that the functions emit as metrics: incidents, the
human decisions, the nodes acted on and the nodes let back in (docs/figures.md)."""
STEP_TROUBLE: Final = (
    M.STEP_FAILURES,
    M.STEP_RETRYABLE_ERRORS,
    M.EVENTS_REFUSED,
    M.NODES_NOT_ISOLATED,
    M.NODE_RELEASES_FAILED,
)

DELIVERY: Final = (M.NOTICES_RETRIED, M.NOTICES_UNDELIVERED, M.CARDS_UNDELIVERED)
RECONCILIATION: Final = (
    M.RECOVERIES_UNKNOWN,
    M.CLOSED_UNDECIDED,
    M.INCIDENTS_RECONCILED,
    M.RECONCILE_NEEDS_PERSON,
)


@dataclass(frozen=True)
class Series:
    """One line of a metric widget, as the dashboard body (CloudWatch's dashboard body
    structure) gives it: a metric, or an expression (metric math, a Metrics Insights query)."""

    namespace: str | None = None
    name: str | None = None
    dimensions: dict[str, str] = field(default_factory=dict)
    expression: str | None = None
    options: dict[str, Any] = field(default_factory=dict)


def plotted(widget: Mapping[str, Any]) -> list[Series]:
    """The series of a widget of a dashboard body: `[namespace, name, dim, value, ...,
    {options}]` per metric, `[{expression, ...}]` per expression; none for text or alarms."""
    found = []
    for entry in widget.get("properties", {}).get("metrics", []):
        options = entry[-1] if entry and isinstance(entry[-1], dict) else {}
        if "expression" in options:
            found.append(Series(expression=options["expression"], options=options))
            continue
        namespace, name, *pairs = entry[:-1] if options else entry
        found.append(
            Series(
                namespace=namespace,
                name=name,
                dimensions=dict(zip(pairs[::2], pairs[1::2], strict=True)),
                options=options,
            )
        )
    return found


def dashboard_name(stack_name: str) -> str:
    """`<stack>-<region>`: dashboards are global to the account, stacks are regional."""
    return f"{stack_name}-{Aws.REGION}"


def dashboard_url(name: str) -> str:
    return (
        f"https://{Aws.REGION}.console.aws.amazon.com/cloudwatch/home?region={Aws.REGION}"
        f"#dashboards/dashboard/{name}"
    )


def pipeline_metric(
    metric: PipelineMetric, statistic: str = "Sum", label: str | None = None
) -> cloudwatch.Metric:
    """One of the functions' own metrics, with the dimension Powertools gives it."""
    return cloudwatch.Metric(
        namespace=PIPELINE_NAMESPACE,
        metric_name=metric.value,
        dimensions_map={SERVICE_DIMENSION: SERVICE_NAME},
        statistic=statistic,
        period=PERIOD,
        label=label or metric.value,
    )


@dataclass(frozen=True)
class PipelineDashboardProps:
    stack_name: str
    """Names the dashboard (`<stack>-<region>`) and titles it."""
    namespace: str
    """The SDC metrics' namespace, for the detection alarms' queries."""
    functions: Mapping[str, lambda_.IFunction]
    """Handler module → function: their errors and throttles."""
    remediation: sfn.IStateMachine
    approval: sfn.IStateMachine
    queues: Mapping[str, sqs.IQueue]
    """Label → dead-letter queue: their depth."""
    alarms: Sequence[cloudwatch.IAlarm]
    """The pipeline's own alarms: their state."""
    page: lambda_.IFunction
    """Renders the open incidents: the custom widget under the title."""


class PipelineDashboard(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, props: PipelineDashboardProps
    ) -> None:
        super().__init__(scope, construct_id)
        self.name = dashboard_name(props.stack_name)
        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=self.name,
            default_interval=Duration.days(1),
        )
        cfn = self.dashboard.node.default_child
        assert isinstance(cfn, cloudwatch.CfnDashboard)
        cfn.override_logical_id("PipelineDashboard")
        self.url = dashboard_url(self.name)

        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=(
                    f"# SDC remediation: {props.stack_name}\n"
                    "Detection (the alarms' own queries), incidents, approvals, and the "
                    "pipeline's health. The list behind the numbers: `sdc status`. What each "
                    "widget shows and what to do: docs/operate.md, *The dashboard*."
                ),
                width=WIDTH,
                height=2,
            )
        )
        self.dashboard.add_widgets(
            cloudwatch.CustomWidget(
                function_arn=props.page.function_arn,
                title=PAGE_TITLE,
                width=WIDTH,
                height=PAGE_HEIGHT,
                update_on_refresh=True,
                update_on_resize=False,
                update_on_time_range_change=False,
            )
        )
        third = WIDTH // 3
        self.dashboard.add_widgets(
            *(
                cloudwatch.GraphWidget(
                    title=f"{metric.value} by cluster and instance (alarm query)",
                    left=[detection_query(metric, props.namespace)],
                    width=third,
                    height=HEIGHT,
                    left_y_axis=cloudwatch.YAxisProps(min=0),
                )
                for metric in Metric
            )
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Incidents opened and held",
                left=[pipeline_metric(m) for m in OPENED_AND_HELD],
                width=third,
                height=HEIGHT,
                stacked=True,
            ),
            cloudwatch.GraphWidget(
                title="Incidents closed, by outcome",
                left=[pipeline_metric(m) for m in CLOSED],
                width=third,
                height=HEIGHT,
                stacked=True,
            ),
            cloudwatch.GraphWidget(
                title="Approvals: waiting (left), requested and decided (right)",
                left=[pipeline_metric(M.APPROVALS_WAITING, "Maximum", "approvals waiting")],
                right=[pipeline_metric(m) for m in APPROVAL_FLOW],
                width=third,
                height=HEIGHT,
                left_y_axis=cloudwatch.YAxisProps(min=0),
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Time from incident opened to decision and to node recovered (seconds)",
                left=[
                    pipeline_metric(metric, statistic, f"{metric.value} {statistic}")
                    for metric in LATENCIES
                    for statistic in LATENCY_STATISTICS
                ],
                width=WIDTH // 2,
                height=HEIGHT,
                left_y_axis=cloudwatch.YAxisProps(min=0),
            ),
            cloudwatch.GraphWidget(
                title="Steps that failed, retried, or could not isolate or release a node",
                left=[pipeline_metric(m) for m in STEP_TROUBLE],
                width=WIDTH // 2,
                height=HEIGHT,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.SingleValueWidget(
                title=FLEET_TITLE,
                metrics=[pipeline_metric(m) for m in FLEET],
                set_period_to_time_range=True,
                width=WIDTH,
                height=3,
            )
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Notices retried and undelivered; approval cards nobody received",
                left=[pipeline_metric(m) for m in DELIVERY],
                width=WIDTH // 2,
                height=HEIGHT,
                left_y_axis=cloudwatch.YAxisProps(min=0),
            ),
            cloudwatch.GraphWidget(
                title="Reconciliation: nodes kept mid-recovery, incidents settled, needing a person",
                left=[pipeline_metric(m) for m in RECONCILIATION],
                width=WIDTH // 2,
                height=HEIGHT,
                left_y_axis=cloudwatch.YAxisProps(min=0),
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Function errors",
                left=[
                    fn.metric_errors(period=PERIOD, statistic="Sum", label=module)
                    for module, fn in props.functions.items()
                ],
                width=WIDTH // 2,
                height=HEIGHT,
            ),
            cloudwatch.GraphWidget(
                title="Function throttles",
                left=[
                    fn.metric_throttles(period=PERIOD, statistic="Sum", label=module)
                    for module, fn in props.functions.items()
                ],
                width=WIDTH // 2,
                height=HEIGHT,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Dead-letter queues: events waiting for a redrive",
                left=[
                    queue.metric_approximate_number_of_messages_visible(
                        period=PERIOD, statistic="Maximum", label=label
                    )
                    for label, queue in props.queues.items()
                ],
                width=third,
                height=HEIGHT,
                left_y_axis=cloudwatch.YAxisProps(min=0),
            ),
            cloudwatch.GraphWidget(
                title="Remediation executions failed, timed out, aborted; approvals refused",
                left=[
                    props.remediation.metric_failed(period=PERIOD, label="remediation failed"),
                    props.remediation.metric_timed_out(
                        period=PERIOD, label="remediation timed out"
                    ),
                    props.remediation.metric_aborted(period=PERIOD, label="remediation aborted"),
                    props.approval.metric_failed(
                        period=PERIOD, label="approval executions failed (decision refused)"
                    ),
                ],
                width=third,
                height=HEIGHT,
            ),
            cloudwatch.AlarmStatusWidget(
                title="The pipeline's own alarms",
                alarms=list(props.alarms),
                width=third,
                height=HEIGHT,
            ),
        )
