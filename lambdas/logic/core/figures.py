"""The fleet figures, computed from the audit log (and the incident records where the audit does
not carry a fact): one code path for `sdc report`, the dashboard's figures and the fleet what-if.

Every figure is a member of `Figure`: its name, unit and definition live there once, and
docs/figures.md shows the table `figures_table` derives from them (a test holds the two
together). `facts_of` reads one incident's chain into `IncidentFacts`; `compute` turns the facts
of every incident opened in the window into a `Report`.

Durations are seconds between the `at` of two audit entries of the same incident (the writers'
clocks, Lambda's). Quantiles are nearest-rank: the value at rank ceil(q x n) of the n sorted
values (the median of an even count is the lower middle one); none without values.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, Final

from sdc_remediation.lambdas.logic.core.audit import dated_at, verify_chain
from sdc_remediation.lambdas.models.audit import AuditAction, AuditEntry
from sdc_remediation.lambdas.models.evidence import TriggerSource
from sdc_remediation.lambdas.models.health_check import HealthCheckResult
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.payloads import Decision
from sdc_remediation.lambdas.models.recommendation import set_aside
from sdc_remediation.lambdas.models.resume_point import ResumePoint
from sdc_remediation.lambdas.models.states import IncidentState

A = AuditAction
S = IncidentState

RECOVERED: Final = frozenset({S.REPLACED, S.REPLACED_BY_HYPERPOD, S.REBOOTED})
"""The states in which an incident's node recovered (as `RecoveryLatencySeconds` counts them)."""
HUMAN_DECISIONS: Final = frozenset({Decision.APPROVE, Decision.REJECT, Decision.REBOOT})
"""The decisions on an incident's approval request (a storm hold's reset is not one)."""
OPENINGS: Final = frozenset({AuditAction.INCIDENT_OPENED, AuditAction.INCIDENT_HELD})
REPEAT: Final = 2
"""Incidents of one node or GPU that make it a repeat offender in the report (the escalation's
own threshold is a setting: `Settings.repeat_offender_incidents`)."""


class Unit(Enum):
    COUNT = "count"
    SECONDS = "seconds (median, p90)"
    STEPS = "steps (median, p90)"
    RATIO = "ratio (numerator, denominator)"
    PER_WEEK = "count per ISO week"
    IDS = "incident ids per id"


class Figure(Enum):
    """Every figure the report gives: (key, unit, definition). The definition is the one the
    code below computes; docs/figures.md shows it (`figures_table`)."""

    INCIDENTS = ("incidents", Unit.COUNT, "incidents opened or held on arrival in the window")
    BY_TRIGGER = (
        "incidents_by_trigger",
        Unit.COUNT,
        "incidents by what opened them: `alarm` (a contributor alarm), `report` (an SDC report "
        "event) or `hardware` (a hardware alert), from the opening entry's `source`",
    )
    BY_CHECK = (
        "incidents_by_check",
        Unit.COUNT,
        "incidents by the check behind their evidence: the first report's `check` (compute, "
        "weights, reduced gradient, hang, straggler), else the first alarm's metric, else "
        "`hardware`",
    )
    HELD = (
        "held_by_kind",
        Unit.COUNT,
        "incidents held (on arrival or before an acting step) by hold kind: paused, muted, "
        "storm, guard, rate, notice",
    )
    OUTCOMES = ("outcomes", Unit.COUNT, "closed incidents by the state they closed in")
    TIME_TO_ISOLATE = (
        "time_to_isolate",
        Unit.SECONDS,
        "from `incident_opened` to `node_isolated` (incidents whose node was isolated)",
    )
    TIME_TO_DECISION = (
        "time_to_decision",
        Unit.SECONDS,
        "from `incident_opened` to the first `decision_accepted` of approve, reboot or reject "
        "(the `DecisionLatencySeconds` metric's span)",
    )
    TIME_TO_RECOVERY = (
        "time_to_recovery",
        Unit.SECONDS,
        "from `incident_opened` to `incident_closed` in replaced, replaced_by_hyperpod or "
        "rebooted, not a dry run (the `RecoveryLatencySeconds` metric's span)",
    )
    DECISION_LATENCY = (
        "decision_latency",
        Unit.SECONDS,
        "from the first `approval_requested` to the first `decision_accepted`: how long the "
        "approvers took",
    )
    EXPOSURE_STEPS = (
        "exposure_steps",
        Unit.STEPS,
        "the steps trained between the suspect window's start and detection, from the "
        "incident's reports (`ResumePoint.exposure_steps`; incidents whose reports carry one)",
    )
    APPROVALS_PER_WEEK = (
        "approvals_per_week",
        Unit.PER_WEEK,
        "human decisions accepted (approve, reboot, reject) per ISO week of the decision",
    )
    ACTED_ON = (
        "nodes_acted_on",
        Unit.COUNT,
        "incidents whose node was replaced or rebooted by the pipeline (`replacement_done` or "
        "`reboot_done`, not a dry run)",
    )
    PRECISION = (
        "remediation_precision",
        Unit.RATIO,
        "of the nodes acted on, those whose fault was confirmed: a failed deep health check, a "
        "hardware alert among the evidence, or a repeat (the recommendation counted past "
        "incidents of the node or its GPU, or another incident of the node, neither held nor "
        "rejected, is in the window)",
    )
    RELEASED_STAYED = (
        "released_and_stayed",
        Unit.RATIO,
        "of the nodes released after a passing deep health check (nothing replaced or "
        "rebooted), those with no later incident on the same instance in the window",
    )
    REPEAT_BY_NODE = (
        "repeat_offenders_by_node",
        Unit.IDS,
        "node logical ids (the instance id where HyperPod gave none) in two or more incidents, "
        "none held or rejected counted",
    )
    REPEAT_BY_GPU = (
        "repeat_offenders_by_gpu",
        Unit.IDS,
        "GPU UUIDs the reports named in two or more incidents, none held or rejected counted",
    )
    LEFT_OUT = (
        "chains_left_out",
        Unit.COUNT,
        "audit chains left out of every figure: their hash chain does not verify (`sdc audit "
        "verify` names the broken link), or their opening entry's time does not read",
    )

    def __init__(self, key: str, unit: Unit, definition: str) -> None:
        self.key = key
        self.unit = unit
        self.definition = definition


