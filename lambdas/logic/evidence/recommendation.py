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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from trainer_emitter.contract import Check, VerdictKind


class Advice(StrEnum):
    REPLACE = "replace after review"
    REBOOT = "reboot, then health-check again (the node stays isolated until it passes)"
    HEALTH_CHECK_ONLY = "health check only, no replacement proposed"

    @property
    def strength(self) -> int:
        return _STRENGTH[self]


_STRENGTH = {Advice.HEALTH_CHECK_ONLY: 0, Advice.REBOOT: 1, Advice.REPLACE: 2}


@dataclass(frozen=True, slots=True)
class Recommendation:
    advice: Advice
    reasons: tuple[str, ...]


def assess_report(report: dict[str, Any]) -> tuple[Advice, str]:
    """The advice one report evidence summary gives for its instance, and why."""
    ranks = set(report.get("ranks") or [])
    check = report.get("check")
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


def recommend(
    reports: Sequence[dict[str, Any]],
    health_result: str | None,
    history: Sequence[str] = (),
    *,
    job_level: bool = False,
    rebooted: bool = False,
    unconfirmed: bool = False,
) -> Recommendation:
    """The advice for an incident from all its report evidence, the health check result,
    `history` (ids of past incidents of the same instance or GPU that count as history) and
    whether the node was already rebooted in this incident (then the check was the one after
    the reboot, and a reboot is not offered again). `unconfirmed`: the checks did not confirm
    what the reports claim about the node, so they propose nothing beyond a health check (a
    failed deep health check, HyperPod's own finding, still does)."""
    if job_level:
        return Recommendation(
            Advice.HEALTH_CHECK_ONLY,
            ("ambiguous alarm: the involved nodes are health-checked, no replacement proposed",),
        )
    assessed = [assess_report(r) for r in reports]
    reasons = [reason for _, reason in assessed]
    if assessed:
        advice = max((a for a, _ in assessed), key=lambda a: a.strength)
    else:
        advice = Advice.HEALTH_CHECK_ONLY
        reasons.append("no SDC report for this instance: the alarm alone names no rank")
    transient = sum(1 for a, _ in assessed if a is Advice.REBOOT)
    if transient >= 2:
        advice = Advice.REPLACE
        reasons.append(f"the transient fault recurred ({transient} reports)")
    elif transient and history:
        advice = Advice.REPLACE
        reasons.append(
            f"transient fault on a node with history: {len(history)} past incident(s) "
            f"({', '.join(history[:5])})"
        )
    if unconfirmed and advice is not Advice.HEALTH_CHECK_ONLY:
        advice = Advice.HEALTH_CHECK_ONLY
        reasons.append(
            "what the reports claim about this node was not confirmed (CLAIMS NOT CONFIRMED): "
            "they propose nothing beyond a health check"
        )
    if health_result == "failed":
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


def _ranks(ranks: Sequence[int]) -> str:
    return ", ".join(str(r) for r in ranks)
