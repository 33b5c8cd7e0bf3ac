"""The `SDC Report` event (source `sdc.trainer`): the full evidence the training job emitted.

Its detail is checked against the emitter's JSON Schema (`report_schema()` of
`trainer_emitter.contract`, compiled by fastjsonschema), then mapped to the typed model. A malformed
report raises `MalformedEvent` naming the first missing or bad field, with one exception: its
`checkpoints` (optional, only advice for the card) are read leniently: a malformed entry is
dropped and named in the report's errors, the report itself is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Any, Final, TypeVar

from sdc_remediation.lambdas.models.errors import MalformedEvent
from sdc_remediation.lambdas.models.events import envelope, hyperpod_cluster_name, parse_time
from trainer_emitter.contract import (
    MAX_EXACT_INTEGER,
    MAX_REPORT_CHECKPOINTS,
    MAX_REPORT_DEPTH,
    REPORT_DETAIL_TYPE,
    REPORT_SCHEMA_VERSIONS,
    REPORT_SOURCE,
    Check,
    Metric,
    Role,
    VerdictKind,
    report_schema,
)

if TYPE_CHECKING:
    from fastjsonschema import JsonSchemaValueException

T = TypeVar("T")


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
    last_audit_pass: int | None = None
    last_weight_check_pass: int | None = None
    location: str | None = None


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
    tokens_per_step: int | None = None
    """The tokens one step trains on (global batch size x sequence length), as the job gave
    it; None when it did not (and from older emitters): the rollback is then in steps only."""
    hang: Mapping[str, Any] | None = None
    """The hang watchdog's evidence (schema version 2, check `hang`), as received and checked."""
    straggler: Mapping[str, Any] | None = None
    """The straggler scores (schema version 2, check `straggler`), as received and checked."""
    received_at: str | None = None
    """When the pipeline received it, by its own clock (ISO 8601): what orders reports and
    moves windows. `emitted_at` is the reporter's claim, kept as data. None until received."""
    stale: bool = False
    """Emitted longer before it was received than the storm window: shown as such."""

    @property
    def order_key(self) -> str:
        """What orders reports: the pipeline's receive time, then the report id."""
        return report_order_key(self.received_at or self.emitted_at, self.report_id)

    def instance(self, instance_id: str) -> ReportInstance | None:
        return next((i for i in self.instances if i.instance_id == instance_id), None)

    def points_at(self, instance_id: str) -> bool:
        """The report names the instance a culprit or confirmed suspect (not only involved):
        it opens the instance's incident, and is stored apart when its evidence there is strong
        enough (`intake.pointing`). An ambiguous report points at no instance, whatever roles
        it gives (the emitter calls a report ambiguous when it names no culprit): it is as weak
        as one naming it involved."""
        found = self.instance(instance_id)
        return not self.ambiguous and found is not None and found.role in POINTING_ROLES


POINTING_ROLES: Final = frozenset({Role.CULPRIT, Role.CONFIRMED_SUSPECT})
"""The roles that point at an instance: a report opens a node-level incident for each instance
it names in one of them."""


@dataclass(frozen=True, slots=True)
class ReportEvent:
    event_id: str
    report: SdcReport


def parse_report_event(event: Any) -> ReportEvent:
    event_id, root = envelope(event, REPORT_SOURCE, REPORT_DETAIL_TYPE)
    return ReportEvent(event_id=event_id, report=parse_report(root.get("detail")))


def parse_report(detail: Any) -> SdcReport:
    """The report detail, checked against the report schema of its version, as the typed
    model. Its checkpoints are read leniently (`_checkpoints`)."""
    # a version this pipeline does not know is checked against version 1, which names it
    claimed = detail.get("schema_version") if isinstance(detail, Mapping) else None
    version = claimed if claimed in REPORT_SCHEMA_VERSIONS else REPORT_SCHEMA_VERSIONS[0]
    schema = _report_schema(version)
    schema.check(schema.report, detail, "detail")
    check_bounds(detail, "detail")
    checkpoints, dropped = _checkpoints(schema, detail.get("checkpoints"))
    return SdcReport(
        report_id=detail["report_id"],
        emitted_at=detail["emitted_at"],
        emitted=parse_time(detail["emitted_at"], "detail.emitted_at"),
        cluster_name=hyperpod_cluster_name(detail["cluster_name"], "detail.cluster_name"),
        job_name=detail["job_name"],
        namespace=detail["namespace"],
        step=whole_number(detail["step"]),
        check=_nullable(Check, detail["check"]),
        ambiguous=detail["ambiguous"],
        suspects=tuple(_suspect(item) for item in detail["suspects"]),
        instances=tuple(_instance(item) for item in detail["instances"]),
        nonfinite=whole_numbers(detail["nonfinite"]),
        mismatched_pairs=tuple(_pair(item) for item in detail["mismatched_pairs"]),
        culprits=whole_numbers(detail["culprits"]),
        verdicts=tuple(_verdict(item) for item in detail["verdicts"]),
        weight_suspects=_nullable(whole_numbers, detail["weight_suspects"]),
        suspect_window=_nullable(_pair, detail["suspect_window"]),
        last_audit_pass=whole_number(detail["last_audit_pass"]),
        last_weight_check_pass=whole_number(detail["last_weight_check_pass"]),
        errors=tuple(detail["errors"]) + dropped,
        detail=detail,
        checkpoints=checkpoints,
        tokens_per_step=whole_number(detail.get("tokens_per_step")),
        hang=detail.get("hang"),
        straggler=detail.get("straggler"),
    )


