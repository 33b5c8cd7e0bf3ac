"""Machine time of the pipeline, measured in the local run (handler time only: the state
machine's waits are configuration, not machine time), and the per-incident cost model.

Two paths: the fast one (the report event opens the incident and the execution's first step
cordons the node: goal 1 s) and the one to the approval request (goal 2 s)."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from typing import Any

from sdc_remediation.infra.local.drill.scenarios import RANK_MAP, REPLAY_CULPRIT
from sdc_remediation.infra.local.run import LocalRun
from sdc_remediation.lambdas.models.kubernetes import KubeNode
from tests.bench.clients import reused_clients

GOAL_TO_APPROVAL = 2.0  # seconds of handler time from contributor event to approval request
GOAL_TO_CORDON = 1.0  # seconds of handler time from report event to the suspect node cordoned
FAST_PATH = ("store_report", "isolate_node")
"""The fast path: the report event opens the incident (store_report), the execution's first
step cordons the node (isolate_node); the alarm a minute later only attaches."""

# List prices, us-east-1, as published on the services' pricing pages in 2026-12. Dated
# constants: check them before relying on the dollar figures.
PRICES_AS_OF = "2026-12 (us-east-1 list prices)"
LAMBDA_PER_REQUEST = 0.20 / 1_000_000
LAMBDA_PER_GB_SECOND = 0.0000166667
LAMBDA_MEMORY_GB = 0.25
SFN_PER_TRANSITION = 0.025 / 1000
DYNAMODB_PER_WRITE = 0.625 / 1_000_000  # on-demand write request unit
DYNAMODB_PER_READ = 0.125 / 1_000_000  # on-demand read request unit
SNS_PER_PUBLISH = 0.50 / 1_000_000
EVENTS_PER_CUSTOM_EVENT = 1.00 / 1_000_000
CW_PER_PUT_METRIC_DATA = 0.01 / 1000
CW_PER_METRIC_MONTH = 0.30
HOURS_PER_MONTH = 730
CW_PER_ALARM_METRIC_MONTH = 0.10
CW_PER_DASHBOARD_MONTH = 3.00  # beyond the account's first three, which are free
KMS_PER_KEY_MONTH = 1.00

WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
READS = {"GetItem", "Query", "Scan", "BatchGetItem"}


WARM_UP = {
    **REPLAY_CULPRIT,
    "mismatched_pairs": [[21, 13], [29, 21]],
    "culprits": [21],
}
"""The first incident of the process, on another node: it loads each service's model and builds
the clients, as cold Lambdas would. The figures below are the second incident's (warm: clients
kept, as a warm Lambda keeps them)."""


def run() -> list[dict[str, Any]]:
    calls: Counter[str] = Counter()
    with LocalRun.open() as run, reused_clients(run.session):
        run.session.events.register("before-call", _counter(calls))
        cold = _to_approval(run, WARM_UP)
        _require_cordoned(run, cold)
        run.decide(cold, "approve", "bench warm-up")
        run.wait_for(cold, "replaced")
        calls.clear()
        start = len(run.invocations.calls)
        result = run.emitter(RANK_MAP).report(REPLAY_CULPRIT)
        incident_id = _to_approval(run, None)
        _require_cordoned(run, incident_id)
        to_approval = list(run.invocations.calls[start:])
        approval = run.decide(incident_id, "approve", "bench")
        run.wait_for(incident_id, "replaced")
        transitions = _transitions(run, run.execution(incident_id)["executionArn"])
        transitions += _transitions(run, approval["executionArn"])
        invocations = list(run.invocations.calls[start:])
        alarm_metrics = sum(_metrics_of(alarm) for alarm in run.stack.alarms.values())
        dashboards = len(run.stack.dashboards)
        cold_calls = list(run.invocations.calls[:start])

    handler_seconds = _handler_seconds(to_approval)
    cold_seconds = _handler_seconds(cold_calls[: len(to_approval)])
    to_cordon = _fast_path_seconds(to_approval)
    cold_to_cordon = _fast_path_seconds(cold_calls)
    rows: list[dict[str, Any]] = [
        {
            "name": "report event → node cordoned (handler time: " + " + ".join(FAST_PATH) + ")",
            "value": to_cordon,
            "unit": "s",
            "ratio": to_cordon / GOAL_TO_CORDON,
            "goal": "ratio ≤ 1 (1 s)",
        },
        {
            "name": "  the same for the process's first incident (cold clients)",
            "value": cold_to_cordon,
            "unit": "s",
            "ratio": cold_to_cordon / GOAL_TO_CORDON,
            "goal": "ratio ≤ 1 (1 s)",
        },
        {
            "name": "contributor event → approval request ready (handler time)",
            "value": handler_seconds,
            "unit": "s",
            "ratio": handler_seconds / GOAL_TO_APPROVAL,
            "goal": "ratio ≤ 1 (2 s)",
        },
        {
            "name": "  the same for the process's first incident (cold clients)",
            "value": cold_seconds,
            "unit": "s",
            "ratio": cold_seconds / GOAL_TO_APPROVAL,
            "goal": "ratio ≤ 1 (2 s)",
        },
    ]
    by_handler: dict[str, list[float]] = {}
    for call in invocations:
        by_handler.setdefault(call.handler.split(".")[-2], []).append(call.seconds)
    for handler, seconds in sorted(by_handler.items()):
        rows.append(
            {
                "name": f"  {handler} (median of {len(seconds)})",
                "value": statistics.median(seconds) * 1000,
                "unit": "ms",
                "ratio": None,
                "goal": "per step, in-process",
            }
        )

    lambda_gb_s = sum(c.seconds for c in invocations) * LAMBDA_MEMORY_GB
    counted = {
        "Lambda invocations": (len(invocations), LAMBDA_PER_REQUEST),
        "Step Functions state transitions": (transitions, SFN_PER_TRANSITION),
        "DynamoDB writes": (sum(calls[f"dynamodb.{op}"] for op in WRITES), DYNAMODB_PER_WRITE),
        "DynamoDB reads": (sum(calls[f"dynamodb.{op}"] for op in READS), DYNAMODB_PER_READ),
        "SNS publishes": (calls["sns.Publish"], SNS_PER_PUBLISH),
        "EventBridge report events": (1, EVENTS_PER_CUSTOM_EVENT),
        "PutMetricData calls": (1, CW_PER_PUT_METRIC_DATA),
    }
    total = lambda_gb_s * LAMBDA_PER_GB_SECOND
    for name, (count, price) in counted.items():
        total += count * price
        rows.append(
            {
                "name": f"per incident: {name}",
                "value": count,
                "unit": "count",
                "ratio": None,
                "goal": f"x ${price:.3g} each",
            }
        )
    datapoints = len(result.datapoints)
    metric_hours = datapoints * CW_PER_METRIC_MONTH / HOURS_PER_MONTH  # billed per hour seen
    total += metric_hours
    rows.append(
        {
            "name": "per incident: metric datapoints",
            "value": datapoints,
            "unit": "count",
            "ratio": None,
            "goal": "one metric-hour each",
        }
    )
    rows.append(
        {
            "name": "per incident: total at list prices",
            "value": total,
            "unit": "USD",
            "ratio": None,
            "goal": PRICES_AS_OF,
        }
    )

    nodes = 1000
    idle = (
        alarm_metrics * CW_PER_ALARM_METRIC_MONTH
        + dashboards * CW_PER_DASHBOARD_MONTH
        + KMS_PER_KEY_MONTH
    )
    per_step_zeros = nodes * 3 * CW_PER_METRIC_MONTH
    rows += [
        {
            "name": f"idle month, {nodes}-node fleet ({alarm_metrics} alarm metrics, "
            f"{dashboards} dashboard, key; no per-step metrics)",
            "value": idle,
            "unit": "USD",
            "ratio": idle / per_step_zeros,
            "goal": "ratio vs publishing zeros per instance (3 metrics x 1000 instances)",
        },
    ]
    return rows


def _to_approval(run: LocalRun, alarm: dict[str, Any] | None) -> str:
    """Report `alarm` (None: already reported), evaluate the alarms once and wait until the
    incident asks for approval; returns its id."""
    if alarm is not None:
        run.emitter(RANK_MAP).report(alarm)
    (delivery,) = [d for d in run.tick() if d.response and d.response.get("incident_id")]
    incident_id = str(delivery.response["incident_id"])
    run.wait_for(incident_id, "awaiting_approval")
    run.wait_for_notification("approve")
    run.inbox.clear()
    return incident_id


def _metrics_of(alarm: dict[str, Any]) -> int:
    """What CloudWatch bills a standard alarm for: one per metric it reads (a metric math
    alarm: each MetricStat; a Metrics Insights alarm at rest, with no series: counted as one)."""
    queries = alarm.get("Metrics") or []
    return max(1, sum(1 for q in queries if "MetricStat" in q))


def _fast_path_seconds(calls: list[Any]) -> float:
    """Handler time of the fast path's steps: the first store_report and isolate_node."""
    seconds = 0.0
    for module in FAST_PATH:
        found = [c for c in calls if c.handler.split(".")[-2] == module]
        if not found:
            raise RuntimeError(f"no {module} invocation: the report did not take the fast path")
        seconds += found[0].seconds
    return seconds