def figures_table() -> str:
    """The Markdown table docs/figures.md shows: one row per `Figure`."""
    rows = [
        "| Figure | Unit | Definition |",
        "|---|---|---|",
        *(f"| `{f.key}` | {f.unit.value} | {f.definition} |" for f in Figure),
    ]
    return "\n".join(rows)


# -- one incident, as its audit chain tells it --------------------------------------------------


@dataclass(frozen=True, slots=True)
class IncidentFacts:
    """What the figures need of one incident: times from its audit entries, the rest from its
    record where the audit does not carry it (the check, GPU UUIDs, the logical id, exposure)."""

    incident_id: str
    opened_at: datetime
    source: str
    check: str
    instance_id: str
    logical_id: str
    gpu_uuids: tuple[str, ...] = ()
    held: str | None = None
    isolated_at: datetime | None = None
    approval_requested_at: datetime | None = None
    decided_at: datetime | None = None
    decision: str | None = None
    advice: str | None = None
    """The last judgement's advice (`recommended`); None when never judged."""
    closed_at: datetime | None = None
    state: str | None = None
    recovered: bool = False
    acted_on: bool = False
    health_failed: bool = False
    health_passed: bool = False
    hardware: bool = False
    history: tuple[str, ...] = ()
    released: bool = False
    exposure_steps: int | None = None


def _first(entries: Sequence[AuditEntry], *actions: AuditAction) -> AuditEntry | None:
    return next((e for e in entries if e.action in actions), None)


