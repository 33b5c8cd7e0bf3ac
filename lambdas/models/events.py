"""The EventBridge events the pipeline consumes, parsed into typed values: what every event
has (`envelope`), and the `CloudWatch Alarm Contributor State Change` (source `aws.cloudwatch`):
one instance of one Metrics Insights alarm changed state. Shape:
`tests/events/contributor_alarm.json`; with `detail.muteDetail` when an alarm mute rule mutes
the alarm's actions (EventBridge still delivers the event):
`tests/events/contributor_alarm_muted.json`. The other event, the `SDC Report`, is
`sdc_remediation.lambdas.models.report`.

Every parser raises `MalformedEvent` naming the first missing or bad field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, TypeVar

from sdc_remediation.lambdas.models import _fields as f
from sdc_remediation.lambdas.models.errors import MalformedEvent
from trainer_emitter.contract import (
    Metric,
    is_instance_id,
    metric_for_alarm_name,
)

if TYPE_CHECKING:
    pass

T = TypeVar("T")

CONTRIBUTOR_SOURCE = "aws.cloudwatch"
CONTRIBUTOR_DETAIL_TYPE = "CloudWatch Alarm Contributor State Change"
ALARM_STATES = frozenset({"ALARM", "OK", "INSUFFICIENT_DATA"})

_QUERY_METRIC_RE = re.compile(r"SELECT\s+\w+\((\w+)\)", re.IGNORECASE)

MUTE_RULE_ARN_RE = re.compile(
    r"^arn:[a-z-]+:cloudwatch:[a-z0-9-]*:\d*:alarm-mute(?:-rule)?:(?P<name>[^:/\s]{1,255})$"
)
"""An alarm mute rule's ARN. The CloudWatch docs spell the resource `alarm-mute-rule` (the event
example, most IAM examples) and `alarm-mute` (some IAM examples): both are read."""

CLUSTER_NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
"""HyperPod's cluster name pattern (the `ClusterName` dimension carries it)."""
MAX_EVENT_ID = 256

MAX_EVENT_BYTES = 256 * 1024
"""EventBridge's limit for one event: anything larger did not come through EventBridge."""


def envelope(event: Any, source: str, detail_type: str) -> tuple[str, Mapping[str, Any]]:
    """The event's id and the event, as EventBridge delivers it from `source` with
    `detail_type`: an object no larger than EventBridge allows, with an id."""
    root = f.obj(event, "event")
    try:
        size = len(json.dumps(root, default=str).encode("utf-8"))
    except (TypeError, ValueError) as err:
        raise MalformedEvent("event", f"not JSON-serializable: {err}") from err
    if size > MAX_EVENT_BYTES:
        raise MalformedEvent("event", f"{size} bytes, more than EventBridge's {MAX_EVENT_BYTES}")
    if root.get("source") != source:
        raise MalformedEvent("source", f"expected {source!r}, got {short(root.get('source'))!r}")
    if root.get("detail-type") != detail_type:
        raise MalformedEvent(
            "detail-type", f"expected {detail_type!r}, got {short(root.get('detail-type'))!r}"
        )
    event_id = f.text(root, "id", "")
    if len(event_id) > MAX_EVENT_ID:
        raise MalformedEvent("id", f"longer than {MAX_EVENT_ID} characters")
    return event_id, root


EARLIEST: Final = datetime(2000, 1, 1, tzinfo=UTC)
LATEST: Final = datetime(2200, 1, 1, tzinfo=UTC)
"""The times an event or report may carry: nothing the pipeline receives was written before
2000 or after 2200, and the windows it computes from a time (hours, days either side) must not
overflow `datetime`. A time outside them is malformed, like any other bad field."""


def parse_time(value: str, path: str) -> datetime:
    """An ISO 8601 time as AWS writes it (`...Z`, `...+0000`, `...+00:00`), in UTC; any time
    that does not read, has no offset, cannot be moved to UTC (`9999-12-31T23:59:59-12:00`) or
    lies outside `EARLIEST`..`LATEST` raises MalformedEvent naming `path`."""
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError) as err:
        raise MalformedEvent(path, f"not an ISO 8601 time: {short(value)!r}") from err
    if parsed.tzinfo is None:
        raise MalformedEvent(path, f"time has no UTC offset: {short(value)!r}")
    try:
        utc = parsed.astimezone(UTC)
    except (OverflowError, ValueError) as err:
        raise MalformedEvent(path, f"time out of range: {short(value)!r}") from err
    if not EARLIEST <= utc < LATEST:
        raise MalformedEvent(
            path, f"time out of range {EARLIEST.year}..{LATEST.year}: {short(value)!r}"
        )
    return utc


@dataclass(frozen=True, slots=True)
class MuteDetail:
    """`detail.muteDetail`: an alarm mute rule mutes the alarm's actions, from `window_start` to
    `window_end`. The pipeline treats such an event as the pause switch: the incident is held."""

    rule_arn: str
    rule_name: str
    window_start: datetime
    window_end: datetime

    def to_json(self) -> dict[str, str]:
        return {
            "mute_rule": self.rule_name,
            "mute_rule_arn": self.rule_arn,
            "mute_window_start": self.window_start.isoformat(),
            "mute_window_end": self.window_end.isoformat(),
        }


