"""The decision table carried into the approval card (README, "Approve a replacement"), with the
recovery tier it recommends: health check only, reboot, or replace.

Each report is read for the ranks on the incident's instance:
- weights, suspects [r] → r's copy differs from the majority → replace after review;
  weights, suspects None → no strict majority → ambiguous: health check only.
- culprits [r] → both ring comparisons of r mismatched → replace after review.
- verdict persistent → replace after review; transient (first time on this instance and GPU)
  → reboot, keeping the node isolated until the health check after the reboot passes;
  replayer computed wrong → the replayer is the suspect → replace after review;
  unattributable → health check only.
- nonfinite without mismatched pairs, or check "reduced gradient" → ambiguous: health check only.
Across reports the strongest advice wins; a transient verdict seen twice is a recurrence, and
so is a transient verdict on a node with history (a past incident of the same instance or the
same GPU UUID): both are proposed for replacement. A failed deep health check is reason enough
to propose replacing, and so is one that failed again after a reboot. A job-level incident (an
ambiguous report) never proposes a replacement.

A failed idle sweep check (`sdc_remediation.lambdas.logic.sweep`; InstanceStress or InstanceConnectivity on a
node no job was using) is hardware evidence → replace after review (`policy.Row.SWEEP_FAILED`, `assess_sweep`).

Hardware alerts (the GPU's own counters, `sdc_remediation.lambdas.logic.intake.hardware_alerts`):
- a hardware signal alone → health check, then reboot; replace when the memory cannot repair
  itself (row remap failure, uncorrectable ECC: severity critical), when the same rule fires
  again after its first start, or on a node with history.
- a hardware signal with SDC evidence on the same node → one tier stronger than the reports
  alone say (health check → reboot, reboot → replace), the card says why.

Every advice, course and reason comes from a row of the one table (`policy.Row`); this module
reads the evidence into rows. The rows also decide what the pipeline does before anyone decides
(`Row.course`, read through `course_of` by the opening and the isolation step): a straggler
without hardware corroboration is a notice only (held, kind `notice`: nothing isolated, no
health check, nothing proposed), a hang the table calls ambiguous is health-checked without
isolation; any evidence beyond the training watch's acts.

`judge` is the one place an incident is judged: at the approval request, and again when later
evidence attaches to a judged incident. It returns the `Recommendation` record the incident
stores; every card, notice, event and command words that record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from sdc_remediation.lambdas.logic.core.steps import Step
from sdc_remediation.lambdas.logic.evidence.policy import (
    MIN_AGREEING_SIGNALS,
    Row,
    stronger,
    strongest,
)
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.evidence import (
    AlarmEvidence,
    Evidence,
    HangSummary,
    HardwareEvidence,
    ReportEvidence,
    StragglerSummary,
    SweepEvidence,
    VerdictEvidence,
)
from sdc_remediation.lambdas.models.guard import PastIncident
from sdc_remediation.lambdas.models.hardware_alert import AlertSeverity
from sdc_remediation.lambdas.models.health_check import HealthCheckResult
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.quantity import count
from sdc_remediation.lambdas.models.recommendation import MAX_PAST, Advice, Course, Recommendation
from trainer_emitter.contract import Check, Metric, Role, VerdictKind

OPERATOR_TIER: Final = (
    "the training operator restarts the job by itself (its lowest tier, no node changes); "
    "this recommendation is about the node"
)
HARDWARE_SIGNAL: Final = "hardware"


def assess_watch(report: ReportEvidence, hardware: Sequence[str]) -> tuple[Row, str]:
    """The row of a hang or straggler report summary for its instance, and why. `hardware`:
    the node's telemetry signals in this incident (XIDs, throttle reasons, link counters):
    the independent signal the trainer cannot give."""
    ranks = set(report.ranks)
    localised = report.role is Role.CULPRIT
    corroboration = f"hardware: {'; '.join(hardware[:3])}" if hardware else "no hardware signal"
    if report.check is Check.HANG:
        hang = report.hang or HangSummary()
        named = hang.ranks_named(ranks)
        signals = [*hang.signals, *([HARDWARE_SIGNAL] if hardware else [])]
        where = f"rank {_ranks(named)}" if named else "no rank here"
        if localised and named and len(signals) >= MIN_AGREEING_SIGNALS:
            return Row.HANG_LOCALISED_BY_AGREEING_SIGNALS, (
                f"hang localised to this instance ({where}) by {' and '.join(signals)}; "
                + OPERATOR_TIER
            )
        return Row.HANG_AMBIGUOUS, (
            f"hang names {where}, signals: {', '.join(signals) or 'none'}"
            + ("" if localised else ", spanning instances")
            + "; "
            + OPERATOR_TIER
        )
    straggler = report.straggler or StragglerSummary()
    flagged = sorted(ranks & set(straggler.flagged))
    what = (
        f"rank {_ranks(flagged)} below {straggler.threshold} for "
        f"{count(straggler.windows_required or 0, 'window')} of "
        f"{count(straggler.window_steps or 0, 'step')}"
    )
    if localised and flagged and hardware:
        return Row.STRAGGLER_CORROBORATED, f"straggler: {what}; {corroboration}"
    return Row.STRAGGLER_ALONE, f"straggler: {what}; {corroboration}: notice only"


_WATCH_METRICS: Final = (Metric.HANG, Metric.STRAGGLER)


def course_of(incident: Incident) -> tuple[Course, str]:
    """What the pipeline does with `incident` before anyone decides, and why. Evidence beyond
    the training watch's (an SDC report or alarm, a hardware alert) acts; the watch's reports
    alone go by their rows (`Row.course`), the strongest course winning, corroborated by
    the node's telemetry signals recorded on the incident and its firing hardware alerts (as
    `recommend` reads them, so the course and the advice come from the same row)."""
    reports = incident.reports
    items = incident.items
    if not items or not all(watch_evidence(e) for e in items):
        return Row.BEYOND_THE_WATCH.course, Row.BEYOND_THE_WATCH.says()
    if not reports:
        metrics = {a.metric for a in incident.alarms}
        row = Row.HANG_AMBIGUOUS if Metric.HANG in metrics else Row.STRAGGLER_ALONE
        return row.course, f"{row.evidence}: the watch's alarm alone names no rank"
    corroboration = _corroboration(_telemetry_signals(incident), incident.hardware)
    rows = [assess_watch(r, corroboration) for r in reports]
    row, reason = max(rows, key=lambda found: found[0].course.strength)
    return row.course, f"{row.evidence}: {reason}"


def watch_evidence(item: Evidence) -> bool:
    """An evidence item only the training watch gives: its report or its alarm."""
    if isinstance(item, ReportEvidence):
        return item.watch
    if isinstance(item, AlarmEvidence):
        return item.metric in _WATCH_METRICS
    return False


def report_row(report: ReportEvidence, hardware: Sequence[str] = ()) -> tuple[Row, str]:
    """The row one report evidence summary reads as for its instance, and why. A report that
    does not point at the instance (names it involved only, or is ambiguous:
    `SdcReport.points_at`) proposes nothing beyond a health check there, whatever its evidence
    reads as: it only joins the node's open incident, and nobody was asked about the node for
    it, so what it says of the node is a pod's word alone."""
    row, why = _report_row(report, hardware)
    if row.proposes_recovery and (report.ambiguous or report.role is Role.INVOLVED):
        return Row.NO_RANK_HERE, f"{Row.NO_RANK_HERE.says()} (it names the instance involved)"
    return row, why