def facts_of(
    entries: Sequence[AuditEntry], incident: Incident | None = None
) -> IncidentFacts | None:
    """One incident's facts from its chain (and record); None for a subject that is no
    incident (a storm hold, an `event#…` or `decision#…` subject) or a skipped one."""
    ordered = sorted(entries, key=lambda e: e.seq)
    opening = _first(ordered, A.INCIDENT_OPENED, A.INCIDENT_HELD)
    opened_at = dated_at(opening.at) if opening is not None else None
    if opening is None or opened_at is None:
        return None
    details = opening.details
    held = details.get("kind") if opening.action == A.INCIDENT_HELD else None
    held_later = _first(ordered, A.HELD)
    if held is None and held_later is not None:
        held = held_later.details.get("kind")
    instance_id = str(details.get("instance_id") or "")
    decided = next(
        (
            e
            for e in ordered
            if e.action == A.DECISION_ACCEPTED and e.details.get("decision") in HUMAN_DECISIONS
        ),
        None,
    )
    closing = _first(ordered, A.INCIDENT_CLOSED)
    closed_state = (closing.details.get("state") if closing else None) or (
        S.HELD.value if opening.action == A.INCIDENT_HELD else None
    )
    dry_run = bool(closing and closing.details.get("dry_run"))
    done = [
        e
        for e in ordered
        if e.action in (A.REPLACEMENT_DONE, A.REBOOT_DONE) and not e.details.get("dry_run")
    ]
    results = {e.details.get("result") for e in ordered if e.action == A.HEALTH_CHECK_STATUS}
    judged = [e for e in ordered if e.action == A.RECOMMENDED]
    history = tuple(str(h) for e in judged for h in e.details.get("history") or [])
    hardware = details.get("source") == TriggerSource.HARDWARE or any(
        e.action == A.EVIDENCE_ATTACHED and e.details.get("kind") == TriggerSource.HARDWARE
        for e in ordered
    )
    check = str(details.get("check") or details.get("metric") or "")
    gpu_uuids: tuple[str, ...] = ()
    logical_id = instance_id
    exposure: int | None = None
    if incident is not None:
        reports = incident.reports
        if reports:
            check = str(reports[0].check or check)
        elif incident.alarms:
            check = incident.alarms[0].metric or check
        hardware = hardware or bool(incident.hardware)
        if incident.hardware and not reports and not incident.alarms:
            check = TriggerSource.HARDWARE.value
        gpu_uuids = tuple(incident.gpu_uuids)
        logical_id = incident.node_logical_id or instance_id
        point = ResumePoint.of(reports)
        exposure = point.exposure_steps if point else None
    if details.get("source") == TriggerSource.HARDWARE and not check:
        check = TriggerSource.HARDWARE.value
    return IncidentFacts(
        incident_id=opening.incident_id,
        opened_at=opened_at,
        source=str(details.get("source") or ""),
        check=check or "unknown",
        instance_id=instance_id,
        logical_id=logical_id,
        gpu_uuids=gpu_uuids,
        held=str(held) if held else None,
        isolated_at=dated_at(e.at) if (e := _first(ordered, A.NODE_ISOLATED)) else None,
        approval_requested_at=dated_at(e.at)
        if (e := _first(ordered, A.APPROVAL_REQUESTED))
        else None,
        decided_at=dated_at(decided.at) if decided else None,
        decision=str(decided.details.get("decision")) if decided else None,
        advice=str(judged[-1].details["advice"])
        if judged and judged[-1].details.get("advice")
        else None,
        closed_at=dated_at(closing.at) if closing else None,
        state=str(closed_state) if closed_state else None,
        recovered=closed_state in RECOVERED and not dry_run,
        acted_on=bool(done),
        health_failed=HealthCheckResult.FAILED in results,
        health_passed=HealthCheckResult.PASSED in results,
        hardware=hardware,
        history=history,
        released=_first(ordered, A.NODE_RELEASED) is not None,
        exposure_steps=exposure,
    )


# -- the report ---------------------------------------------------------------------------------


