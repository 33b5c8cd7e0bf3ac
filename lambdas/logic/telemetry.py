"""Hardware telemetry for the approval card: what the suspect GPU's own counters recorded.

Before replacing a node, operators look at its GPUs' hardware counters. An XID, a failed or
pending row remap, retired pages, rising ECC counts, PCIe replays, NVLink errors or hardware
throttling raise confidence that the hardware is at fault. A clean panel does not clear it:
silent data corruption often leaves no trace in any counter (that is why the in-training checks
exist), and the card says so.

What is read: dcgm-exporter's series, which the HyperPod observability add-on writes to the
cluster's Amazon Managed Service for Prometheus workspace (`sdc:telemetry`), by the names the
exporter gives them (`FAMILIES`). dcgm-exporter up to 4.8 exports DCGM's legacy field names
(`DCGM_FI_DEV_ROW_REMAP_FAILURE`); 4.9 renamed them to DCGM 4.7's (`DCGM_FI_DEV_ROW_REMAP_FAILED`;
DCGM's dcgm_fields.h lists each old name as an alias of its new one): both are asked for.

For which node: a series names its node in dcgm-exporter's `Hostname` label (`hostname` since
4.8.3), which on Kubernetes is the node name (`NODE_NAME` from the downward API), else the
exporter's host name. A series belongs to the suspect node when that label is one of the node's
Kubernetes names the incident knows (the node isolation found by providerID, the report's
`node_name`), or contains its instance id as a whole word (`hyperpod-i-…`). A cluster whose
series name nodes in another label sets `nodeLabel`. For which GPUs: the `UUID` label, when the
reports name the suspect ranks' GPU UUIDs; otherwise every GPU of the node.

When: from one hour before the first evidence (the report names its suspect window in training
steps, not clock time; the report and the alarm come right after it) to two minutes after the
last (scrapes lag), at most six hours, never past now. `query_range` steps are at least 15 s
and at most 480 per series: times are "first seen at", to within one step.

What counts as a signal: any XID; a row remap failed or pending; a page retirement pending;
a count that rose in the window (remapped rows, retired pages, ECC, PCIe replays, NVLink
errors); hardware throttling (HW slowdown, HW or SW thermal slowdown, HW power brake). A
non-zero lifetime count of uncorrectable faults that did not change in the window is shown as
history, not as a signal; the hottest temperature seen is context.

`check(deps, incident, now)` never raises: not configured, unreachable, refused, slow, a bad
answer: the record says so in one line, and the approval request goes on.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from lambdas.logic import evidence
from lambdas.logic.ports import Deps
from lambdas.models.errors import TelemetryBadAnswer, TelemetryError
from lambdas.models.events import parse_time
from lambdas.models.incident import Incident
from lambdas.models.settings import TelemetryWorkspace
from lambdas.models.telemetry import (
    Severity,
    TelemetryFinding,
    TelemetryRecord,
    TelemetryState,
)

LOOKBACK: Final = timedelta(hours=1)
AFTER_LAST_EVIDENCE: Final = timedelta(minutes=2)
MAX_WINDOW: Final = timedelta(hours=6)
MIN_STEP_SECONDS: Final = 15
MAX_POINTS: Final = 480
NODE_LABELS: Final = ("Hostname", "hostname")
"""dcgm-exporter's node label: `Hostname` up to 4.8.2, `hostname` since 4.8.3."""
GPU_LABELS: Final = ("UUID", "uuid")
"""dcgm-exporter's GPU UUID label (`uuid` with its `--use-old-namespace` option)."""
DCGM_BLANK: Final = float(0x7FFFFFFFFFFFFFF0)
"""DCGM_INT64_BLANK: DCGM's "no value" (and the values above it); never a reading."""
SHOWN_SIGNALS: Final = 3
"""Signals named in the one-line summary (the card lists them all)."""


class Kind(StrEnum):
    XID = "xid"
    FLAG = "flag"
    COUNT = "count"
    CLOCKS = "clocks"
    TEMPERATURE = "temperature"


