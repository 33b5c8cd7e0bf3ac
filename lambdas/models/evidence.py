"""Evidence as an incident keeps it: one typed item per alarm, report, hardware alert or failed
idle sweep check, from the trigger's parse to the card that shows it.

A trigger's parser builds the item (`sdc_remediation.lambdas.logic.evidence.summaries`, the
sweep's `sweep_evidence`); the claim carries it; the incident stores its `to_record()` (JSON, as
DynamoDB keeps it) and gives it back typed (`Incident.reports`, `alarms`, `hardware`, `sweeps`),
which is all the decision table, the cards and the figures read. `evidence_of` reads a record
back, tolerant of records written before a field existed (a missing key takes the field's
default).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from sdc_remediation.lambdas.models._record import read_record, record_of
from sdc_remediation.lambdas.models.hardware_alert import AlertSeverity, AlertStatus, HardwareRule
from sdc_remediation.lambdas.models.report import ReportCheckpoint
from trainer_emitter.contract import Check, Role, VerdictKind


class TriggerSource(StrEnum):
    """What brought evidence to an incident (an evidence item's `kind`, a trigger's `source`)."""

    ALARM = "alarm"
    """A contributor alarm of the metric channel."""
    REPORT = "report"
    """An SDC Report event of the emitter's fast path."""
    HARDWARE = "hardware"
    """A hardware alert of the cluster's Prometheus workspace (the GPU's own counters)."""
    SWEEP = "sweep"
    """A deep health check an idle sweep ran on the node, which failed (HyperPod's finding)."""

    @property
    def trusted(self) -> bool:
        """Whether no training pod can speak for it: a hardware alert (only the configured
        workspaces may deliver to its topic) or an idle sweep's failed check (HyperPod's own).
        An alarm's datapoint and a report are anyone's in the account."""
        return self in (TriggerSource.HARDWARE, TriggerSource.SWEEP)


class _Item:
    """What every evidence item has: its kind, and the key that attaches it once."""

    __slots__ = ()
    kind: ClassVar[TriggerSource]
    key: str
    written_when_set: ClassVar[tuple[str, ...]] = ()
    """Fields its record holds only when they are not None."""

    @property
    def trusted(self) -> bool:
        """Of a kind no training pod can send (`TriggerSource.trusted`)."""
        return self.kind.trusted

    def to_record(self) -> dict[str, Any]:
        return {"kind": self.kind.value, **record_of(self, omit_none=self.written_when_set)}


