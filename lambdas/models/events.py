"""The two EventBridge events the pipeline consumes, parsed into typed values.

- `CloudWatch Alarm Contributor State Change` (source `aws.cloudwatch`): one instance of one
  Metrics Insights alarm changed state. Shape: `tests/events/contributor_alarm.json`; with
  `detail.muteDetail` when an alarm mute rule mutes the alarm's actions (EventBridge still
  delivers the event): `tests/events/contributor_alarm_muted.json`.
- `SDC Report` (source `sdc.trainer`): the full evidence the training job emitted. Shape:
  `trainer_emitter.contract.report_schema()`. Lambda code checks the fields it uses by hand
  (the full JSON Schema is checked in tests, where jsonschema is installed).

Every parser raises `MalformedEvent` naming the first missing or bad field, with one exception:
a report's `checkpoints` (optional, only advice for the card) are read leniently: a malformed
entry is dropped and named in the report's errors, the report itself is kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lambdas.models import _fields as f
from lambdas.models.errors import MalformedEvent
from trainer_emitter.contract import (
    MAX_CHECKPOINT_LOCATION,
    MAX_REPORT_CHECKPOINTS,
    REPORT_DETAIL_TYPE,
    REPORT_SCHEMA_VERSION,
    REPORT_SOURCE,
    Check,
    Metric,
    Role,
    VerdictKind,
    is_instance_id,
    metric_for_alarm_name,
)

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


def _within_size(root: Mapping[str, Any]) -> None:
    try:
        size = len(json.dumps(root, default=str).encode("utf-8"))
    except (TypeError, ValueError) as err:
        raise MalformedEvent("event", f"not JSON-serializable: {err}") from err
    if size > MAX_EVENT_BYTES:
        raise MalformedEvent("event", f"{size} bytes, more than EventBridge's {MAX_EVENT_BYTES}")


def parse_time(value: str, path: str) -> datetime:
    """An ISO 8601 time as AWS writes it (`...Z`, `...+0000`, `...+00:00`), in UTC."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as err:
        raise MalformedEvent(path, f"not an ISO 8601 time: {value!r}") from err
    if parsed.tzinfo is None:
        raise MalformedEvent(path, f"time has no UTC offset: {value!r}")
    return parsed.astimezone(UTC)


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
        raise MalformedEvent(f"{path}.mutedByArn", f"not an alarm mute rule ARN: {_short(arn)!r}")
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
    root = f.obj(event, "event")
    _within_size(root)
    if root.get("source") != CONTRIBUTOR_SOURCE:
        raise MalformedEvent(
            "source", f"expected {CONTRIBUTOR_SOURCE!r}, got {_short(root.get('source'))!r}"
        )
    detail_type = root.get("detail-type")
    if detail_type != CONTRIBUTOR_DETAIL_TYPE:
        raise MalformedEvent(
            "detail-type", f"expected {CONTRIBUTOR_DETAIL_TYPE!r}, got {_short(detail_type)!r}"
        )
    event_id = _event_id(root)
    detail = f.obj(f.get(root, "detail", ""), "detail")
    alarm_name = f.text(detail, "alarmName", "detail")
    contributor = f.obj(f.get(detail, "alarmContributor", "detail"), "detail.alarmContributor")
    attributes = f.obj(
        f.get(contributor, "attributes", "detail.alarmContributor"),
        "detail.alarmContributor.attributes",
    )
    cluster_name = _cluster_name(
        f.text(attributes, "ClusterName", "detail.alarmContributor.attributes"),
        "detail.alarmContributor.attributes.ClusterName",
    )
    instance_id = f.text(attributes, "InstanceId", "detail.alarmContributor.attributes")
    if not is_instance_id(instance_id):
        raise MalformedEvent(
            "detail.alarmContributor.attributes.InstanceId",
            f"not an EC2 instance id: {_short(instance_id)!r}",
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
    raise MalformedEvent("detail.alarmName", f"{_short(alarm_name)!r} is not one of the SDC alarms")


@dataclass(frozen=True, slots=True)
class ReportInstance:
    """One instance that got datapoints: exactly what the emitter published as metrics."""

    instance_id: str
    metrics: tuple[Metric, ...]
    ranks: tuple[int, ...]
    role: Role


@dataclass(frozen=True, slots=True)
class ReportSuspect:
    rank: int
    role: Role
    mapped: bool
    instance_id: str | None
    node_name: str | None
    gpu_uuid: str | None
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Verdict:
    pair: tuple[int, int]
    third: int | None
    suspect: int | None
    kind: VerdictKind


@dataclass(frozen=True, slots=True)
class ReportCheckpoint:
    """A checkpoint the job saved or knew of, with the tags saved with it."""

    step: int
    last_audit_pass: int | None
    last_weight_check_pass: int | None
    location: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "last_audit_pass": self.last_audit_pass,
            "last_weight_check_pass": self.last_weight_check_pass,
            "location": self.location,
        }