@dataclass(frozen=True, slots=True)
class Family:
    key: str
    names: tuple[str, ...]
    """As dcgm-exporter exports it: its legacy name first (up to 4.8), DCGM 4.7's (4.9 on)."""
    kind: Kind
    words: str
    short: str
    """A name for lists ("not exported: ...")."""
    history: bool = False
    """A non-zero lifetime count is worth showing even when it did not change in the window."""


FAMILIES: Final = (
    Family(
        "xid", ("DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERROR"), Kind.XID, "XID errors", "XID"
    ),
    Family(
        "row_remap_failed",
        ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_ROW_REMAP_FAILED"),
        Kind.FLAG,
        "row remap FAILED (no spare row left to repair its memory)",
        "row remap failure",
    ),
    Family(
        "row_remap_pending",
        ("DCGM_FI_DEV_ROW_REMAP_PENDING",),
        Kind.FLAG,
        "row remap pending (a GPU reset applies it)",
        "row remap pending",
    ),
    Family(
        "retired_pending",
        ("DCGM_FI_DEV_RETIRED_PENDING", "DCGM_FI_DEV_PAGE_RETIRED_PENDING"),
        Kind.FLAG,
        "page retirement pending (a GPU reset applies it)",
        "retirement pending",
    ),
    Family(
        "uncorrectable_remapped_rows",
        ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL"),
        Kind.COUNT,
        "rows remapped for uncorrectable errors",
        "uncorrectable remapped rows",
        history=True,
    ),
    Family(
        "correctable_remapped_rows",
        ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL"),
        Kind.COUNT,
        "rows remapped for correctable errors",
        "correctable remapped rows",
    ),
    Family(
        "retired_dbe",
        ("DCGM_FI_DEV_RETIRED_DBE", "DCGM_FI_DEV_PAGE_RETIRED_DBE_TOTAL"),
        Kind.COUNT,
        "pages retired for double-bit errors",
        "retired pages (DBE)",
        history=True,
    ),
    Family(
        "retired_sbe",
        ("DCGM_FI_DEV_RETIRED_SBE", "DCGM_FI_DEV_PAGE_RETIRED_SBE_TOTAL"),
        Kind.COUNT,
        "pages retired for single-bit errors",
        "retired pages (SBE)",
    ),
    Family(
        "ecc_dbe",
        ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",),
        Kind.COUNT,
        "uncorrectable (double-bit) ECC errors since the driver loaded",
        "ECC DBE total",
        history=True,
    ),
    Family(
        "ecc_sbe",
        ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",),
        Kind.COUNT,
        "correctable (single-bit) ECC errors",
        "ECC SBE total",
    ),
    Family(
        "pcie_replay",
        ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_PCIE_REPLAY_TOTAL"),
        Kind.COUNT,
        "PCIe replays",
        "PCIe replays",
    ),
    Family(
        "nvlink_crc_flit",
        (
            "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
            "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_TOTAL",
        ),
        Kind.COUNT,
        "NVLink flow-control CRC errors",
        "NVLink CRC flit errors",
    ),
    Family(
        "nvlink_crc_data",
        (
            "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
            "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_TOTAL",
        ),
        Kind.COUNT,
        "NVLink data CRC errors",
        "NVLink CRC data errors",
    ),
    Family(
        "nvlink_replay",
        ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_TOTAL"),
        Kind.COUNT,
        "NVLink replays",
        "NVLink replays",
    ),
    Family(
        "nvlink_recovery",
        (
            "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
            "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_TOTAL",
        ),
        Kind.COUNT,
        "NVLink recoveries",
        "NVLink recoveries",
    ),
    Family(
        "clocks",
        ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"),
        Kind.CLOCKS,
        "clock throttle reasons",
        "clock throttle reasons",
    ),
    Family(
        "temperature",
        ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_TEMP_CELSIUS"),
        Kind.TEMPERATURE,
        "GPU temperature",
        "GPU temperature",
    ),
)
FAMILY_OF: Final = {name: family for family in FAMILIES for name in family.names}

HARDWARE_THROTTLING: Final[dict[int, str]] = {
    0x08: "HW slowdown",
    0x20: "SW thermal slowdown",
    0x40: "HW thermal slowdown",
    0x80: "HW power brake",
}
"""DCGM_CLOCKS_EVENT_REASON_* bits that mean the hardware protected itself. Left out: GPU idle
(0x1), application clocks (0x2), SW power cap (0x4: normal under load), sync boost (0x10),
display clocks (0x100)."""
THROTTLING_MASK: Final = sum(HARDWARE_THROTTLING)


