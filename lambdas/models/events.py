"""The two EventBridge events the pipeline consumes, parsed into typed values.

- `CloudWatch Alarm Contributor State Change` (source `aws.cloudwatch`): one instance of one
  Metrics Insights alarm changed state. Shape: `tests/events/contributor_alarm.json`; with
  `detail.muteDetail` when an alarm mute rule mutes the alarm's actions (EventBridge still
  delivers the event): `tests/events/contributor_alarm_muted.json`.
- `SDC Report` (source `sdc.trainer`): the full evidence the training job emitted. Its detail
  is checked against the emitter's JSON Schema (`trainer_emitter.contract.report_schema()`,
  compiled by fastjsonschema), then mapped to the typed model.

Every parser raises `MalformedEvent` naming the first missing or bad field, with one exception:
a report's `checkpoints` (optional, only advice for the card) are read leniently: a malformed
entry is dropped and named in the report's errors, the report itself is kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

from lambdas.models import _fields as f
from lambdas.models.errors import MalformedEvent
from trainer_emitter.contract import (
    MAX_REPORT_CHECKPOINTS,
    REPORT_DETAIL_TYPE,
    REPORT_SOURCE,
    Check,
    Metric,
    Role,
    VerdictKind,
    is_instance_id,
    metric_for_alarm_name,
    report_schema,
)

if TYPE_CHECKING:
    from fastjsonschema import JsonSchemaValueException

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
    """As received: the stored report's sort key and the evidence's time."""
    emitted: datetime
    """`emitted_at` in UTC: the time of the incidents the report opens."""
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
    """The report detail, checked against the report schema, as the typed model. Its
    checkpoints are read leniently (`_checkpoints`)."""
    schema = _report_schema()
    schema.check(schema.report, detail, "detail")
    checkpoints, dropped = _checkpoints(schema, detail.get("checkpoints"))
    return SdcReport(
        report_id=detail["report_id"],
        emitted_at=detail["emitted_at"],
        emitted=parse_time(detail["emitted_at"], "detail.emitted_at"),
        cluster_name=_cluster_name(detail["cluster_name"], "detail.cluster_name"),
        job_name=detail["job_name"],
        namespace=detail["namespace"],
        step=_nullable(int, detail["step"]),
        check=_nullable(Check, detail["check"]),
        ambiguous=detail["ambiguous"],
        suspects=tuple(_suspect(item) for item in detail["suspects"]),
        instances=tuple(_instance(item) for item in detail["instances"]),
        nonfinite=_ranks(detail["nonfinite"]),
        mismatched_pairs=tuple(_pair(item) for item in detail["mismatched_pairs"]),
        culprits=_ranks(detail["culprits"]),
        verdicts=tuple(_verdict(item) for item in detail["verdicts"]),
        weight_suspects=_nullable(_ranks, detail["weight_suspects"]),
        suspect_window=_nullable(_pair, detail["suspect_window"]),
        last_audit_pass=_nullable(int, detail["last_audit_pass"]),
        last_weight_check_pass=_nullable(int, detail["last_weight_check_pass"]),
        errors=tuple(detail["errors"]) + dropped,
        detail=detail,
        checkpoints=checkpoints,
    )


@dataclass(frozen=True, slots=True)
class _ReportSchema:
    """`trainer_emitter/schemas/sdc_report.v1.json`, compiled: the one definition of a
    report's shape the pipeline checks against."""

    report: Callable[..., Any]
    """The whole detail but its checkpoints (any value passes there)."""
    checkpoint: Callable[..., Any]
    """One entry of `checkpoints`, of which only the step is required."""
    error: type[JsonSchemaValueException]

    def check(self, validate: Callable[..., Any], value: Any, path: str) -> None:
        """`validate(value)`, or the schema's first complaint as a MalformedEvent naming the
        field (a dotted path under `path`) and why."""
        try:
            validate(value, name_prefix=path)
        except self.error as err:
            raise _malformed(err) from None


@cache
def _report_schema() -> _ReportSchema:
    """Compiled once, on the first report: fastjsonschema generates a Python function from the
    schema (about 0.1 s), which a function that reads no report never pays for. Powertools'
    validation utility, over the same library, would compile it again on every call."""
    import fastjsonschema

    schema = report_schema()
    defs = schema["$defs"]
    whole = {**schema, "properties": {**schema["properties"], "checkpoints": {}}}
    # A tag or location left out of a checkpoint reads as unknown.
    one = {**schema["properties"]["checkpoints"]["items"], "required": ["step"]}
    return _ReportSchema(
        report=fastjsonschema.compile(_inlined(whole, defs)),
        checkpoint=fastjsonschema.compile(_inlined(one, defs)),
        error=fastjsonschema.JsonSchemaValueException,
    )