@dataclass(frozen=True, slots=True)
class SdcReport:
    """The `SDC Report` detail (schema version 1), the fields the pipeline uses."""

    report_id: str
    emitted_at: str
    cluster_name: str
    job_name: str | None
    namespace: str
    step: int | None
    check: Check | None
    ambiguous: bool
    suspects: tuple[ReportSuspect, ...]
    instances: tuple[ReportInstance, ...]
    nonfinite: tuple[int, ...]
    mismatched_pairs: tuple[tuple[int, int], ...]
    culprits: tuple[int, ...]
    verdicts: tuple[Verdict, ...]
    weight_suspects: tuple[int, ...] | None
    suspect_window: tuple[int, int] | None
    last_audit_pass: int | None
    last_weight_check_pass: int | None
    errors: tuple[str, ...]
    """The emitter's errors, then what the pipeline dropped while reading (checkpoints)."""
    detail: Mapping[str, Any]
    """The detail as received, stored unchanged."""
    checkpoints: tuple[ReportCheckpoint, ...] = ()
    """Oldest first; empty when the report names none (older emitters)."""

    def instance(self, instance_id: str) -> ReportInstance | None:
        return next((i for i in self.instances if i.instance_id == instance_id), None)


@dataclass(frozen=True, slots=True)
class ReportEvent:
    event_id: str
    report: SdcReport


def parse_report_event(event: Any) -> ReportEvent:
    root = f.obj(event, "event")
    _within_size(root)
    if root.get("source") != REPORT_SOURCE:
        raise MalformedEvent(
            "source", f"expected {REPORT_SOURCE!r}, got {_short(root.get('source'))!r}"
        )
    if root.get("detail-type") != REPORT_DETAIL_TYPE:
        raise MalformedEvent(
            "detail-type",
            f"expected {REPORT_DETAIL_TYPE!r}, got {_short(root.get('detail-type'))!r}",
        )
    return ReportEvent(event_id=_event_id(root), report=parse_report(root.get("detail")))