@dataclass(frozen=True, slots=True, kw_only=True)
class AlarmEvidence(_Item):
    """A contributor alarm's event: the metric that fired for the instance."""

    kind: ClassVar[TriggerSource] = TriggerSource.ALARM
    key: str
    metric: str = ""
    event_id: str = ""
    alarm_name: str = ""
    state_at: str = ""
    reason: str = ""
    mute_rule: str | None = None
    mute_rule_arn: str | None = None
    mute_window_start: str | None = None
    mute_window_end: str | None = None
    """The alarm mute rule that muted it, when one did (the incident is held): the keys of
    `MuteDetail.to_json`."""
    written_when_set: ClassVar[tuple[str, ...]] = (
        "mute_rule",
        "mute_rule_arn",
        "mute_window_start",
        "mute_window_end",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class HardwareEvidence(_Item):
    """A hardware alert: one item per alert and start (a repeat of a still-firing alert, or its
    resolution, is another item: `status` says which). Its text is the alert's, cleaned."""

    kind: ClassVar[TriggerSource] = TriggerSource.HARDWARE
    key: str
    status: AlertStatus
    rule: HardwareRule
    severity: AlertSeverity
    node_name: str
    gpu: str | None = None
    gpu_uuid: str | None = None
    xid: str | None = None
    counter: str | None = None
    summary: str = ""
    starts_at: str = ""
    received_at: str = ""

    @property
    def firing(self) -> bool:
        return self.status is AlertStatus.FIRING

    @property
    def identity(self) -> tuple[str | None, ...]:
        """What makes two items the same alert: its labels and when it started (the alert
        manager keeps an alert's start when it resolves)."""
        return (
            self.rule,
            self.node_name,
            self.gpu,
            self.gpu_uuid,
            self.xid,
            self.counter,
            self.starts_at,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepEvidence(_Item):
    """A deep health check an idle sweep ran on the node, which failed."""

    kind: ClassVar[TriggerSource] = TriggerSource.SWEEP
    key: str
    checks: tuple[str, ...] = ()
    message: str | None = None
    cluster_name: str = ""
    status: str = ""
    started_at: str = ""
    received_at: str = ""
    idle: bool = True


@dataclass(frozen=True, slots=True)
class Resume:
    """The checkpoint a report's job resumes from (`sdc_remediation.lambdas.logic.evidence.resume`)."""

    checkpoint: ReportCheckpoint | None
    """The checkpoint to resume from; None when no verified one before the window is known."""
    before_step: int | None
    """The first step of the suspect window (None: the report has no window)."""
    unverified: tuple[int, ...] = ()
    """Steps of checkpoints before the window that were skipped: their tags do not verify them."""
    known: int = 0
    """How many checkpoints the report named."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SuspectEvidence:
    """A suspect as the card shows it: the reporter's text cleaned and clipped."""

    rank: int | None = None
    role: Role | None = None
    node_name: str | None = None
    gpu_uuid: str | None = None
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class VerdictEvidence:
    pair: tuple[int, int]
    third: int | None
    suspect: int | None
    kind: VerdictKind


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitingCollective:
    seq: int
    name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RankStack:
    """The training thread's innermost frames of one rank."""

    rank: int | None
    stack: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class HangSummary:
    """What the decision table and the card read of a hang report (the stacks and every rank's
    scores stay in the stored report)."""

    localised_instance: str | None = None
    signals: tuple[str, ...] = ()
    named_instances: tuple[str, ...] = ()
    missing_ranks: tuple[int, ...] = ()
    silent_ranks: tuple[int, ...] = ()
    odd_stack_ranks: tuple[int, ...] = ()
    waiting_collective: WaitingCollective | None = None
    timeout_s: float | None = None
    stacks: tuple[RankStack, ...] = ()

    def ranks_named(self, ranks: set[int]) -> list[int]:
        """Of `ranks`, those the hang names: missing, silent or with an odd stack."""
        named = {*self.missing_ranks, *self.silent_ranks, *self.odd_stack_ranks}
        return sorted(ranks & named)


@dataclass(frozen=True, slots=True, kw_only=True)
class RelativeScore:
    rank: int
    score: float | None = None
    windows: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StragglerSummary:
    flagged: tuple[int, ...] = ()
    named_instances: tuple[str, ...] = ()
    threshold: float | None = None
    windows_required: int | None = None
    window_steps: int | None = None
    relative: tuple[RelativeScore, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportEvidence(_Item):
    """What the decision table and the approval card need from a report, for the ranks on one
    instance (the whole report for a job-level incident: `role` None)."""

    kind: ClassVar[TriggerSource] = TriggerSource.REPORT
    written_when_set: ClassVar[tuple[str, ...]] = ("hang", "straggler")
    key: str
    report_id: str = ""
    emitted_at: str = ""
    received_at: str | None = None
    stale: bool = False
    job_name: str | None = None
    step: int | None = None
    tokens_per_step: int | None = None
    check: Check | None = None
    ambiguous: bool = False
    role: Role | None = None
    metrics: tuple[str, ...] = ()
    ranks: tuple[int, ...] = ()
    suspects: tuple[SuspectEvidence, ...] = ()
    nonfinite: tuple[int, ...] = ()
    mismatched_pairs: tuple[tuple[int, int], ...] = ()
    culprits: tuple[int, ...] = ()
    verdicts: tuple[VerdictEvidence, ...] = ()
    weight_suspects: tuple[int, ...] | None = None
    suspect_window: tuple[int, int] | None = None
    last_audit_pass: int | None = None
    last_weight_check_pass: int | None = None
    resume: Resume | None = None
    errors: tuple[str, ...] = ()
    hang: HangSummary | None = None
    straggler: StragglerSummary | None = None
    left_out: Mapping[str, int] = field(default_factory=dict)
    """Of each list cut to keep the item small, how many entries were left out."""

    @property
    def order(self) -> str:
        """What orders reports: the pipeline's receipt, else (older records) the emission."""
        return self.received_at or self.emitted_at

    @property
    def watch(self) -> bool:
        """Only the training watch gives it (a hang or a straggler report)."""
        return self.check in (Check.HANG, Check.STRAGGLER)


Evidence = AlarmEvidence | ReportEvidence | HardwareEvidence | SweepEvidence

KINDS: dict[str, type[AlarmEvidence | ReportEvidence | HardwareEvidence | SweepEvidence]] = {
    TriggerSource.ALARM: AlarmEvidence,
    TriggerSource.REPORT: ReportEvidence,
    TriggerSource.HARDWARE: HardwareEvidence,
    TriggerSource.SWEEP: SweepEvidence,
}
"""Each kind of evidence record, and the model it reads as."""


def evidence_of(record: Mapping[str, Any]) -> Evidence:
    """The evidence item a stored record describes; ValueError naming the kind when it is of
    none this release knows."""
    kind = KINDS.get(str(record.get("kind")))
    if kind is None:
        raise ValueError(f"an evidence record of no known kind: {record.get('kind')!r}")
    return read_record(kind, record)