@dataclass(frozen=True, slots=True)
class Target:
    """The suspect node and GPUs, as the series can name them."""

    instance_id: str
    node_names: tuple[str, ...] = ()
    gpu_uuids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Window:
    start: datetime
    end: datetime
    step_seconds: int

    @property
    def minutes(self) -> int:
        return round((self.end - self.start).total_seconds() / 60)


@dataclass(frozen=True, slots=True)
class Series:
    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...]
    """(epoch seconds, value), oldest first; DCGM's blank values and NaN left out."""

    @property
    def name(self) -> str:
        return self.labels.get("__name__", "")

    @property
    def gpu_uuid(self) -> str | None:
        return next((self.labels[k] for k in GPU_LABELS if self.labels.get(k)), None)


# -- what to ask -------------------------------------------------------------------------------


def target_of(incident: Incident) -> Target:
    """The node's Kubernetes names the incident knows (node isolation's, found by providerID;
    the reports' `node_name`) and the GPU UUIDs the reports name for it."""
    names: list[str] = []
    node = ((incident.isolation or {}).get("nodes") or {}).get(incident.instance_id) or {}
    if isinstance(node.get("node_name"), str):
        names.append(node["node_name"])
    for report in evidence.reports(incident):
        for suspect in report.get("suspects") or []:
            if isinstance(suspect.get("node_name"), str):
                names.append(suspect["node_name"])
    return Target(
        instance_id=incident.instance_id,
        node_names=tuple(dict.fromkeys(n for n in names if n)),
        gpu_uuids=tuple(evidence.gpu_uuids(incident)),
    )


def window_of(incident: Incident, now: datetime) -> Window:
    """One hour before the first evidence to two minutes after the last, at most six hours and
    never past `now`; aligned to the step so that samples on the step grid keep their times."""
    times = _evidence_times(incident) or [parse_time(incident.created_at, "created_at")]
    end = min(max(times) + AFTER_LAST_EVIDENCE, now)
    start = min(times) - LOOKBACK
    if end - start > MAX_WINDOW:
        start = end - MAX_WINDOW
    if end <= start:
        start = end - LOOKBACK
    span = (end - start).total_seconds()
    step = max(MIN_STEP_SECONDS, math.ceil(span / MAX_POINTS))
    first = math.floor(start.timestamp() / step) * step
    last = math.ceil(end.timestamp() / step) * step
    return Window(_at(first), _at(last), step)


def _evidence_times(incident: Incident) -> list[datetime]:
    found = []
    for item in incident.evidence:
        raw = item.get("state_at") if item.get("kind") == "alarm" else item.get("emitted_at")
        if isinstance(raw, str):
            try:
                found.append(parse_time(raw, "evidence"))
            except ValueError:
                continue
    return found


def node_pattern(target: Target) -> str:
    """An RE2 (and Python) pattern a node label value must fully match: one of the node's
    names, or any value holding its instance id as a whole word."""
    instance = _re_escape(target.instance_id)
    return "|".join(
        [
            *(_re_escape(name) for name in target.node_names),
            f"(.*[^0-9a-z])?{instance}([^0-9a-z].*)?",
        ]
    )


def query_for(target: Target, workspace: TelemetryWorkspace) -> str:
    """The PromQL: every family's series for the node (and GPUs), once per node label name."""
    names = "|".join(name for family in FAMILIES for name in family.names)
    matchers = [f"__name__=~{_quote(names)}"]
    if target.gpu_uuids:
        matchers.append(f"UUID=~{_quote('|'.join(map(_re_escape, target.gpu_uuids)))}")
    node = _quote(node_pattern(target))
    labels = (workspace.node_label,) if workspace.node_label else NODE_LABELS
    return " or ".join("{" + ", ".join([*matchers, f"{label}=~{node}"]) + "}" for label in labels)


# -- reading the answer ------------------------------------------------------------------------