def _report_row(report: ReportEvidence, hardware: Sequence[str]) -> tuple[Row, str]:
    ranks = set(report.ranks)
    check = report.check
    if report.watch:
        return assess_watch(report, hardware)
    if check is Check.WEIGHTS:
        suspects = report.weight_suspects
        if suspects is None:
            return Row.WEIGHTS_NO_MAJORITY, Row.WEIGHTS_NO_MAJORITY.says()
        mine = sorted(ranks & set(suspects))
        if mine:
            return Row.WEIGHTS_MINORITY_HERE, Row.WEIGHTS_MINORITY_HERE.says(ranks=_ranks(mine))
        return Row.WEIGHTS_MINORITY_ELSEWHERE, Row.WEIGHTS_MINORITY_ELSEWHERE.says()
    if check is Check.REDUCED_GRADIENT:
        return Row.REDUCED_GRADIENT, Row.REDUCED_GRADIENT.says()

    culprits = sorted(ranks & set(report.culprits))
    if culprits:
        return Row.RING_CULPRIT, Row.RING_CULPRIT.says(ranks=_ranks(culprits))
    by_verdict = [_verdict_row(v) for v in report.verdicts if v.suspect in ranks]
    if by_verdict:
        return max(by_verdict, key=lambda item: item[0].advice.strength)
    nonfinite = sorted(ranks & set(report.nonfinite))
    if nonfinite and not report.mismatched_pairs:
        row = Row.NONFINITE_WITHOUT_MISMATCH
        return row, row.says(ranks=_ranks(nonfinite))
    return Row.NO_RANK_HERE, Row.NO_RANK_HERE.says()


