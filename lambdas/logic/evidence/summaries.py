"""The evidence kept on an incident: alarm events and SDC report summaries, deduplicated and
bounded (read back through `Incident.reports` and `Incident.alarms`).

EventBridge delivers at least once and several metrics can fire for one node, so the same
evidence can arrive more than once: each item has a `key` (`alarm:<event id>`,
`report:<report id>`) and is attached once. The list is capped so the incident record stays far
below DynamoDB's item size limit; what is dropped is counted. Of a report's checkpoints only the
one chosen to resume from is kept (`resume`, sdc_remediation.lambdas.logic.evidence.resume), not the whole list.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from sdc_remediation.lambdas.logic.evidence.recommendation import report_row
from sdc_remediation.lambdas.logic.evidence.resume import resume_of
from sdc_remediation.lambdas.models.events import ContributorEvent
from sdc_remediation.lambdas.models.evidence import (
    AlarmEvidence,
    Evidence,
    HangSummary,
    HardwareEvidence,
    RankStack,
    RelativeScore,
    ReportEvidence,
    Resume,
    StragglerSummary,
    SuspectEvidence,
    VerdictEvidence,
    WaitingCollective,
)
from sdc_remediation.lambdas.models.hardware_alert import HardwareAlert
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.report import (
    ReportSuspect,
    SdcReport,
    whole_number,
    whole_numbers,
)
from sdc_remediation.lambdas.models.reporter_text import clean, clean_or_none

T = TypeVar("T")

MAX_EVIDENCE = 50
MAX_REASON = 1000
MAX_NAME = 100
MAX_NODE_NAME = 253
MAX_GPU_UUID = 64
MAX_TEXT = 200
MAX_REASONS = 4
MAX_ERRORS = 8
MAX_LOCATION = 300
"""What a report's text keeps on an incident: the reporter's strings, cleaned and clipped
(`sdc_remediation.lambdas.models.reporter_text`); the report itself is stored whole under its instance."""
MAX_ITEM_BYTES = 8_000
"""A report summary larger than this keeps only what concerns its instance (`_bounded`)."""
KEPT_OTHERS = 16
MAX_EVIDENCE_BYTES = 120_000
"""All evidence on one incident: the item stays well under DynamoDB's 400 KB with the rest of
the record (a job's per-node health check, the telemetry, the decision)."""
TRUSTED_ROOM = 10
TRUSTED_ROOM_BYTES = 20_000
"""Of MAX_EVIDENCE and MAX_EVIDENCE_BYTES, the room only evidence no training pod can send
(`Evidence.trusted`: a hardware alert, a sweep's check) may take: reports and alarms, anyone's in
the account, cannot crowd a node's hardware alert off its incident."""


def alarm_evidence(alarm: ContributorEvent) -> AlarmEvidence:
    return AlarmEvidence(
        key=f"alarm:{alarm.event_id}",
        event_id=alarm.event_id,
        alarm_name=alarm.alarm_name,
        metric=alarm.metric.value,
        state_at=alarm.state_timestamp,
        reason=alarm.reason[:MAX_REASON],
        **(alarm.mute.to_json() if alarm.mute else {}),
    )


def hardware_evidence(alert: HardwareAlert, received_at: str) -> HardwareEvidence:
    """A hardware alert as the incident keeps it: one item per alert and start (a repeat of a
    still-firing alert, or its resolution, is another item: `status` says which)."""
    return HardwareEvidence(
        key=f"hardware:{clean(alert.fingerprint, MAX_NAME)}:{alert.status}:"
        f"{clean(alert.starts_at, MAX_NAME)}",
        status=alert.status,
        rule=alert.rule,
        severity=alert.severity,
        node_name=clean(alert.node_name, MAX_NODE_NAME),
        gpu=clean_or_none(alert.gpu, MAX_NAME),
        gpu_uuid=clean_or_none(alert.gpu_uuid, MAX_GPU_UUID),
        xid=clean_or_none(alert.xid, MAX_NAME),
        counter=clean_or_none(alert.counter, MAX_NAME),
        summary=clean(alert.summary, MAX_TEXT),
        starts_at=clean(alert.starts_at, MAX_NAME),
        received_at=received_at,
    )


def report_evidence(report: SdcReport, instance_id: str | None) -> ReportEvidence:
    """What the approval card needs from a report, for the ranks on `instance_id` (None: the
    whole report, for a job-level incident)."""
    if instance_id is None:
        role = None
        metrics = tuple(sorted({m.value for i in report.instances for m in i.metrics}))
        ranks = tuple(sorted(r for i in report.instances for r in i.ranks))
        suspects = report.suspects
    else:
        on_instance = report.instance(instance_id)
        role = on_instance.role if on_instance else None
        metrics = tuple(m.value for m in on_instance.metrics) if on_instance else ()
        ranks = on_instance.ranks if on_instance else ()
        suspects = tuple(s for s in report.suspects if s.instance_id == instance_id)
    return _bounded(
        ReportEvidence(
            key=f"report:{report.report_id}",
            report_id=report.report_id,
            emitted_at=report.emitted_at,
            received_at=report.received_at,
            stale=report.stale,
            job_name=clean_or_none(report.job_name, MAX_NAME),
            step=report.step,
            tokens_per_step=report.tokens_per_step,
            check=report.check,
            ambiguous=report.ambiguous,
            role=role,
            metrics=metrics,
            ranks=ranks,
            suspects=tuple(_suspect(s) for s in suspects),
            nonfinite=report.nonfinite,
            mismatched_pairs=report.mismatched_pairs,
            culprits=report.culprits,
            verdicts=tuple(
                VerdictEvidence(pair=v.pair, third=v.third, suspect=v.suspect, kind=v.kind)
                for v in report.verdicts
            ),
            weight_suspects=report.weight_suspects,
            suspect_window=report.suspect_window,
            last_audit_pass=report.last_audit_pass,
            last_weight_check_pass=report.last_weight_check_pass,
            resume=_resume(report),
            errors=_texts(report.errors, MAX_ERRORS, MAX_TEXT),
            hang=_hang(report.hang) if report.hang is not None else None,
            straggler=_straggler(report.straggler) if report.straggler is not None else None,
        ),
        set(ranks) if instance_id is not None else set(),
    )


def _bounded(item: ReportEvidence, ranks: set[int]) -> ReportEvidence:
    """A report summary within MAX_ITEM_BYTES: a larger one keeps, of each list, every entry
    about the instance's own `ranks` (all the recommendation reads) and the first
    KEPT_OTHERS others; what it leaves out is counted under `left_out`."""
    if size_of(item.to_record()) <= MAX_ITEM_BYTES:
        return item
    left_out: dict[str, int] = {}

    def keep(name: str, values: tuple[T, ...] | None, mine: Callable[[T], bool]) -> Any:
        if values is None:
            return None
        kept: list[T] = []
        others = 0
        for value in values:
            if mine(value):
                kept.append(value)
            elif others < KEPT_OTHERS:
                kept.append(value)
                others += 1
        if len(kept) < len(values):
            left_out[name] = len(values) - len(kept)
        return tuple(kept)

    return dataclasses.replace(
        item,
        nonfinite=keep("nonfinite", item.nonfinite, lambda rank: rank in ranks),
        culprits=keep("culprits", item.culprits, lambda rank: rank in ranks),
        weight_suspects=keep("weight_suspects", item.weight_suspects, lambda rank: rank in ranks),
        mismatched_pairs=keep(
            "mismatched_pairs", item.mismatched_pairs, lambda pair: bool(ranks & set(pair))
        ),
        verdicts=keep("verdicts", item.verdicts, lambda verdict: verdict.suspect in ranks),
        suspects=keep("suspects", item.suspects, lambda suspect: False),
        left_out=left_out,
    )


def size_of(value: Any) -> int:
    """Bytes of `value` as JSON: what it weighs in a DynamoDB item or a message, near enough."""
    return len(json.dumps(value, ensure_ascii=False, default=str).encode())


def _suspect(suspect: ReportSuspect) -> SuspectEvidence:
    """A suspect as the card shows it: the reporter's text cleaned and clipped."""
    return SuspectEvidence(
        rank=suspect.rank,
        role=suspect.role,
        node_name=clean_or_none(suspect.node_name, MAX_NODE_NAME),
        gpu_uuid=clean_or_none(suspect.gpu_uuid, MAX_GPU_UUID),
        reasons=_texts(suspect.reasons, MAX_REASONS, MAX_TEXT),
    )


def _texts(values: Sequence[str], count: int, limit: int) -> tuple[str, ...]:
    """At most `count` of the reporter's texts, each cleaned and clipped to `limit`; what is
    left out is counted in a last entry."""
    kept = [clean(v, limit) for v in values[:count]]
    if len(values) > count:
        kept.append(f"({len(values) - count} more left out)")
    return tuple(kept)


def _resume(report: SdcReport) -> Resume:
    resume = resume_of(report)
    checkpoint = resume.checkpoint
    if checkpoint is None or checkpoint.location is None:
        return resume
    location = clean(checkpoint.location, MAX_LOCATION)
    return dataclasses.replace(
        resume, checkpoint=dataclasses.replace(checkpoint, location=location)
    )


MAX_WATCH_RANKS = 64
MAX_WATCH_INSTANCES = 16


def _hang(hang: Mapping[str, Any]) -> HangSummary:
    """What the decision table reads of a hang report (the stacks and every rank's scores stay
    in the stored report): ranks and instances bounded, the collective's name cleaned, integers
    as integers (`whole_numbers`: a pod may write rank 13 as 13.0)."""
    waiting = hang.get("waiting_collective")
    return HangSummary(
        localised_instance=hang.get("localised_instance"),
        signals=tuple(hang.get("signals") or ()),
        named_instances=tuple(hang.get("named_instances") or ())[:MAX_WATCH_INSTANCES],
        missing_ranks=whole_numbers((hang.get("missing_ranks") or [])[:MAX_WATCH_RANKS]),
        silent_ranks=whole_numbers((hang.get("silent_ranks") or [])[:MAX_WATCH_RANKS]),
        odd_stack_ranks=whole_numbers((hang.get("odd_stack_ranks") or [])[:MAX_WATCH_RANKS]),
        waiting_collective=(
            WaitingCollective(
                seq=int(waiting["seq"]), name=clean_or_none(waiting.get("name"), MAX_NAME)
            )
            if waiting
            else None
        ),
        timeout_s=hang.get("timeout_s"),
        stacks=_stacks(hang),
    )


def _straggler(straggler: Mapping[str, Any]) -> StragglerSummary:
    """What the decision table reads of a straggler report: the flagged ranks' scores, integers
    as integers (`whole_numbers`)."""
    flagged = whole_numbers((straggler.get("flagged") or [])[:MAX_WATCH_RANKS])
    return StragglerSummary(
        flagged=flagged,
        named_instances=tuple(straggler.get("named_instances") or ())[:MAX_WATCH_INSTANCES],
        threshold=straggler.get("threshold"),
        windows_required=whole_number(straggler.get("windows_required")),
        window_steps=whole_number(straggler.get("window_steps")),
        relative=tuple(
            RelativeScore(
                rank=int(entry["rank"]),
                score=entry.get("relative"),
                windows=whole_number(entry.get("consecutive")),
            )
            for entry in straggler.get("scores") or ()
            if entry["rank"] in flagged
        ),
    )


MAX_STACK_RANKS = 4
MAX_STACK_FRAMES = 6
MAX_FRAME = 120


def _stacks(hang: Mapping[str, Any]) -> tuple[RankStack, ...]:
    """The training thread's innermost frames of the first ranks the report shows (the named
    ranks first, then a peer), each frame cleaned: the card sets them side by side."""
    return tuple(
        RankStack(
            rank=whole_number(entry.get("rank")),
            stack=tuple(clean(frame, MAX_FRAME) for frame in entry["stack"][-MAX_STACK_FRAMES:]),
        )
        for entry in (hang.get("ranks") or [])[:MAX_STACK_RANKS]
        if isinstance(entry, dict) and isinstance(entry.get("stack"), list) and entry["stack"]
    )


def add_evidence(incident: Incident, item: Evidence) -> bool:
    """Attach `item` unless the same key is already there; True when the incident changed.
    Beyond MAX_EVIDENCE items or MAX_EVIDENCE_BYTES (less TRUSTED_ROOM for what a pod can send)
    it is counted, not kept (reports stay stored whole under their instance), unless it is a
    report proposing a recovery and reports proposing none make room (`_weaker_reports`)."""
    if any(existing.get("key") == item.key for existing in incident.evidence):
        return False
    record = item.to_record()
    room, room_bytes = (0, 0) if item.trusted else (TRUSTED_ROOM, TRUSTED_ROOM_BYTES)

    def fits() -> bool:
        full = size_of(incident.evidence) + size_of(record) > MAX_EVIDENCE_BYTES - room_bytes
        return len(incident.evidence) < MAX_EVIDENCE - room and not full

    weaker = _weaker_reports(incident, item)
    kept = list(incident.evidence)
    while not fits() and weaker:
        incident.evidence.remove(weaker.pop(0))
    if fits():
        incident.evidence.append(record)
        incident.evidence_dropped += len(kept) + 1 - len(incident.evidence)
    else:
        incident.evidence[:] = kept
        incident.evidence_dropped += 1
    return True


def _weaker_reports(incident: Incident, item: Evidence) -> list[dict[str, Any]]:
    """The evidence on `incident` (oldest first, never the trigger that opened it) that a
    report `item` proposing a recovery takes the place of when there is no room for it: alarms
    and reports that propose nothing beyond a health check. Any pod can send reports naming a
    node, and put the datapoints its alarms fire on: forty reports naming it involved filled a
    genuine alarm's incident, and the culprit's own report was only counted, its replacement
    never proposed. A record of a kind this release does not know is never one of them (it
    stays, as `Incident.items` leaves it out)."""
    if not isinstance(item, ReportEvidence) or not report_row(item)[0].proposes_recovery:
        return []
    first = incident.evidence[0] if incident.evidence else None
    return [r for r, e in incident.typed_records() if r is not first and _proposes_nothing(e)]


def _proposes_nothing(item: Evidence) -> bool:
    if isinstance(item, AlarmEvidence):
        return True
    return isinstance(item, ReportEvidence) and not report_row(item)[0].proposes_recovery