def quantile(values: Sequence[float], q: float) -> float | None:
    """Nearest rank: the value at rank ceil(q x n) of the sorted values; None without values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)), 1) - 1]


@dataclass(frozen=True, slots=True)
class Spread:
    """A duration or step figure: how many values, their median and p90."""

    n: int
    median: float | None
    p90: float | None

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread:
        found = list(values)
        return cls(len(found), quantile(found, 0.5), quantile(found, 0.9))

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "median": self.median, "p90": self.p90}


@dataclass(frozen=True, slots=True)
class Ratio:
    numerator: int
    denominator: int

    @property
    def value(self) -> float | None:
        return self.numerator / self.denominator if self.denominator else None

    def to_json(self) -> dict[str, Any]:
        return {
            "numerator": self.numerator,
            "denominator": self.denominator,
            "value": None if self.value is None else round(self.value, 4),
        }


@dataclass(frozen=True, slots=True)
class Report:
    """The figures of the incidents opened in [since, until]: `values[Figure]`."""

    since: datetime | None
    until: datetime
    values: dict[Figure, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        figures: dict[str, Any] = {}
        for figure, value in self.values.items():
            figures[figure.key] = value.to_json() if hasattr(value, "to_json") else value
        return {
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat(),
            "figures": figures,
        }


def _seconds(later: datetime | None, earlier: datetime | None) -> float | None:
    if later is None or earlier is None:
        return None
    return (later - earlier).total_seconds()


def _spread(values: Iterable[float | None]) -> Spread:
    return Spread.of(v for v in values if v is not None)


def _repeats(ids_of: Iterable[tuple[str, Iterable[str]]]) -> dict[str, list[str]]:
    incidents: dict[str, list[str]] = defaultdict(list)
    for incident_id, ids in ids_of:
        for found in dict.fromkeys(ids):
            if found:
                incidents[found].append(incident_id)
    return {k: v for k, v in sorted(incidents.items()) if len(v) >= REPEAT}


def _week(at: datetime) -> str:
    year, week, _ = at.isocalendar()
    return f"{year}-W{week:02d}"


def compute(
    chains: Mapping[str, Sequence[AuditEntry]],
    incidents: Mapping[str, Incident] | None = None,
    *,
    until: datetime,
    since: datetime | None = None,
) -> Report:
    """The figures of the incidents opened in [since, until] (`since` None: all of them), from
    every chain of the audit log and the incident records by id (optional: without them the
    check falls back to the alarm's metric, and GPU UUIDs, logical ids and exposure are
    unknown)."""
    records = incidents or {}
    found: list[IncidentFacts] = []
    left_out = 0
    for subject, entries in chains.items():
        if not verify_chain(entries).ok:
            left_out += 1
            continue
        facts = facts_of(entries, records.get(subject))
        if facts is None:
            left_out += any(e.action in OPENINGS for e in entries)
            continue
        if (since is None or facts.opened_at >= since) and facts.opened_at <= until:
            found.append(facts)
    found.sort(key=lambda f: (f.opened_at, f.incident_id))
    acted = [f for f in found if f.acted_on]
    # A repeat is counted as the escalation counts it (`set_aside`): from no held
    # incident (nothing checked it), none an approver rejected (reports any pod can forge
    # against a healthy node are rejected) and none left to expire that proposed no recovery
    # (forged alarm datapoints alone).
    weighed = [f for f in found if not f.held and not set_aside(f.state, f.advice)]
    by_node: Counter[str] = Counter(f.logical_id for f in weighed if f.logical_id)
    by_gpu: Counter[str] = Counter(g for f in weighed for g in set(f.gpu_uuids))

    def confirmed(f: IncidentFacts) -> bool:
        repeat = by_node[f.logical_id] >= REPEAT or any(by_gpu[g] >= REPEAT for g in f.gpu_uuids)
        return f.health_failed or f.hardware or bool(f.history) or repeat

    released = [f for f in found if f.released and f.health_passed and not f.acted_on]

    def stayed(f: IncidentFacts) -> bool:
        return not any(
            o.instance_id == f.instance_id and o.opened_at > f.opened_at and not o.held
            for o in found
        )

    weeks: Counter[str] = Counter(_week(f.decided_at) for f in found if f.decided_at)
    values: dict[Figure, Any] = {
        Figure.INCIDENTS: len(found),
        Figure.BY_TRIGGER: dict(sorted(Counter(f.source for f in found).items())),
        Figure.BY_CHECK: dict(sorted(Counter(f.check for f in found).items())),
        Figure.HELD: dict(sorted(Counter(f.held for f in found if f.held).items())),
        Figure.OUTCOMES: dict(sorted(Counter(f.state for f in found if f.state).items())),
        Figure.TIME_TO_ISOLATE: _spread(_seconds(f.isolated_at, f.opened_at) for f in found),
        Figure.TIME_TO_DECISION: _spread(_seconds(f.decided_at, f.opened_at) for f in found),
        Figure.TIME_TO_RECOVERY: _spread(
            _seconds(f.closed_at, f.opened_at) for f in found if f.recovered
        ),
        Figure.DECISION_LATENCY: _spread(
            _seconds(f.decided_at, f.approval_requested_at) for f in found
        ),
        Figure.EXPOSURE_STEPS: _spread(f.exposure_steps for f in found),
        Figure.APPROVALS_PER_WEEK: dict(sorted(weeks.items())),
        Figure.ACTED_ON: len(acted),
        Figure.PRECISION: Ratio(sum(1 for f in acted if confirmed(f)), len(acted)),
        Figure.RELEASED_STAYED: Ratio(sum(1 for f in released if stayed(f)), len(released)),
        Figure.REPEAT_BY_NODE: _repeats((f.incident_id, [f.logical_id]) for f in weighed),
        Figure.REPEAT_BY_GPU: _repeats((f.incident_id, f.gpu_uuids) for f in weighed),
        Figure.LEFT_OUT: left_out,
    }
    return Report(since=since, until=until, values=values)


def since_of(text: str, now: datetime) -> datetime:
    """`30d`, `12h`, `90m` or `2w` before `now`; ValueError naming the forms otherwise."""
    units = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
    amount, unit = text[:-1], text[-1:]
    if unit not in units or not amount.isdigit() or int(amount) < 1:
        raise ValueError(
            f"{text!r} is not a period: a whole number and m, h, d or w (e.g. 30d, 12h)"
        )
    return now - timedelta(**{units[unit]: int(amount)})
