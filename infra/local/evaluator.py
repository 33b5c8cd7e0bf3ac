"""A small stand-in for CloudWatch's evaluation of the deployed Metrics Insights alarms.

moto stores metric data but never evaluates alarms. This evaluator applies the deployed
alarms' semantics to what moto holds: the query's SCHEMA (exact dimension set), GROUP BY
ClusterName, InstanceId, MAX over the alarm's period, compared with its threshold; a contributor
that changes state produces a `CloudWatch Alarm Contributor State Change` event of the
documented shape (`tests/events/contributor_alarm.json`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sdc_remediation.infra.local.template import LocalStack
from sdc_remediation.infra.stack.template import ACCOUNT, REGION
from sdc_remediation.lambdas.models.events import CONTRIBUTOR_DETAIL_TYPE, CONTRIBUTOR_SOURCE

_QUERY = re.compile(
    r'^SELECT\s+MAX\((?P<metric>\w+)\)\s+FROM\s+SCHEMA\("(?P<ns>[^"]+)",\s*(?P<dims>[\w\s,]+)\)'
    r"\s+GROUP BY\s+(?P<group>[\w\s,]+)$"
)
_OPERATORS = {
    "GreaterThanThreshold": lambda v, t: v > t,
    "GreaterThanOrEqualToThreshold": lambda v, t: v >= t,
    "LessThanThreshold": lambda v, t: v < t,
    "LessThanOrEqualToThreshold": lambda v, t: v <= t,
}


@dataclass(frozen=True)
class InsightsQuery:
    """`SELECT MAX(<metric>) FROM SCHEMA("<namespace>", <dimensions>) GROUP BY <dimensions>`."""

    metric: str
    namespace: str
    dimensions: tuple[str, ...]

    @classmethod
    def parse(cls, expression: str) -> InsightsQuery | None:
        """The query's parts; None for any other expression (or GROUP BY other dimensions)."""
        match = _QUERY.match(expression.strip())
        if match is None:
            return None
        dims = tuple(d.strip() for d in match["dims"].split(","))
        group = tuple(d.strip() for d in match["group"].split(","))
        if dims != group:
            return None
        return cls(match["metric"], match["ns"], dims)


@dataclass(frozen=True)
class InsightsAlarm:
    name: str
    expression: str
    metric: str
    namespace: str
    dimensions: tuple[str, ...]
    period: int
    threshold: float
    operator: str
    description: str | None

    @classmethod
    def from_properties(cls, props: dict[str, Any]) -> InsightsAlarm | None:
        queries = [m for m in props.get("Metrics", []) if m.get("Expression")]
        if len(queries) != 1:
            return None
        query = queries[0]
        parsed = InsightsQuery.parse(query["Expression"])
        if parsed is None:
            return None
        return cls(
            name=props["AlarmName"],
            expression=query["Expression"],
            metric=parsed.metric,
            namespace=parsed.namespace,
            dimensions=parsed.dimensions,
            period=int(query.get("Period", 60)),
            threshold=float(props["Threshold"]),
            operator=props["ComparisonOperator"],
            description=props.get("AlarmDescription"),
        )


@dataclass(frozen=True)
class MuteRule:
    """A CloudWatch alarm mute rule, as the events of the alarms it mutes carry it."""

    name: str
    start: datetime
    end: datetime

    def mute_detail(self) -> dict[str, str]:
        """`detail.muteDetail` of the documented event (tests/events/contributor_alarm_muted)."""
        return {
            "mutedByArn": f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm-mute-rule:{self.name}",
            "muteWindowStart": _stamp(self.start),
            "muteWindowEnd": _stamp(self.end),
        }


