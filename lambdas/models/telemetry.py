"""What the GPU's own hardware counters said when the approval was requested.

The approval request queries the cluster's Amazon Managed Service for Prometheus workspace (the
HyperPod observability add-on writes dcgm-exporter's series there) and keeps the outcome on the
incident as a `TelemetryRecord`: the card and `sdc show` print it from there, so it says what
the approver saw. Plain JSON-able fields only, so it round-trips through DynamoDB unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sdc_remediation.lambdas.models._record import read_record, record_of


class TelemetryState(StrEnum):
    SIGNAL = "signal"
    """At least one counter shows a hardware fault in the window: XID, a row remap failure or
    pending remap, retired pages, rising ECC, PCIe or NVLink errors, hardware throttling."""
    CLEAN = "clean"
    """The node's fault counter series were there and showed nothing. Said only of the
    families read (`TelemetryRecord.read`); the others are named as not exported. This does not
    clear the node: silent data corruption often leaves no trace in any counter."""
    NO_SERIES = "no_series"
    """The workspace answered, but holds no dcgm-exporter series for this node (or GPU), or
    none of a fault counter (only the temperature)."""
    NOT_CONFIGURED = "not_configured"
    """The cluster has no workspace in `sdc:telemetry`."""
    UNREACHABLE = "unreachable"
    REFUSED = "refused"
    SLOW = "slow"
    FAILED = "failed"
    """The workspace's answer could not be used (a query error, a malformed answer)."""

    @property
    def queried(self) -> bool:
        """Whether the workspace answered the query."""
        return self in (TelemetryState.SIGNAL, TelemetryState.CLEAN, TelemetryState.NO_SERIES)


class Severity(StrEnum):
    SIGNAL = "signal"
    """Seen in the window: raises confidence that the hardware is at fault."""
    HISTORY = "history"
    """A non-zero lifetime count that did not change in the window: the GPU had such faults
    before; shown, but not counted as a signal of this incident."""


@dataclass(frozen=True, slots=True)
class TelemetryFinding:
    """One thing a counter showed, in plain words (`text`), with what it rests on."""

    kind: str
    """The counter family (`sdc_remediation.lambdas.logic.evidence.dcgm.FAMILIES`), e.g. `xid`, `row_remap_failed`."""
    severity: str
    text: str
    gpu_uuid: str | None = None
    gpu: str | None = None
    """dcgm-exporter's `gpu` label: the GPU's index on its node."""
    at: str | None = None
    """When it was first seen in the window (ISO 8601, UTC), if it changed in the window."""
    value: float | None = None
    metric: str | None = None
    """The series name it was read from, exactly as stored."""
    cause: str | None = None
    """For an XID in the catalog (`sdc_remediation.lambdas.logic.evidence.xids`): what usually lies behind it
    (`hardware`, `application`, `driver_or_hardware`, `follow_on`)."""

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> TelemetryFinding:
        return read_record(cls, record)


@dataclass(frozen=True, slots=True)
class TelemetryRecord:
    state: str
    summary: str
    """One line in plain words: what the card says first."""
    queried_at: str
    workspace: str | None = None
    dashboard: str | None = None
    window_start: str | None = None
    window_end: str | None = None
    step_seconds: int | None = None
    node: str | None = None
    """The node as the query matched it (label and the names it accepted)."""
    gpu_uuids: tuple[str, ...] = ()
    """The GPUs asked about; empty: every GPU of the node."""
    findings: tuple[TelemetryFinding, ...] = ()
    context: tuple[str, ...] = ()
    """Lines that are neither signal nor history (the hottest temperature seen)."""
    read: tuple[str, ...] = ()
    """Fault counter families the node's series were found under: all a clean verdict is
    about."""
    not_exported: tuple[str, ...] = ()
    """Counter families with no series at all for the node: the exporter does not collect them
    (dcgm-exporter's default set leaves ECC totals, retired pages and NVLink errors out)."""
    series: int = 0
    """How many series the answer held."""
    seconds: float | None = None
    """How long the query took."""
    error: dict[str, Any] | None = None

    @property
    def signals(self) -> list[TelemetryFinding]:
        return [f for f in self.findings if f.severity == Severity.SIGNAL]

    @property
    def history(self) -> list[TelemetryFinding]:
        return [f for f in self.findings if f.severity == Severity.HISTORY]

    def to_record(self) -> dict[str, Any]:
        return record_of(self)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> TelemetryRecord:
        return read_record(cls, record)


def span(start: datetime, end: datetime) -> str:
    """A window as the card and the findings word it: `2026-12-04 17:40:00 to 17:55:00 UTC`."""
    return f"{start.strftime('%Y-%m-%d %H:%M:%S')} to {end.strftime('%H:%M:%S')} UTC"