def parse_report(detail: Any) -> SdcReport:
    """A structural check of the report detail: every field the pipeline reads."""
    d = f.obj(detail, "detail")
    p = "detail"
    version = f.get(d, "schema_version", p)
    if version != REPORT_SCHEMA_VERSION:
        raise MalformedEvent(
            "detail.schema_version", f"expected {REPORT_SCHEMA_VERSION!r}, got {version!r}"
        )
    report_id = f.text(d, "report_id", p)
    if not 8 <= len(report_id) <= 64:
        raise MalformedEvent("detail.report_id", "expected 8 to 64 characters")
    emitted_at = f.text(d, "emitted_at", p)
    parse_time(emitted_at, "detail.emitted_at")
    checkpoints, dropped = _checkpoints(d.get("checkpoints"))
    return SdcReport(
        report_id=report_id,
        emitted_at=emitted_at,
        cluster_name=_cluster_name(f.text(d, "cluster_name", p), "detail.cluster_name"),
        job_name=f.nullable_text(d, "job_name", p),
        namespace=f.text(d, "namespace", p),
        step=f.integer(f.get(d, "step", p), "detail.step", nullable=True),
        check=_check(f.get(d, "check", p)),
        ambiguous=f.boolean(f.get(d, "ambiguous", p), "detail.ambiguous"),
        suspects=tuple(
            _suspect(item, f"detail.suspects[{i}]")
            for i, item in enumerate(f.array(f.get(d, "suspects", p), "detail.suspects"))
        ),
        instances=tuple(
            _instance(item, f"detail.instances[{i}]")
            for i, item in enumerate(f.array(f.get(d, "instances", p), "detail.instances"))
        ),
        nonfinite=f.ranks(f.get(d, "nonfinite", p), "detail.nonfinite"),
        mismatched_pairs=tuple(
            _pair(item, f"detail.mismatched_pairs[{i}]")
            for i, item in enumerate(
                f.array(f.get(d, "mismatched_pairs", p), "detail.mismatched_pairs")
            )
        ),
        culprits=f.ranks(f.get(d, "culprits", p), "detail.culprits"),
        verdicts=tuple(
            _verdict(item, f"detail.verdicts[{i}]")
            for i, item in enumerate(f.array(f.get(d, "verdicts", p), "detail.verdicts"))
        ),
        weight_suspects=_nullable_ranks(f.get(d, "weight_suspects", p), "detail.weight_suspects"),
        suspect_window=_window(f.get(d, "suspect_window", p)),
        last_audit_pass=f.integer(
            f.get(d, "last_audit_pass", p), "detail.last_audit_pass", nullable=True
        ),
        last_weight_check_pass=f.integer(
            f.get(d, "last_weight_check_pass", p), "detail.last_weight_check_pass", nullable=True
        ),
        errors=tuple(
            str(e) for e in f.array(f.get(d, "errors", p), "detail.errors") if isinstance(e, str)
        )
        + dropped,
        detail=d,
        checkpoints=checkpoints,
    )


def _check(value: Any) -> Check | None:
    if value is None:
        return None
    try:
        return Check(value)
    except ValueError as err:
        raise MalformedEvent("detail.check", f"unknown check {value!r}") from err


def _role(value: Any, path: str) -> Role:
    try:
        return Role(value)
    except ValueError as err:
        raise MalformedEvent(path, f"unknown role {value!r}") from err


def _metrics(value: Any, path: str) -> tuple[Metric, ...]:
    out = []
    for i, item in enumerate(f.array(value, path)):
        try:
            out.append(Metric(item))
        except ValueError as err:
            raise MalformedEvent(f"{path}[{i}]", f"unknown metric {item!r}") from err
    return tuple(out)


def _instance(value: Any, path: str) -> ReportInstance:
    item = f.obj(value, path)
    instance_id = f.text(item, "instance_id", path)
    if not is_instance_id(instance_id):
        raise MalformedEvent(f"{path}.instance_id", f"not an EC2 instance id: {instance_id!r}")
    return ReportInstance(
        instance_id=instance_id,
        metrics=_metrics(f.get(item, "metrics", path), f"{path}.metrics"),
        ranks=f.ranks(f.get(item, "ranks", path), f"{path}.ranks"),
        role=_role(f.get(item, "role", path), f"{path}.role"),
    )


def _suspect(value: Any, path: str) -> ReportSuspect:
    item = f.obj(value, path)
    instance_id = f.nullable_text(item, "instance_id", path)
    if instance_id is not None and not is_instance_id(instance_id):
        raise MalformedEvent(f"{path}.instance_id", f"not an EC2 instance id: {instance_id!r}")
    return ReportSuspect(
        rank=f.rank(f.get(item, "rank", path), f"{path}.rank"),
        role=_role(f.get(item, "role", path), f"{path}.role"),
        mapped=f.boolean(f.get(item, "mapped", path), f"{path}.mapped"),
        instance_id=instance_id,
        node_name=f.nullable_text(item, "node_name", path),
        gpu_uuid=f.nullable_text(item, "gpu_uuid", path),
        reasons=tuple(str(r) for r in f.array(item.get("reasons", []), f"{path}.reasons")),
    )