_VERDICT_ROWS: Final = {
    VerdictKind.PERSISTENT: Row.PERSISTENT,
    VerdictKind.REPLAYER: Row.REPLAYER_WRONG,
    VerdictKind.TRANSIENT: Row.TRANSIENT,
    VerdictKind.UNATTRIBUTABLE: Row.UNATTRIBUTABLE,
}


def _verdict_row(verdict: VerdictEvidence) -> tuple[Row, str]:
    row = _VERDICT_ROWS[verdict.kind]
    where = f"rank {verdict.suspect} (pair {list(verdict.pair)}, third rank {verdict.third})"
    return row, row.says(where=where)


def assess_hardware(
    alerts: Sequence[HardwareEvidence], history: Sequence[str]
) -> tuple[Advice, list[str]]:
    """The advice the firing hardware alerts of an incident give alone, and why."""
    rules = sorted({str(a.rule) for a in alerts})
    reasons = [f"hardware alert: {', '.join(rules)} on the node's own counters"]
    critical = sorted({str(a.rule) for a in alerts if a.severity is AlertSeverity.CRITICAL})
    starts: dict[str, set[str]] = {}
    for a in alerts:
        starts.setdefault(str(a.rule), set()).add(a.starts_at)
    repeated = sorted(rule for rule, seen in starts.items() if len(seen) >= 2)
    if critical:
        row, reason = Row.HARDWARE_CRITICAL, Row.HARDWARE_CRITICAL.says(rules=", ".join(critical))
    elif repeated:
        row, reason = Row.HARDWARE_REPEATED, Row.HARDWARE_REPEATED.says(rules=", ".join(repeated))
    elif history:
        row, reason = Row.HARDWARE_WITH_HISTORY, Row.HARDWARE_WITH_HISTORY.says(count=len(history))
    else:
        row, reason = Row.HARDWARE_ALONE, Row.HARDWARE_ALONE.says()
    return row.advice, [*reasons, reason]


def assess_sweep(failed: Sequence[SweepEvidence]) -> tuple[Advice, list[str]]:
    """The advice the failed sweep checks of an incident give, and why (`Row.SWEEP_FAILED`)."""
    checks = sorted({c for item in failed for c in item.checks})
    seen = "; ".join(sorted({item.message for item in failed if item.message}))
    row = Row.SWEEP_FAILED
    return row.advice, [
        row.says(
            checks=", ".join(checks) or "a deep health check", seen=f" ({seen})" if seen else ""
        )
    ]


def recommend(
    reports: Sequence[ReportEvidence],
    health_result: str | None,
    history: Sequence[str] = (),
    *,
    job_level: bool = False,
    rebooted: bool = False,
    unconfirmed: bool = False,
    telemetry: Sequence[str] = (),
    alerts: Sequence[HardwareEvidence] = (),
    repeat: str | None = None,
    sweeps: Sequence[SweepEvidence] = (),
) -> Recommendation:
    """The advice for an incident from all its report evidence, the health check result,
    `history` (ids of past incidents of the same instance or GPU that count as history) and
    whether the node was already rebooted in this incident (then the check was the one after
    the reboot, and a reboot is not offered again). `unconfirmed`: the checks did not confirm
    what the reports claim about the node, so they propose nothing beyond a health check (a
    failed deep health check, HyperPod's own finding, still does). `telemetry`: the node's
    telemetry signals; they and the firing hardware `alerts` (the workspace's alert rules) are
    what corroborates a hang or a straggler (`policy.Row`); the alerts also advise on their own
    (`assess_hardware`). `repeat`: why the node or a GPU of it is a repeat offender
    (`sdc_remediation.lambdas.logic.evidence.history.repeat_offence`): replacement is proposed, unless the
    checks did not confirm the reports' claims."""
    if job_level:
        return Recommendation(Row.JOB_LEVEL.advice, (Row.JOB_LEVEL.says(),))
    corroboration = _corroboration(telemetry, alerts)
    assessed = [report_row(r, corroboration) for r in reports]
    reasons = [reason for _, reason in assessed]
    if assessed:
        advice = strongest([row.advice for row, _ in assessed])
        if alerts:
            alone, why = assess_hardware(alerts, history)
            both = strongest([stronger(advice), alone])
            reasons += [*why, f"SDC evidence and a hardware signal on the same node: {both.tier}"]
            advice = both
    elif alerts:
        advice, why = assess_hardware(alerts, history)
        reasons += why
    elif sweeps:
        advice = Row.ALARM_ALONE.advice  # the sweep's row below decides
    else:
        advice = Row.ALARM_ALONE.advice
        reasons.append(Row.ALARM_ALONE.says())

    def adjust(row: Row, **particulars: object) -> None:
        nonlocal advice
        advice = row.advice
        reasons.append(row.says(**particulars))

    reboots = Row.TRANSIENT.advice  # a transient fault's (and a localised watch row's) advice
    transient = sum(1 for row, _ in assessed if row.advice is reboots)
    if transient >= 2:
        adjust(Row.TRANSIENT_RECURRED, count=transient)
    elif transient and history:
        adjust(
            Row.WATCH_REPEAT_WITH_HISTORY
            if any(r.watch for r in reports)
            else Row.TRANSIENT_WITH_HISTORY,
            count=len(history),
            ids=", ".join(history[:5]),
        )
    if repeat:
        adjust(Row.REPEAT_OFFENDER, why=repeat)
    if unconfirmed and advice is not Row.UNCONFIRMED.advice:
        adjust(Row.UNCONFIRMED)
    if sweeps:  # HyperPod's own finding, as a failed health check is: never downgraded
        swept, why = assess_sweep(sweeps)
        advice = strongest([advice, swept])
        reasons += why
    if health_result == HealthCheckResult.FAILED:
        adjust(Row.FAILED_AGAIN_AFTER_REBOOT if rebooted else Row.HEALTH_CHECK_FAILED)
    elif rebooted and advice is reboots:
        adjust(Row.ALREADY_REBOOTED)
    return Recommendation(advice, tuple(reasons))