@dataclass
class Evaluator:
    stack: LocalStack
    session: Any
    states: dict[tuple[str, str], str] = field(default_factory=dict)
    mutes: dict[str, MuteRule] = field(default_factory=dict)
    """Alarm name → the mute rule muting its actions: its events carry `muteDetail`, as
    EventBridge delivers them (a mute rule silences actions, not events)."""

    def mute(self, rule: MuteRule, alarm_names: list[str] | None = None) -> None:
        """Mute `alarm_names` (default: every detection alarm) with `rule`."""
        for name in alarm_names or [a.name for a in self.alarms()]:
            self.mutes[name] = rule

    def alarms(self) -> list[InsightsAlarm]:
        found = [InsightsAlarm.from_properties(p) for p in self.stack.alarms.values()]
        return [a for a in found if a is not None]

    def evaluate(self, now: datetime | None = None) -> list[dict[str, Any]]:
        """One evaluation round: the contributor events whose state changed since the last one."""
        now = now or datetime.now(UTC)
        cloudwatch = self.session.client("cloudwatch")
        events: list[dict[str, Any]] = []
        for alarm in self.alarms():
            listed = cloudwatch.list_metrics(Namespace=alarm.namespace, MetricName=alarm.metric)[
                "Metrics"
            ]
            for metric in listed:
                names = tuple(sorted(d["Name"] for d in metric["Dimensions"]))
                if names != tuple(sorted(alarm.dimensions)):
                    continue  # SCHEMA() matches the exact dimension set, nothing more or less
                attributes = {d["Name"]: d["Value"] for d in metric["Dimensions"]}
                points = cloudwatch.get_metric_statistics(
                    Namespace=alarm.namespace,
                    MetricName=alarm.metric,
                    Dimensions=metric["Dimensions"],
                    StartTime=now - timedelta(seconds=alarm.period),
                    EndTime=now + timedelta(seconds=1),
                    Period=alarm.period,
                    Statistics=["Maximum"],
                )["Datapoints"]
                value = max((p["Maximum"] for p in points), default=None)
                breaching = value is not None and _OPERATORS[alarm.operator](value, alarm.threshold)
                state = "ALARM" if breaching else "OK"
                key = (alarm.name, _contributor_id(attributes, alarm.dimensions))
                if self.states.get(key, "OK") != state:
                    self.states[key] = state
                    event = _event(alarm, key[1], attributes, state, value, now)
                    rule = self.mutes.get(alarm.name)
                    if rule is not None and rule.start <= now <= rule.end:
                        event["detail"]["muteDetail"] = rule.mute_detail()
                    events.append(event)
        return events


def _stamp(at: datetime) -> str:
    """CloudWatch's event time format: `2026-11-30T08:15:04.512+0000`."""
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}+0000"


def _contributor_id(attributes: dict[str, str], dimensions: tuple[str, ...]) -> str:
    text = "|".join(f"{d}={attributes[d]}" for d in dimensions)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _event(
    alarm: InsightsAlarm,
    contributor: str,
    attributes: dict[str, str],
    state: str,
    value: float | None,
    now: datetime,
) -> dict[str, Any]:
    stamp = _stamp(now)
    if state == "ALARM":
        reason = (
            f"Threshold Crossed: 1 datapoint was greater than the threshold ({alarm.threshold}). "
            f"The most recent datapoint which crossed the threshold: [{value} ({now:%d/%m/%y %H:%M:00})]."
        )
    else:
        reason = "Threshold Crossed: no datapoints were received for 1 period and 1 missing datapoint was treated as [NonBreaching]."
    configuration: dict[str, Any] = {
        "metrics": [
            {"id": "q1", "expression": alarm.expression, "returnData": True, "period": alarm.period}
        ]
    }
    if alarm.description:
        configuration["description"] = alarm.description
    return {
        "version": "0",
        "id": hashlib.sha256(
            f"{alarm.name}{contributor}{state}{now.isoformat()}".encode()
        ).hexdigest()[:32],
        "detail-type": CONTRIBUTOR_DETAIL_TYPE,
        "source": CONTRIBUTOR_SOURCE,
        "account": ACCOUNT,
        "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": REGION,
        "resources": [f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:{alarm.name}"],
        "detail": {
            "alarmName": alarm.name,
            "alarmContributor": {"id": contributor, "attributes": dict(attributes)},
            "state": {"value": state, "reason": reason, "timestamp": stamp},
            "configuration": configuration,
        },
    }