def parse_matrix(data: Mapping[str, Any]) -> list[Series]:
    """The `data` of a `query_range` answer as series. Raises TelemetryBadAnswer on anything
    that is not a matrix of [time, "value"] points."""
    if data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        raise TelemetryBadAnswer(
            f"the answer is not a matrix (resultType {data.get('resultType')!r})"
        )
    found = []
    for item in data["result"]:
        labels = item.get("metric") if isinstance(item, dict) else None
        values = item.get("values") if isinstance(item, dict) else None
        if not isinstance(labels, dict) or not isinstance(values, list):
            raise TelemetryBadAnswer("a series of the answer has no metric or values")
        points = []
        for point in values:
            try:
                at, raw = float(point[0]), float(point[1])
            except (TypeError, ValueError, IndexError) as err:
                raise TelemetryBadAnswer(
                    f"a point of the answer is not [time, value]: {point!r}"
                ) from err
            if math.isfinite(raw) and raw < DCGM_BLANK:
                points.append((at, raw))
        found.append(Series({str(k): str(v) for k, v in labels.items()}, tuple(points)))
    return found


def matches(series: Series, target: Target, workspace: TelemetryWorkspace) -> bool:
    """The query's own selection, checked again: this node, these GPUs, a known family."""
    if series.name not in FAMILY_OF:
        return False
    if target.gpu_uuids and series.gpu_uuid not in target.gpu_uuids:
        return False
    pattern = re.compile(node_pattern(target))
    labels = (workspace.node_label,) if workspace.node_label else NODE_LABELS
    return any(
        pattern.fullmatch(series.labels[label]) for label in labels if label in series.labels
    )


def summarize(
    series: Sequence[Series],
    target: Target,
    window: Window,
    workspace: TelemetryWorkspace,
    *,
    queried_at: str,
    seconds: float | None = None,
) -> TelemetryRecord:
    mine = [s for s in series if matches(s, target, workspace)]
    findings: list[TelemetryFinding] = []
    hottest: tuple[float, Series] | None = None
    for one in sorted(mine, key=_order):
        family = FAMILY_OF[one.name]
        if family.kind is Kind.TEMPERATURE:
            peak = max((v for _, v in one.points), default=None)
            if peak is not None and (hottest is None or peak > hottest[0]):
                hottest = (peak, one)
            continue
        findings.extend(_findings(family, one, window))
    signals = [f for f in findings if f.severity == Severity.SIGNAL]
    present = {FAMILY_OF[s.name].key for s in mine}
    base = dataclasses.replace(
        _queried(workspace, target, window, queried_at, seconds), series=len(mine)
    )
    if not mine:
        return dataclasses.replace(
            base,
            state=TelemetryState.NO_SERIES,
            summary=(
                f"no dcgm-exporter series for {_gpus_text(target)} in workspace "
                f"{workspace.workspace_id} between {_span_text(window)}: check how its series "
                "name the node (docs/deploy.md, 'Hardware telemetry'); this does not clear "
                "the node"
            ),
        )
    context: tuple[str, ...] = ()
    if hottest is not None:
        context = (f"hottest GPU temperature {hottest[0]:.0f} °C, on {_gpu_text(hottest[1])}",)
    base = dataclasses.replace(
        base,
        findings=tuple(findings),
        context=context,
        not_exported=tuple(family.short for family in FAMILIES if family.key not in present),
    )
    if signals:
        shown = "; ".join(f.text for f in signals[:SHOWN_SIGNALS])
        more = len(signals) - SHOWN_SIGNALS
        return dataclasses.replace(
            base,
            state=TelemetryState.SIGNAL,
            summary=f"hardware signal: {shown}" + (f"; and {more} more" if more > 0 else ""),
        )
    return dataclasses.replace(
        base,
        state=TelemetryState.CLEAN,
        summary=(
            f"no hardware signal in the last {window.minutes} minutes before the alarm "
            f"({_span_text(window)}) on {_gpus_text(target)}: this does not clear the node "
            "(silent data corruption often leaves no trace in any counter)"
        ),
    )