def _pair(value: Any, path: str) -> tuple[int, int]:
    items = f.ranks(value, path)
    if len(items) != 2:
        raise MalformedEvent(path, f"expected a pair of ranks, got {len(items)} items")
    return items[0], items[1]


def _verdict(value: Any, path: str) -> Verdict:
    item = f.obj(value, path)
    raw_kind = f.get(item, "kind", path)
    try:
        kind = VerdictKind(raw_kind)
    except ValueError as err:
        raise MalformedEvent(f"{path}.kind", f"unknown verdict kind {raw_kind!r}") from err
    return Verdict(
        pair=_pair(f.get(item, "pair", path), f"{path}.pair"),
        third=f.integer(f.get(item, "third", path), f"{path}.third", nullable=True),
        suspect=f.integer(f.get(item, "suspect", path), f"{path}.suspect", nullable=True),
        kind=kind,
    )


def _nullable_ranks(value: Any, path: str) -> tuple[int, ...] | None:
    return None if value is None else f.ranks(value, path)


def _window(value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    items = f.ranks(value, "detail.suspect_window")
    if len(items) != 2:
        raise MalformedEvent("detail.suspect_window", "expected [first, last]")
    return items[0], items[1]


def _checkpoints(value: Any) -> tuple[tuple[ReportCheckpoint, ...], tuple[str, ...]]:
    """The report's checkpoints and a note for each one dropped: a bad entry never refuses the
    report (it only feeds the card's resume advice). Newest MAX_REPORT_CHECKPOINTS kept."""
    if value is None:
        return (), ()
    if not isinstance(value, list):
        return (), (f"detail.checkpoints: expected an array, got {type(value).__name__}; ignored",)
    kept: list[ReportCheckpoint] = []
    notes: list[str] = []
    for i, item in enumerate(value):
        path = f"detail.checkpoints[{i}]"
        try:
            kept.append(_checkpoint(item, path))
        except MalformedEvent as err:
            notes.append(f"{err}; checkpoint dropped")
    kept.sort(key=lambda c: c.step)
    if len(kept) > MAX_REPORT_CHECKPOINTS:
        notes.append(
            f"detail.checkpoints: {len(kept)} entries, only the newest "
            f"{MAX_REPORT_CHECKPOINTS} kept"
        )
        kept = kept[-MAX_REPORT_CHECKPOINTS:]
    return tuple(kept), tuple(notes)


def _checkpoint(value: Any, path: str) -> ReportCheckpoint:
    item = f.obj(value, path)
    location = f.nullable_text(item, "location", path)
    if location is not None and not 0 < len(location) <= MAX_CHECKPOINT_LOCATION:
        raise MalformedEvent(
            f"{path}.location", f"expected 1 to {MAX_CHECKPOINT_LOCATION} characters"
        )
    return ReportCheckpoint(
        step=f.rank(f.get(item, "step", path), f"{path}.step"),
        last_audit_pass=f.integer(
            item.get("last_audit_pass"), f"{path}.last_audit_pass", nullable=True
        ),
        last_weight_check_pass=f.integer(
            item.get("last_weight_check_pass"), f"{path}.last_weight_check_pass", nullable=True
        ),
        location=location,
    )


def _cluster_name(value: str, path: str) -> str:
    if not CLUSTER_NAME_RE.match(value):
        raise MalformedEvent(path, f"not a HyperPod cluster name: {_short(value)!r}")
    return value


def _event_id(root: Mapping[str, Any]) -> str:
    event_id = f.text(root, "id", "")
    if len(event_id) > MAX_EVENT_ID:
        raise MalformedEvent("id", f"longer than {MAX_EVENT_ID} characters")
    return event_id


def _short(value: Any) -> Any:
    """Raw input quoted in an error message, cut to a readable length."""
    return value[:100] if isinstance(value, str) else value