def _inlined(node: Any, defs: Mapping[str, Any]) -> Any:
    """A copy of `node` with each `{"$ref": "#/$defs/name"}` replaced by that definition. The
    code fastjsonschema generates for a `$ref` builds the field's name on every call, failing or
    not: inlined, a valid report is checked about five times faster. A copy, too, because
    fastjsonschema rewrites the refs of what it compiles (`report_schema()` is shared)."""
    if isinstance(node, Mapping):
        if "$ref" in node:
            return _inlined(defs[node["$ref"].removeprefix("#/$defs/")], defs)
        return {key: _inlined(value, defs) for key, value in node.items() if key != "$defs"}
    if isinstance(node, list):
        return [_inlined(item, defs) for item in node]
    return node


def _malformed(err: JsonSchemaValueException) -> MalformedEvent:
    """A fastjsonschema error (`name` is the field's dotted path, `message` starts with it)."""
    field = str(err.name)
    if err.rule == "required":
        missing = next(key for key in err.rule_definition if key not in err.value)
        return MalformedEvent(f"{field}.{missing}", "missing")
    if err.rule == "additionalProperties":
        known = err.definition.get("properties", {})
        unknown = sorted(key for key in err.value if key not in known)
        return MalformedEvent(f"{field}.{unknown[0]}", "not a field of the schema")
    reason = str(err.message).removeprefix(f"{field} ")
    return MalformedEvent(field, f"{reason}, got {_shown(err.value)}")


def _nullable(read: Callable[[Any], T], value: Any) -> T | None:
    return None if value is None else read(value)


def _ranks(values: list[int | float]) -> tuple[int, ...]:
    """Integers as the model holds them (JSON Schema counts 3.0 as an integer)."""
    return tuple(int(value) for value in values)


def _pair(values: list[int | float]) -> tuple[int, int]:
    first, second = values
    return int(first), int(second)


def _instance(item: Mapping[str, Any]) -> ReportInstance:
    return ReportInstance(
        instance_id=item["instance_id"],
        metrics=tuple(Metric(m) for m in item["metrics"]),
        ranks=_ranks(item["ranks"]),
        role=Role(item["role"]),
    )


def _suspect(item: Mapping[str, Any]) -> ReportSuspect:
    return ReportSuspect(
        rank=int(item["rank"]),
        role=Role(item["role"]),
        mapped=item["mapped"],
        instance_id=item["instance_id"],
        node_name=item["node_name"],
        gpu_uuid=item["gpu_uuid"],
        reasons=tuple(item["reasons"]),
    )


def _verdict(item: Mapping[str, Any]) -> Verdict:
    return Verdict(
        pair=_pair(item["pair"]),
        third=_nullable(int, item["third"]),
        suspect=_nullable(int, item["suspect"]),
        kind=VerdictKind(item["kind"]),
    )


def _checkpoints(
    schema: _ReportSchema, value: Any
) -> tuple[tuple[ReportCheckpoint, ...], tuple[str, ...]]:
    """The report's checkpoints and a note for each one dropped: a bad entry never refuses the
    report (it only feeds the card's resume advice). Newest MAX_REPORT_CHECKPOINTS kept."""
    if value is None:
        return (), ()
    if not isinstance(value, list):
        return (), (f"detail.checkpoints: expected an array, got {type(value).__name__}; ignored",)
    kept: list[ReportCheckpoint] = []
    notes: list[str] = []
    for i, item in enumerate(value):
        try:
            schema.check(schema.checkpoint, item, f"detail.checkpoints[{i}]")
        except MalformedEvent as err:
            notes.append(f"{err}; checkpoint dropped")
            continue
        kept.append(
            ReportCheckpoint(
                step=int(item["step"]),
                last_audit_pass=_nullable(int, item.get("last_audit_pass")),
                last_weight_check_pass=_nullable(int, item.get("last_weight_check_pass")),
                location=item.get("location"),
            )
        )
    kept.sort(key=lambda c: c.step)
    if len(kept) > MAX_REPORT_CHECKPOINTS:
        notes.append(
            f"detail.checkpoints: {len(kept)} entries, only the newest "
            f"{MAX_REPORT_CHECKPOINTS} kept"
        )
        kept = kept[-MAX_REPORT_CHECKPOINTS:]
    return tuple(kept), tuple(notes)


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


def _shown(value: Any) -> str:
    """A value in an error message, cut to a readable length."""
    text = repr(value)
    return text if len(text) <= 100 else f"{text[:100]}..."