def _queried(
    workspace: TelemetryWorkspace,
    target: Target,
    window: Window,
    queried_at: str,
    seconds: float | None,
) -> TelemetryRecord:
    """What every record of a query holds, whatever it found."""
    return TelemetryRecord(
        state=TelemetryState.FAILED,
        summary="",
        queried_at=queried_at,
        workspace=workspace.workspace_id,
        dashboard=workspace.dashboard,
        window_start=window.start.isoformat(),
        window_end=window.end.isoformat(),
        step_seconds=window.step_seconds,
        node=_node_text(target, workspace),
        gpu_uuids=target.gpu_uuids,
        seconds=None if seconds is None else round(seconds, 3),
    )


def _findings(family: Family, series: Series, window: Window) -> list[TelemetryFinding]:
    points = series.points
    if not points:
        return []
    where = _gpu_text(series)
    start = window.start.timestamp()

    def finding(severity: Severity, text: str, at: float | None, value: float) -> TelemetryFinding:
        return TelemetryFinding(
            kind=family.key,
            severity=severity.value,
            text=text,
            gpu_uuid=series.gpu_uuid,
            gpu=series.labels.get("gpu"),
            at=None if at is None else _at(at).isoformat(),
            value=_number(value),
            metric=series.name,
        )

    if family.kind is Kind.XID:
        found = []
        for value, at in _first_times(points, lambda v: v != 0):
            when = (
                f"already reported when the window began ({_clock(at)})"
                if at <= start
                else f"at {_clock(at)}"
            )
            found.append(
                finding(Severity.SIGNAL, f"XID {_number(value)} {when} on {where}", at, value)
            )
        return found
    if family.kind is Kind.FLAG:
        first = next(((at, v) for at, v in points if v != 0), None)
        if first is None:
            return []
        when = (
            f"already at {_clock(first[0])}" if first[0] <= start else f"since {_clock(first[0])}"
        )
        return [finding(Severity.SIGNAL, f"{family.words} on {where}, {when}", *first)]
    if family.kind is Kind.CLOCKS:
        hits = [(at, int(v)) for at, v in points if int(v) & THROTTLING_MASK]
        if not hits:
            return []
        bits = 0
        for _, v in hits:
            bits |= v
        reasons = ", ".join(name for bit, name in HARDWARE_THROTTLING.items() if bits & bit)
        return [
            finding(
                Severity.SIGNAL,
                f"clocks throttled by the hardware ({reasons}) from {_clock(hits[0][0])} on {where}",
                hits[0][0],
                hits[0][1],
            )
        ]
    # Kind.COUNT: what rose in the window (a drop is a reset: counting starts again from there).
    rose, first_rise = 0.0, None
    for (_, before), (at, after) in itertools.pairwise(points):
        if after > before:
            rose += after - before
            first_rise = first_rise if first_rise is not None else at
    last = points[-1][1]
    if rose > 0 and first_rise is not None:
        return [
            finding(
                Severity.SIGNAL,
                f"{family.words} rose by {_number(rose)} to {_number(last)} "
                f"(first at {_clock(first_rise)}) on {where}",
                first_rise,
                last,
            )
        ]
    if family.history and last > 0:
        return [
            finding(
                Severity.HISTORY,
                f"{_number(last)} {family.words} on {where}, none new in the window",
                None,
                last,
            )
        ]
    return []


def _first_times(points: Iterable[tuple[float, float]], keep: Any) -> list[tuple[float, float]]:
    """(value, first time) of each distinct value `keep` accepts, in order of appearance;
    a value that comes back later (after another) is named again."""
    found: list[tuple[float, float]] = []
    previous: float | None = None
    for at, value in points:
        if keep(value) and value != previous:
            found.append((value, at))
        previous = value
    return found


# -- the step ----------------------------------------------------------------------------------


