"""What the node's series say: signals, earlier faults and context, summed up in one record."""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Iterable, Sequence
from typing import Any, Final

from sdc_remediation.lambdas.logic.evidence import xids
from sdc_remediation.lambdas.logic.evidence.dcgm import (
    FAMILIES,
    FAMILY_OF,
    HARDWARE_THROTTLING,
    NODE_LABELS,
    THROTTLING_MASK,
    Family,
    Series,
    SeriesKind,
)
from sdc_remediation.lambdas.logic.evidence.telemetry_query import (
    Target,
    Window,
    at_epoch,
    node_pattern,
)
from sdc_remediation.lambdas.models.settings import TelemetryWorkspace
from sdc_remediation.lambdas.models.telemetry import (
    Severity,
    TelemetryFinding,
    TelemetryRecord,
    TelemetryState,
    span,
)

SHOWN_SIGNALS: Final = 3
"""Signals named in the one-line summary (the card lists them all)."""


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
        if family.kind is SeriesKind.TEMPERATURE:
            peak = max((v for _, v in one.points), default=None)
            if peak is not None and (hottest is None or peak > hottest[0]):
                hottest = (peak, one)
            continue
        findings.extend(_findings(family, one, window))
    signals = [f for f in findings if f.severity == Severity.SIGNAL]
    present = {FAMILY_OF[s.name].key for s in mine}
    read = tuple(
        f.short for f in FAMILIES if f.key in present and f.kind is not SeriesKind.TEMPERATURE
    )
    base = dataclasses.replace(
        queried(workspace, target, window, queried_at, seconds), series=len(mine)
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
    missing = tuple(family.short for family in FAMILIES if family.key not in present)
    base = dataclasses.replace(
        base, findings=tuple(findings), context=context, read=read, not_exported=missing
    )
    if signals:
        shown = "; ".join(f.text for f in signals[:SHOWN_SIGNALS])
        more = len(signals) - SHOWN_SIGNALS
        return dataclasses.replace(
            base,
            state=TelemetryState.SIGNAL,
            summary=f"hardware signal: {shown}" + (f"; and {more} more" if more > 0 else ""),
        )
    if not read:
        only = ", ".join(f.short for f in FAMILIES if f.key in present)
        return dataclasses.replace(
            base,
            state=TelemetryState.NO_SERIES,
            summary=(
                f"no fault counter exported for {_gpus_text(target)} in workspace "
                f"{workspace.workspace_id} (only {only}); "
                f"not exported for this node: {', '.join(missing)}; this does not clear the node"
            ),
        )
    return dataclasses.replace(
        base,
        state=TelemetryState.CLEAN,
        summary=(
            f"no hardware signal in the last {window.minutes} minutes before the alarm "
            f"({_span_text(window)}) on {_gpus_text(target)} in what was read "
            f"({', '.join(read)}): this does not clear the node (silent data corruption often "
            "leaves no trace in any counter)"
            + (f"; not exported for this node: {', '.join(missing)}" if missing else "")
        ),
    )


def queried(
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

    def finding(
        severity: Severity, text: str, at: float | None, value: float, cause: str | None = None
    ) -> TelemetryFinding:
        return TelemetryFinding(
            kind=family.key,
            severity=severity.value,
            text=text,
            gpu_uuid=series.gpu_uuid,
            gpu=series.labels.get("gpu"),
            at=None if at is None else at_epoch(at).isoformat(),
            value=_number(value),
            metric=series.name,
            cause=cause,
        )

    if family.kind is SeriesKind.XID:
        found = []
        for value, at in _first_times(points, lambda v: v != 0):
            when = (
                f"already reported when the window began ({_clock(at)})"
                if at <= start
                else f"at {_clock(at)}"
            )
            known = xids.CATALOG.get(int(value))
            found.append(
                finding(
                    Severity.SIGNAL,
                    f"XID {_number(value)} {when} on {where}: {xids.describe(int(value))}",
                    at,
                    value,
                    known.cause.value if known else None,
                )
            )
        return found
    if family.kind is SeriesKind.XID_COUNT:
        return _xid_counts(series, points, start, finding, where)
    if family.kind is SeriesKind.FLAG:
        first = next(((at, v) for at, v in points if v != 0), None)
        if first is None:
            return []
        when = (
            f"already at {_clock(first[0])}" if first[0] <= start else f"since {_clock(first[0])}"
        )
        return [finding(Severity.SIGNAL, f"{family.words} on {where}, {when}", *first)]
    if family.kind is SeriesKind.CLOCKS:
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
    # SeriesKind.COUNT: what rose in the window (a drop is a reset: counting starts again from there).
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


def _xid_counts(
    series: Series, points: Sequence[tuple[float, float]], start: float, finding: Any, where: str
) -> list[TelemetryFinding]:
    """dcgm-exporter's count of one XID (its `xid` label) over the exporter's recent window:
    a signal when it rose in the window, or when it was already counting as the window began."""
    code = series.labels.get("xid", "")
    try:
        number = int(float(code))
    except ValueError:
        return []
    rose, first_rise = 0.0, None
    for (_, before), (at, after) in itertools.pairwise(points):
        if after > before:
            rose += after - before
            first_rise = first_rise if first_rise is not None else at
    meaning = xids.describe(number)
    known = xids.CATALOG.get(number)
    cause = known.cause.value if known else None
    if first_rise is not None:
        return [
            finding(
                Severity.SIGNAL,
                f"XID {number} counted {_number(rose)} time(s) from {_clock(first_rise)} on "
                f"{where}: {meaning}",
                first_rise,
                number,
                cause,
            )
        ]
    if points[0][1] > 0 and points[0][0] <= start:
        return [
            finding(
                Severity.SIGNAL,
                f"XID {number} already counted when the window began ({_clock(points[0][0])}) "
                f"on {where}: {meaning}",
                points[0][0],
                number,
                cause,
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
    return span(window.start, window.end)


def _clock(epoch: float) -> str:
    return at_epoch(epoch).strftime("%H:%M:%S UTC")


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def _order(series: Series) -> tuple[int, str, str]:
    keys = [f.key for f in FAMILIES]
    return (keys.index(FAMILY_OF[series.name].key), series.gpu_uuid or "", series.name)