def parse_mute_detail(value: Any, path: str = "detail.muteDetail") -> MuteDetail:
    """The documented shape: `{mutedByArn, muteWindowStart, muteWindowEnd}`; every field is
    required, the window must not end before it starts."""
    detail = f.obj(value, path)
    arn = f.text(detail, "mutedByArn", path)
    match = MUTE_RULE_ARN_RE.match(arn)
    if match is None:
        raise MalformedEvent(f"{path}.mutedByArn", f"not an alarm mute rule ARN: {short(arn)!r}")
    start = parse_time(f.text(detail, "muteWindowStart", path), f"{path}.muteWindowStart")
    end = parse_time(f.text(detail, "muteWindowEnd", path), f"{path}.muteWindowEnd")
    if end < start:
        raise MalformedEvent(
            f"{path}.muteWindowEnd",
            f"the mute window ends ({end.isoformat()}) before it starts ({start.isoformat()})",
        )
    return MuteDetail(rule_arn=arn, rule_name=match["name"], window_start=start, window_end=end)


@dataclass(frozen=True, slots=True)
class ContributorEvent:
    """One contributor (= one instance) of one SDC alarm changed state."""

    event_id: str
    alarm_name: str
    metric: Metric
    contributor_id: str
    cluster_name: str
    instance_id: str
    state: str
    reason: str
    state_at: datetime
    """When the contributor changed state (`detail.state.timestamp`)."""
    state_timestamp: str
    account: str | None
    region: str | None
    mute: MuteDetail | None = None
    """Set when an alarm mute rule mutes the alarm's actions (`detail.muteDetail`)."""

    @property
    def is_alarm(self) -> bool:
        return self.state == "ALARM"


def parse_contributor_event(event: Any) -> ContributorEvent:
    event_id, root = envelope(event, CONTRIBUTOR_SOURCE, CONTRIBUTOR_DETAIL_TYPE)
    detail = f.obj(f.get(root, "detail", ""), "detail")
    alarm_name = f.text(detail, "alarmName", "detail")
    contributor = f.obj(f.get(detail, "alarmContributor", "detail"), "detail.alarmContributor")
    attributes = f.obj(
        f.get(contributor, "attributes", "detail.alarmContributor"),
        "detail.alarmContributor.attributes",
    )
    cluster_name = hyperpod_cluster_name(
        f.text(attributes, "ClusterName", "detail.alarmContributor.attributes"),
        "detail.alarmContributor.attributes.ClusterName",
    )
    instance_id = f.text(attributes, "InstanceId", "detail.alarmContributor.attributes")
    if not is_instance_id(instance_id):
        raise MalformedEvent(
            "detail.alarmContributor.attributes.InstanceId",
            f"not an EC2 instance id: {short(instance_id)!r}",
        )
    state = f.obj(f.get(detail, "state", "detail"), "detail.state")
    value = f.text(state, "value", "detail.state")
    if value not in ALARM_STATES:
        raise MalformedEvent("detail.state.value", f"unknown alarm state {value!r}")
    timestamp = f.text(state, "timestamp", "detail.state")
    mute = detail.get("muteDetail")
    return ContributorEvent(
        event_id=event_id,
        alarm_name=alarm_name,
        metric=_metric_of(alarm_name, detail),
        contributor_id=f.text(contributor, "id", "detail.alarmContributor"),
        cluster_name=cluster_name,
        instance_id=instance_id,
        state=value,
        reason=f.nullable_text(state, "reason", "detail.state") or "",
        state_at=parse_time(timestamp, "detail.state.timestamp"),
        state_timestamp=timestamp,
        account=f.nullable_text(root, "account", ""),
        region=f.nullable_text(root, "region", ""),
        mute=None if "muteDetail" not in detail else parse_mute_detail(mute),
    )


def _metric_of(alarm_name: str, detail: Mapping[str, Any]) -> Metric:
    """The SDC metric behind the alarm: from its deployed name, else from its query."""
    metric = metric_for_alarm_name(alarm_name)
    if metric is not None:
        return metric
    configuration = detail.get("configuration")
    metrics = configuration.get("metrics") if isinstance(configuration, Mapping) else None
    for item in metrics if isinstance(metrics, list) else []:
        expression = item.get("expression") if isinstance(item, Mapping) else None
        match = _QUERY_METRIC_RE.search(expression) if isinstance(expression, str) else None
        if match and match.group(1) in {m.value for m in Metric}:
            return Metric(match.group(1))
    raise MalformedEvent("detail.alarmName", f"{short(alarm_name)!r} is not one of the SDC alarms")


def hyperpod_cluster_name(value: str, path: str) -> str:
    """`value`, a HyperPod cluster name (`CLUSTER_NAME_RE`)."""
    if not CLUSTER_NAME_RE.match(value):
        raise MalformedEvent(path, f"not a HyperPod cluster name: {short(value)!r}")
    return value


def short(value: Any) -> Any:
    """Raw input quoted in an error message, cut to a readable length."""
    return value[:100] if isinstance(value, str) else value