DYNAMODB_MAX_NUMBER = 9.9999999999999999999999999999999999999e125
DYNAMODB_MIN_NUMBER = 1e-130
"""The magnitudes a DynamoDB number holds (besides zero)."""


def check_bounds(value: Any, path: str) -> None:
    """What a JSON Schema cannot say of the free parts of a report (its `alarm`): nested at most
    MAX_REPORT_DEPTH levels, every integer within +-MAX_EXACT_INTEGER and every other number
    finite and within DynamoDB's range. Walked without recursion, so no nesting crashes it.
    Raises MalformedEvent naming the first field outside them."""
    pending: list[tuple[Any, str, int]] = [(value, path, 1)]
    while pending:
        node, where, depth = pending.pop()
        if isinstance(node, Mapping | list):
            if depth > MAX_REPORT_DEPTH:
                raise MalformedEvent(_clip(where), f"nested deeper than {MAX_REPORT_DEPTH} levels")
            items = node.items() if isinstance(node, Mapping) else enumerate(node)
            for key, child in items:
                step = f"{where}[{key}]" if isinstance(node, list) else f"{where}.{key}"
                pending.append((child, step, depth + 1))
        elif isinstance(node, bool) or node is None or isinstance(node, str):
            continue
        elif isinstance(node, int) and abs(node) > MAX_EXACT_INTEGER:
            raise MalformedEvent(
                _clip(where),
                f"an integer beyond +-{MAX_EXACT_INTEGER} (2^53 - 1, what JSON readers hold "
                f"exactly), got {_shown(node)}",
            )
        elif isinstance(node, float) and not (
            node == 0 or DYNAMODB_MIN_NUMBER <= abs(node) <= DYNAMODB_MAX_NUMBER
        ):
            raise MalformedEvent(
                _clip(where), f"a number outside what DynamoDB holds, got {_shown(node)}"
            )


def _clip(path: str) -> str:
    """A field path in an error, cut to a readable length."""
    return path if len(path) <= 200 else f"{path[:200]}..."


@dataclass(frozen=True, slots=True)
class _ReportSchema:
    """`trainer_emitter/schemas/sdc_report.v<version>.json`, compiled: the one definition of a
    report's shape the pipeline checks against (version 1: the SDC checks; version 2: version 1
    plus the hang and straggler kinds and their evidence)."""

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
def _report_schema(version: str) -> _ReportSchema:
    """Compiled once, on the first report: fastjsonschema generates a Python function from the
    schema (about 0.1 s), which a function that reads no report never pays for. Powertools'
    validation utility, over the same library, would compile it again on every call."""
    import fastjsonschema

    schema = report_schema(version)
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


def whole_numbers(values: Iterable[int | float]) -> tuple[int, ...]:
    """Integers as the model holds them (JSON Schema counts 3.0 as an integer): what a summary
    holds before it is stored reads as what DynamoDB gives back (3)."""
    return tuple(int(value) for value in values)


def whole_number(value: int | float | None) -> int | None:
    """An integer as the model holds it, or None (`whole_numbers`)."""
    return None if value is None else int(value)


def _pair(values: list[int | float]) -> tuple[int, int]:
    first, second = values
    return int(first), int(second)


def _instance(item: Mapping[str, Any]) -> ReportInstance:
    return ReportInstance(
        instance_id=item["instance_id"],
        metrics=tuple(Metric(m) for m in item["metrics"]),
        ranks=whole_numbers(item["ranks"]),
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
        third=whole_number(item["third"]),
        suspect=whole_number(item["suspect"]),
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
                last_audit_pass=whole_number(item.get("last_audit_pass")),
                last_weight_check_pass=whole_number(item.get("last_weight_check_pass")),
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


def _shown(value: Any) -> str:
    """A value in an error message, cut to a readable length."""
    text = repr(value)
    return text if len(text) <= 100 else f"{text[:100]}..."


def report_order_key(received_at: str, report_id: str) -> str:
    """The key that orders stored reports (`SdcReport.order_key`), from its two parts."""
    return f"{received_at}#{report_id}"