def check(deps: Deps, incident: Incident, now: datetime) -> TelemetryRecord:
    """Query the cluster's workspace about the incident's node and GPUs; never raises."""
    # Imported here: the cards (and so the CLI) use this module without the Lambda runtime.
    from lambdas.observability import logger

    queried_at = now.isoformat()
    workspace = deps.settings.telemetry_for(incident.cluster_name)
    if workspace is None:
        return TelemetryRecord(
            state=TelemetryState.NOT_CONFIGURED,
            summary=(
                f"not configured for cluster {incident.cluster_name} (sdc:telemetry): look at "
                "the GPU's counters yourself before deciding"
            ),
            queried_at=queried_at,
        )
    target = target_of(incident)
    window = window_of(incident, now)
    started = time.monotonic()
    try:
        data = deps.prometheus.query_range(
            workspace, query_for(target, workspace), window.start, window.end, window.step_seconds
        )
        series = parse_matrix(data)
    except Exception as err:  # never stops the approval request: the card says why
        state = TelemetryState(err.cause) if isinstance(err, TelemetryError) else None
        if state is None:
            logger.exception("telemetry query failed", incident_id=incident.incident_id)
        record = dataclasses.replace(
            _queried(workspace, target, window, queried_at, time.monotonic() - started),
            state=state or TelemetryState.FAILED,
            summary=f"not available: {str(err)[:500]}; this does not clear the node",
            error={"type": type(err).__name__, "message": str(err)[:1000]},
        )
    else:
        record = summarize(
            series,
            target,
            window,
            workspace,
            queried_at=queried_at,
            seconds=time.monotonic() - started,
        )
    logger.info(
        "telemetry checked",
        incident_id=incident.incident_id,
        state=record.state,
        series=record.series,
        seconds=record.seconds,
    )
    return record


def card_lines(record: TelemetryRecord | None) -> list[str]:
    """The card's HARDWARE TELEMETRY paragraph: every signal (or the one-line verdict), earlier
    faults, what was looked at, and the dashboard."""
    if record is None:
        return ["not queried yet (the approval request queries it)"]
    state = TelemetryState(record.state)
    lines = [f.text for f in record.signals] if state is TelemetryState.SIGNAL else [record.summary]
    lines += [f"earlier: {f.text}" for f in record.history]
    lines += list(record.context)
    if state.queried and record.window_start and record.window_end:
        lines.append(
            f"looked at: {record.node}; "
            f"{_span(_parse(record.window_start), _parse(record.window_end))} "
            f"in {record.step_seconds} s steps; workspace {record.workspace}"
        )
    if record.not_exported and state is not TelemetryState.NO_SERIES:
        lines.append(f"not exported for this node: {', '.join(record.not_exported)}")
    if record.dashboard:
        lines.append(f"dashboard: {record.dashboard}")
    return lines


# -- words -------------------------------------------------------------------------------------


def _node_text(target: Target, workspace: TelemetryWorkspace) -> str:
    labels = workspace.node_label or "/".join(NODE_LABELS)
    names = [*target.node_names, f"any name holding {target.instance_id}"]
    gpus = f", GPU {', '.join(target.gpu_uuids)}" if target.gpu_uuids else ", every GPU"
    return f"{labels} = {' or '.join(names)}{gpus}"


def _gpus_text(target: Target) -> str:
    if target.gpu_uuids:
        return f"{', '.join(target.gpu_uuids)} of {target.instance_id}"
    return f"every GPU of {target.instance_id}"


def _gpu_text(series: Series) -> str:
    index = series.labels.get("gpu")
    uuid = series.gpu_uuid
    if uuid:
        return uuid + (f" (GPU {index})" if index else "")
    return f"GPU {index}" if index else "an unnamed GPU"


def _span_text(window: Window) -> str:
    return _span(window.start, window.end)


def _span(start: datetime, end: datetime) -> str:
    return f"{start.strftime('%Y-%m-%d %H:%M:%S')} to {end.strftime('%H:%M:%S')} UTC"


def _clock(epoch: float) -> str:
    return _at(epoch).strftime("%H:%M:%S UTC")


def _at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def _order(series: Series) -> tuple[int, str, str]:
    keys = [f.key for f in FAMILIES]
    return (keys.index(FAMILY_OF[series.name].key), series.gpu_uuid or "", series.name)


_RE2_SPECIAL: Final = re.compile(r"([\\.+*?()|\[\]{}^$])")


def _re_escape(text: str) -> str:
    """A literal for RE2 (PromQL's `=~`) and Python alike."""
    return _RE2_SPECIAL.sub(r"\\\1", text)


def _quote(text: str) -> str:
    """A PromQL double-quoted string (Go escapes)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