def _require_cordoned(run: LocalRun, incident_id: str) -> None:
    """The figure means something only if the node was in fact cordoned by the fast path."""
    incident = run.incident(incident_id)
    state = incident.isolation.state if incident and incident.isolation else None
    actions = [e.action for e in run.audit(incident_id)]
    if state != "isolated" or actions[:1] != ["incident_opened"] or "node_isolated" not in actions:
        raise RuntimeError(f"incident {incident_id} was not cordoned (isolation {state})")
    if run.audit(incident_id)[0].actor != "store_report":
        raise RuntimeError(f"incident {incident_id} was not opened by the report event")
    nodes = [KubeNode.from_json(raw) for raw in run.kube_api.nodes.values()]
    if incident is None or incident.instance_id not in {
        n.instance_id for n in nodes if n.unschedulable
    }:
        raise RuntimeError(f"the Kubernetes node of incident {incident_id} is not cordoned")


def _handler_seconds(calls: list[Any]) -> float:
    """Handler time up to the approval request; store_report runs beside the alarm path."""
    return sum(c.seconds for c in calls if c.handler.split(".")[-2] != "store_report")


def _counter(calls: Counter[str]) -> Any:
    def count(model: Any, **_: Any) -> None:
        calls[f"{model.service_model.service_name}.{model.name}"] += 1

    return count


def _executions(run: LocalRun) -> list[str]:
    client = run.session.client("stepfunctions")
    arns = []
    for machine in run.stack.state_machines.values():
        for execution in client.list_executions(stateMachineArn=machine.arn)["executions"]:
            arns.append(execution["executionArn"])
    return arns


def _transitions(run: LocalRun, execution_arn: str) -> int:
    """Step Functions bills each state entered."""
    client = run.session.client("stepfunctions")
    events = client.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
    return sum(1 for e in events if e["type"].endswith("StateEntered"))


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
