"""Which series to ask the cluster's Prometheus workspace for, about which node and GPUs, over
which window (see `sdc_remediation.lambdas.logic.evidence.telemetry` for why these choices)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from sdc_remediation.lambdas.logic.evidence.dcgm import (
    FAMILIES,
    GPU_LABELS,
    NODE_LABELS,
    TOTAL_SUFFIX,
)
from sdc_remediation.lambdas.models.events import parse_time
from sdc_remediation.lambdas.models.evidence import AlarmEvidence, ReportEvidence
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.settings import TelemetryWorkspace

LOOKBACK: Final = timedelta(hours=1)
AFTER_LAST_EVIDENCE: Final = timedelta(minutes=2)
MAX_WINDOW: Final = timedelta(hours=6)
MIN_STEP_SECONDS: Final = 15
MAX_POINTS: Final = 480


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


def target_of(incident: Incident) -> Target:
    """The node's Kubernetes names the incident knows and the GPU UUIDs the reports name for
    it. The node found by providerID (node isolation) is the truth about its name; only without
    it do the reports' `node_name` claims serve, as hints beside the instance id."""
    names: list[str] = []
    node = incident.isolation.node(incident.instance_id) if incident.isolation else None
    if node and isinstance(node.node_name, str):
        names.append(node.node_name)
    else:
        names += [s.node_name for r in incident.reports for s in r.suspects if s.node_name]
    return Target(
        instance_id=incident.instance_id,
        node_names=tuple(dict.fromkeys(n for n in names if n)),
        gpu_uuids=tuple(incident.gpu_uuids),
    )


def window_of(incident: Incident, now: datetime) -> Window:
    """One hour before the first evidence to two minutes after the last, at most six hours and
    never past `now`; aligned to the step so that samples on the step grid keep their times."""
    times = evidence_times(incident) or [parse_time(incident.created_at, "created_at")]
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
    return Window(at_epoch(first), at_epoch(last), step)


def evidence_times(incident: Incident) -> list[datetime]:
    """When each alarm changed state and each report was emitted (unreadable times left out)."""
    found = []
    for item in incident.items:
        # A report's time is when the pipeline received it (its emitted_at is the reporter's).
        if isinstance(item, AlarmEvidence):
            raw = item.state_at
        elif isinstance(item, ReportEvidence):
            raw = item.order
        else:
            raw = item.received_at
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
    """The PromQL: every family's series for the node (and GPUs), under every name it can be
    stored by (each exported name with and without `_total`), once per node label name and, when
    the GPUs are known, per GPU label name (`UUID`, `uuid`)."""
    names = "|".join(_re_escape(name) for family in FAMILIES for name in family.names)
    metric = f"__name__=~{_quote(f'({names})({TOTAL_SUFFIX})?')}"
    gpus = (
        [f"{label}=~{_quote('|'.join(map(_re_escape, target.gpu_uuids)))}" for label in GPU_LABELS]
        if target.gpu_uuids
        else [None]
    )
    node = _quote(node_pattern(target))
    labels = (workspace.node_label,) if workspace.node_label else NODE_LABELS
    return " or ".join(
        "{" + ", ".join(m for m in (metric, gpu, f"{label}=~{node}") if m) + "}"
        for label in labels
        for gpu in gpus
    )


def at_epoch(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


_RE2_SPECIAL: Final = re.compile(r"([\\.+*?()|\[\]{}^$])")


def _re_escape(text: str) -> str:
    """A literal for RE2 (PromQL's `=~`) and Python alike."""
    return _RE2_SPECIAL.sub(r"\\\1", text)


def _quote(text: str) -> str:
    """A PromQL double-quoted string (Go escapes)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
