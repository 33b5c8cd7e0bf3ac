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

A failed idle sweep check (`lambdas.logic.sweep`; InstanceStress or InstanceConnectivity on a
node no job was using) is hardware evidence → replace after review (`SWEEP_ROW`, `assess_sweep`).

Hardware alerts (the GPU's own counters, `lambdas.logic.intake.hardware_alerts`):
- a hardware signal alone → health check, then reboot; replace when the memory cannot repair
  itself (row remap failure, uncorrectable ECC: severity critical), when the same rule fires
  again after its first start, or on a node with history.
- a hardware signal with SDC evidence on the same node → one tier stronger than the reports
  alone say (health check → reboot, reboot → replace), the card says why.

The watch rows also decide what the pipeline does before anyone decides (`WatchRow.course`,
read through `course_of` by the opening and the isolation step): a straggler without hardware
corroboration is a notice only (held, kind `notice`: nothing isolated, no health check, nothing
proposed), a hang the table calls ambiguous is health-checked without isolation; any evidence
beyond the training watch's acts.

`judge` is the one place an incident is judged: at the approval request, and again when later
evidence attaches to a judged incident. It returns the `Recommendation` record the incident
stores; every card, notice, event and command words that record.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Any, Final

from lambdas.logic.core.steps import Step
from lambdas.models.audit import AuditAction
from lambdas.models.guard import PastIncident
from lambdas.models.hardware_alert import AlertSeverity
from lambdas.models.health_check import HealthCheckResult
from lambdas.models.incident import Incident, TriggerSource
from lambdas.models.quantity import count
from lambdas.models.recommendation import MAX_PAST, Advice, Course, Recommendation
from trainer_emitter.contract import Check, Metric, Role, VerdictKind


class WatchRow(Enum):
    """The decision table's rows for the training watch's reports (check `hang`, `straggler`):
    the evidence, the advice, what the pipeline does before anyone decides (`course`: the one
    place that decides it, read by the opening and the isolation step through `course_of`),
    and what the card says. The training operator restarting the job is the lowest tier and
    happens without us: every hang row says so."""

    HANG_LOCALISED = (
        "hang localised to this instance, with a second independent signal agreeing",
        Advice.REBOOT,
        Course.ACT,
        "isolate, health-check, reboot (replace on a repeat)",
    )
    HANG_AMBIGUOUS = (
        "hang spanning instances, localised by one signal only, or naming no rank here",
        Advice.HEALTH_CHECK_ONLY,
        Course.CHECK,
        "notice and health check of the named nodes within the guard; nothing isolated, "
        "no recovery proposed",
    )
    STRAGGLER_CORROBORATED = (
        "straggler on this instance for k windows, with hardware corroboration",
        Advice.REBOOT,
        Course.ACT,
        "isolate, health-check, reboot",
    )
    STRAGGLER_ALONE = (
        "straggler without hardware corroboration, or on several instances",
        Advice.HEALTH_CHECK_ONLY,
        Course.NOTICE,
        "notice only: nothing isolated, no health check, no recovery proposed",
    )

    def __init__(self, evidence: str, advice: Advice, course: Course, action: str) -> None:
        self.evidence = evidence
        self.advice = advice
        self.course = course
        self.action = action


OPERATOR_TIER: Final = (
    "the training operator restarts the job by itself (its lowest tier, no node changes); "
    "this recommendation is about the node"
)
HARDWARE_SIGNAL: Final = "hardware"


def assess_watch(report: dict[str, Any], hardware: Sequence[str]) -> tuple[WatchRow, str]:
    """The row of a hang or straggler report summary for its instance, and why. `hardware`:
    the node's telemetry signals in this incident (XIDs, throttle reasons, link counters):
    the independent signal the trainer cannot give."""
    ranks = set(report.get("ranks") or [])
    localised = report.get("role") == Role.CULPRIT
    corroboration = f"hardware: {'; '.join(hardware[:3])}" if hardware else "no hardware signal"
    if report.get("check") == Check.HANG:
        hang = report.get("hang") or {}
        named = sorted(
            ranks & set(hang.get("missing_ranks", []))
            | ranks & set(hang.get("silent_ranks", []))
            | ranks & set(hang.get("odd_stack_ranks", []))
        )
        signals = [*hang.get("signals", []), *([HARDWARE_SIGNAL] if hardware else [])]
        where = f"rank {_ranks(named)}" if named else "no rank here"
        if localised and named and len(signals) >= 2:
            return WatchRow.HANG_LOCALISED, (
                f"hang localised to this instance ({where}) by {' and '.join(signals)}; "
                + OPERATOR_TIER
            )
        return WatchRow.HANG_AMBIGUOUS, (
            f"hang names {where}, signals: {', '.join(signals) or 'none'}"
            + ("" if localised else ", spanning instances")
            + "; "
            + OPERATOR_TIER
        )
    straggler = report.get("straggler") or {}
    flagged = sorted(ranks & set(straggler.get("flagged", [])))
    what = (
        f"rank {_ranks(flagged)} below {straggler.get('threshold')} for "
        f"{count(straggler.get('windows_required') or 0, 'window')} of "
        f"{count(straggler.get('window_steps') or 0, 'step')}"
    )
    if localised and flagged and hardware:
        return WatchRow.STRAGGLER_CORROBORATED, f"straggler: {what}; {corroboration}"
    return WatchRow.STRAGGLER_ALONE, f"straggler: {what}; {corroboration}: notice only"


_WATCH_METRICS: Final = (Metric.HANG, Metric.STRAGGLER)


def course_of(incident: Incident) -> tuple[Course, str]:
    """What the pipeline does with `incident` before anyone decides, and why. Evidence beyond
    the training watch's (an SDC report or alarm, a hardware alert) acts; the watch's reports
    alone go by their rows (`WatchRow.course`), the strongest course winning, corroborated by
    the node's telemetry signals recorded on the incident and its firing hardware alerts (as
    `recommend` reads them, so the course and the advice come from the same row)."""
    reports = incident.reports
    beyond = [e for e in incident.evidence if not watch_evidence(e)]
    if beyond or not incident.evidence:
        return Course.ACT, "evidence beyond the training watch's: the pipeline acts"
    if not reports:
        metrics = {a.get("metric") for a in incident.alarms}
        row = WatchRow.HANG_AMBIGUOUS if Metric.HANG in metrics else WatchRow.STRAGGLER_ALONE
        return row.course, f"{row.evidence}: the watch's alarm alone names no rank"
    corroboration = (
        *_telemetry_signals(incident),
        *(f"alert {a.get('rule')}" for a in incident.hardware),
    )
    rows = [assess_watch(r, corroboration) for r in reports]
    row, reason = max(rows, key=lambda found: found[0].course.strength)
    return row.course, f"{row.evidence}: {reason}"


def watch_evidence(item: dict[str, Any]) -> bool:
    """An evidence item only the training watch gives: its report or its alarm."""
    if item.get("kind") == TriggerSource.REPORT:
        return item.get("check") in _WATCH
    if item.get("kind") == TriggerSource.ALARM:
        return item.get("metric") in _WATCH_METRICS
    return False


def assess_report(report: dict[str, Any], hardware: Sequence[str] = ()) -> tuple[Advice, str]:
    """The advice one report evidence summary gives for its instance, and why."""
    ranks = set(report.get("ranks") or [])
    check = report.get("check")
    if check in (Check.HANG, Check.STRAGGLER):
        row, reason = assess_watch(report, hardware)
        return row.advice, reason
    if check == Check.WEIGHTS:
        suspects = report.get("weight_suspects")
        if suspects is None:
            return Advice.HEALTH_CHECK_ONLY, "weights: no strict majority among replicas"
        mine = sorted(ranks & set(suspects))
        if mine:
            return Advice.REPLACE, f"weights: rank {_ranks(mine)} differs from the majority copy"
        return Advice.HEALTH_CHECK_ONLY, "weights: the minority copy is on another instance"
    if check == Check.REDUCED_GRADIENT:
        return Advice.HEALTH_CHECK_ONLY, "non-finite reduced gradient: names no rank"

    culprits = sorted(ranks & set(report.get("culprits") or []))
    if culprits:
        return (
            Advice.REPLACE,
            f"rank {_ranks(culprits)} mismatched in both of its ring comparisons",
        )
    by_verdict = [_assess_verdict(v) for v in report.get("verdicts") or [] if v["suspect"] in ranks]
    if by_verdict:
        return max(by_verdict, key=lambda item: item[0].strength)
    nonfinite = sorted(ranks & set(report.get("nonfinite") or []))
    if nonfinite and not report.get("mismatched_pairs"):
        return (
            Advice.HEALTH_CHECK_ONLY,
            f"non-finite gradient on rank {_ranks(nonfinite)} without a replay mismatch",
        )
    return Advice.HEALTH_CHECK_ONLY, "the report names no rank on this instance for certain"


def _assess_verdict(verdict: dict[str, Any]) -> tuple[Advice, str]:
    kind = VerdictKind(verdict["kind"])
    where = f"rank {verdict['suspect']} (pair {verdict['pair']}, third rank {verdict['third']})"
    if kind is VerdictKind.PERSISTENT:
        return Advice.REPLACE, f"persistent fault confirmed on {where}"
    if kind is VerdictKind.REPLAYER:
        return Advice.REPLACE, f"the replayer computed wrong: {where}"
    if kind is VerdictKind.TRANSIENT:
        return Advice.REBOOT, f"transient fault on {where}"
    return Advice.HEALTH_CHECK_ONLY, f"unattributable mismatch involving {where}"


def assess_hardware(
    alerts: Sequence[dict[str, Any]], history: Sequence[str]
) -> tuple[Advice, list[str]]:
    """The advice the firing hardware alerts of an incident give alone, and why."""
    rules = sorted({str(a.get("rule")) for a in alerts})
    reasons = [f"hardware alert: {', '.join(rules)} on the node's own counters"]
    critical = sorted(
        {str(a.get("rule")) for a in alerts if a.get("severity") == AlertSeverity.CRITICAL}
    )
    starts: dict[str, set[str]] = {}
    for a in alerts:
        starts.setdefault(str(a.get("rule")), set()).add(str(a.get("starts_at")))
    repeated = sorted(rule for rule, seen in starts.items() if len(seen) >= 2)
    if critical:
        reasons.append(f"{', '.join(critical)}: the GPU's memory cannot repair itself")
        return Advice.REPLACE, reasons
    if repeated:
        reasons.append(f"{', '.join(repeated)} fired again after it resolved: a repeat")
        return Advice.REPLACE, reasons
    if history:
        reasons.append(f"hardware signal on a node with history: {len(history)} past incident(s)")
        return Advice.REPLACE, reasons
    reasons.append("a hardware signal alone: reboot, replace on a repeat")
    return Advice.REBOOT, reasons


SWEEP_ROW: Final = (
    "a deep health check an idle sweep ran failed (InstanceStress or InstanceConnectivity) "
    "on a node no job was using",
    Advice.REPLACE,
)
"""The decision table's row for a failed sweep check: hardware evidence, replace after review.
No job ran there, so nothing of a job's software or data can explain it; it is HyperPod's own
finding under load, which the table already takes as reason enough to propose replacing (a
reboot clears neither a GPU that fails DCGM's diagnostics nor a link that fails NCCL and EFA
tests under load, and rebooting first would return a suspect node to the idle pool unproven;
the approver may still choose a reboot)."""


def assess_sweep(failed: Sequence[dict[str, Any]]) -> tuple[Advice, list[str]]:
    """The advice the failed sweep checks of an incident give, and why (`SWEEP_ROW`)."""
    checks = sorted({str(c) for item in failed for c in item.get("checks") or []})
    seen = "; ".join(sorted({str(item.get("message")) for item in failed if item.get("message")}))
    return SWEEP_ROW[1], [
        f"idle sweep: {', '.join(checks) or 'a deep health check'} failed on the idle node"
        + (f" ({seen})" if seen else ""),
        f"{SWEEP_ROW[0]}: {SWEEP_ROW[1].tier}",
    ]


def _stronger(advice: Advice) -> Advice:
    return Advice.REBOOT if advice is Advice.HEALTH_CHECK_ONLY else Advice.REPLACE


def recommend(
    reports: Sequence[dict[str, Any]],
    health_result: str | None,
    history: Sequence[str] = (),
    *,
    job_level: bool = False,
    rebooted: bool = False,
    unconfirmed: bool = False,
    telemetry: Sequence[str] = (),
    alerts: Sequence[dict[str, Any]] = (),
    repeat: str | None = None,
    sweeps: Sequence[dict[str, Any]] = (),
) -> Recommendation:
    """The advice for an incident from all its report evidence, the health check result,
    `history` (ids of past incidents of the same instance or GPU that count as history) and
    whether the node was already rebooted in this incident (then the check was the one after
    the reboot, and a reboot is not offered again). `unconfirmed`: the checks did not confirm
    what the reports claim about the node, so they propose nothing beyond a health check (a
    failed deep health check, HyperPod's own finding, still does). `telemetry`: the node's
    telemetry signals; they and the firing hardware `alerts` (the workspace's alert rules) are
    what corroborates a hang or a straggler (`WatchRow`); the alerts also advise on their own
    (`assess_hardware`). `repeat`: why the node or a GPU of it is a repeat offender
    (`lambdas.logic.evidence.history.repeat_offence`): replacement is proposed, unless the
    checks did not confirm the reports' claims."""
    if job_level:
        return Recommendation(
            Advice.HEALTH_CHECK_ONLY,
            ("ambiguous alarm: the involved nodes are health-checked, no replacement proposed",),
        )
    corroboration = (*telemetry, *(f"alert {a.get('rule')}" for a in alerts))
    assessed = [assess_report(r, corroboration) for r in reports]
    reasons = [reason for _, reason in assessed]
    if assessed:
        advice = max((a for a, _ in assessed), key=lambda a: a.strength)
        if alerts:
            alone, why = assess_hardware(alerts, history)
            stronger = max(_stronger(advice), alone, key=lambda a: a.strength)
            reasons += [
                *why,
                f"SDC evidence and a hardware signal on the same node: {stronger.tier}",
            ]
            advice = stronger
    elif alerts:
        advice, why = assess_hardware(alerts, history)
        reasons += why
    elif sweeps:
        advice = Advice.HEALTH_CHECK_ONLY  # the sweep's row below
    else:
        advice = Advice.HEALTH_CHECK_ONLY
        reasons.append("no SDC report for this instance: the alarm alone names no rank")
    transient = sum(1 for a, _ in assessed if a is Advice.REBOOT)
    if transient >= 2:
        advice = Advice.REPLACE
        reasons.append(f"the transient fault recurred ({transient} reports)")
    elif transient and history and any(r.get("check") in _WATCH for r in reports):
        advice = Advice.REPLACE
        reasons.append(
            f"a repeat on a node with history: {len(history)} past incident(s) "
            f"({', '.join(history[:5])})"
        )
    elif transient and history:
        advice = Advice.REPLACE
        reasons.append(
            f"transient fault on a node with history: {len(history)} past incident(s) "
            f"({', '.join(history[:5])})"
        )
    if repeat:
        advice = Advice.REPLACE
        reasons.append(f"repeat offender: {repeat}")
    if unconfirmed and advice is not Advice.HEALTH_CHECK_ONLY:
        advice = Advice.HEALTH_CHECK_ONLY
        reasons.append(
            "what the reports claim about this node was not confirmed (CLAIMS NOT CONFIRMED): "
            "they propose nothing beyond a health check"
        )
    if sweeps:  # HyperPod's own finding, as a failed health check is: never downgraded
        swept, why = assess_sweep(sweeps)
        advice = max(advice, swept, key=lambda a: a.strength)
        reasons += why
    if health_result == HealthCheckResult.FAILED:
        advice = Advice.REPLACE
        reasons.append(
            "the deep health check failed again after the reboot"
            if rebooted
            else "the deep health check failed"
        )
    elif rebooted and advice is Advice.REBOOT:
        advice = Advice.REPLACE
        reasons.append("the node was already rebooted in this incident: replace or reject")
    return Recommendation(advice, tuple(reasons))


_WATCH: Final = (Check.HANG, Check.STRAGGLER)


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