def _corroboration(telemetry: Sequence[str], alerts: Sequence[HardwareEvidence]) -> tuple[str, ...]:
    """What corroborates a hang or a straggler (`assess_watch`'s `hardware`): the node's
    telemetry signals, then its firing hardware alerts."""
    return (*telemetry, *(f"alert {a.rule}" for a in alerts))


def _telemetry_signals(incident: Incident) -> tuple[str, ...]:
    """The node's telemetry signals in this incident, as text (none when not queried)."""
    telemetry = incident.telemetry
    return tuple(f.text for f in telemetry.signals) if telemetry else ()


def _ranks(ranks: Sequence[int]) -> str:
    return ", ".join(str(r) for r in ranks)


def judge(
    incident: Incident,
    past: Sequence[PastIncident],
    at: str,
    *,
    left_out: int = 0,
    history: Sequence[str] | None = None,
    repeat: str | None = None,
) -> Recommendation:
    """The recommendation for `incident` as recorded now: its report evidence, its deep health
    check, its reboots and the instances the checks did not confirm, with `past` (the node's
    earlier incidents, oldest first; those that count as history can turn a transient fault
    into a replacement). `history`: the ids that count, when `past` was cut (`rejudge`).
    `repeat`: why the node is a repeat offender (`history.repeat_offence`), kept on the record."""
    if history is None:
        history = [p.incident_id for p in past if p.counts_as_history]
    history = tuple(history)
    judged = recommend(
        incident.reports,
        incident.health_check.result if incident.health_check else None,
        history,
        job_level=incident.is_job,
        rebooted=incident.reboots > 0,
        unconfirmed=bool(incident.unconfirmed),
        telemetry=_telemetry_signals(incident),
        alerts=incident.hardware,
        repeat=repeat,
        sweeps=incident.sweeps,
    )
    return Recommendation(
        advice=judged.advice,
        reasons=judged.reasons,
        history=history,
        unconfirmed=tuple(sorted(incident.unconfirmed)),
        past=tuple(past[-MAX_PAST:]),
        past_left_out=left_out + max(len(past) - MAX_PAST, 0),
        judged_at=at,
        repeat_offender=repeat,
    )


def rejudge(incident: Incident, at: str) -> Recommendation | None:
    """The recommendation again after evidence attached, on the same past incidents it was
    judged on (the node's history does not change while the incident is open); None when the
    incident was never judged (its approval request will judge it)."""
    before = incident.recommendation
    if before is None:
        return None
    return judge(
        incident,
        before.past,
        at,
        left_out=before.past_left_out,
        history=before.history,
        repeat=before.repeat_offender,
    )


def audit_recommendation(step: Step, incident: Incident, cause: str) -> None:
    """The `recommended` entry of a judgement just stored on `incident`: what it advises, why,
    and what it was judged on; `cause` says what asked for it."""
    judged = incident.recommendation
    if judged is None:
        return
    step.audit(incident.incident_id, AuditAction.RECOMMENDED, {"cause": cause, **judged.to_event()})
