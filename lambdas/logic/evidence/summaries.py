"""The evidence kept on an incident: alarm events and SDC report summaries, deduplicated and
bounded (read back through `Incident.reports` and `Incident.alarms`).

EventBridge delivers at least once and several metrics can fire for one node, so the same
evidence can arrive more than once: each item has a `key` (`alarm:<event id>`,
`report:<report id>`) and is attached once. The list is capped so the incident record stays far
below DynamoDB's item size limit; what is dropped is counted. Of a report's checkpoints only the
one chosen to resume from is kept (`resume`, sdc_remediation.lambdas.logic.evidence.resume), not the whole list.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sdc_remediation.lambdas.logic.evidence.recommendation import report_row
from sdc_remediation.lambdas.logic.evidence.resume import resume_of
from sdc_remediation.lambdas.models.events import ContributorEvent
from sdc_remediation.lambdas.models.hardware_alert import HardwareAlert
from sdc_remediation.lambdas.models.incident import Incident, TriggerSource, trusted_item
from sdc_remediation.lambdas.models.report import ReportSuspect, SdcReport
from sdc_remediation.lambdas.models.reporter_text import clean, clean_or_none

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
(`trusted_item`: a hardware alert, a sweep's check) may take: reports and alarms, anyone's in
the account, cannot crowd a node's hardware alert off its incident."""


def alarm_evidence(alarm: ContributorEvent) -> dict[str, Any]:
    return {
        "kind": TriggerSource.ALARM,
        "key": f"alarm:{alarm.event_id}",
        "event_id": alarm.event_id,
        "alarm_name": alarm.alarm_name,
        "metric": alarm.metric.value,
        "state_at": alarm.state_timestamp,
        "reason": alarm.reason[:MAX_REASON],
        **(alarm.mute.to_json() if alarm.mute else {}),
    }


def hardware_evidence(alert: HardwareAlert, received_at: str) -> dict[str, Any]:
    """A hardware alert as the incident keeps it: one item per alert and start (a repeat of a
    still-firing alert, or its resolution, is another item: `status` says which)."""
    return {
        "kind": TriggerSource.HARDWARE,
        "key": f"hardware:{clean(alert.fingerprint, MAX_NAME)}:{alert.status}:"
        f"{clean(alert.starts_at, MAX_NAME)}",
        "status": alert.status.value,
        "rule": alert.rule.value,
        "severity": alert.severity.value,
        "node_name": clean(alert.node_name, MAX_NODE_NAME),
        "gpu": clean_or_none(alert.gpu, MAX_NAME),
        "gpu_uuid": clean_or_none(alert.gpu_uuid, MAX_GPU_UUID),
        "xid": clean_or_none(alert.xid, MAX_NAME),
        "counter": clean_or_none(alert.counter, MAX_NAME),
        "summary": clean(alert.summary, MAX_TEXT),
        "starts_at": clean(alert.starts_at, MAX_NAME),
        "received_at": received_at,
    }


def report_evidence(report: SdcReport, instance_id: str | None) -> dict[str, Any]:
    """What the approval card needs from a report, for the ranks on `instance_id` (None: the
    whole report, for a job-level incident)."""
    if instance_id is None:
        role = None
        metrics = sorted({m.value for i in report.instances for m in i.metrics})
        ranks = sorted(r for i in report.instances for r in i.ranks)
        suspects = list(report.suspects)
    else:
        on_instance = report.instance(instance_id)
        role = on_instance.role.value if on_instance else None
        metrics = [m.value for m in on_instance.metrics] if on_instance else []
        ranks = list(on_instance.ranks) if on_instance else []
        suspects = [s for s in report.suspects if s.instance_id == instance_id]
    return _bounded(
        {
            "kind": TriggerSource.REPORT,
            "key": f"report:{report.report_id}",
            "report_id": report.report_id,
            "emitted_at": report.emitted_at,
            "received_at": report.received_at,
            "stale": report.stale,
            "job_name": clean_or_none(report.job_name, MAX_NAME),
            "step": report.step,
            "tokens_per_step": report.tokens_per_step,
            "check": report.check.value if report.check else None,
            "ambiguous": report.ambiguous,
            "role": role,
            "metrics": metrics,
            "ranks": ranks,
            "suspects": [_suspect(s) for s in suspects],
            **_findings(report),
        },
        set(ranks) if instance_id is not None else set(),
    )


def _bounded(item: dict[str, Any], ranks: set[int]) -> dict[str, Any]:
    """A report summary within MAX_ITEM_BYTES: a larger one keeps, of each list, every entry
    about the instance's own `ranks` (all the recommendation reads) and the first
    KEPT_OTHERS others; what it leaves out is counted under `left_out`."""
    if size_of(item) <= MAX_ITEM_BYTES:
        return item
    left_out: dict[str, int] = {}

    def keep(name: str, mine: Callable[[Any], bool]) -> None:
        values = item.get(name)
        if not isinstance(values, list):
            return
        kept, others = [], 0
        for value in values:
            if mine(value):
                kept.append(value)
            elif others < KEPT_OTHERS:
                kept.append(value)
                others += 1
        if len(kept) < len(values):
            left_out[name] = len(values) - len(kept)
            item[name] = kept

    for name in ("nonfinite", "culprits", "weight_suspects"):
        keep(name, lambda rank: rank in ranks)
    keep("mismatched_pairs", lambda pair: bool(ranks & set(pair)))
    keep("verdicts", lambda verdict: verdict.get("suspect") in ranks)
    keep("suspects", lambda suspect: False)
    item["left_out"] = left_out
    return item


def size_of(value: Any) -> int:
    """Bytes of `value` as JSON: what it weighs in a DynamoDB item or a message, near enough."""
    return len(json.dumps(value, ensure_ascii=False, default=str).encode())


def _suspect(suspect: ReportSuspect) -> dict[str, Any]:
    """A suspect as the card shows it: the reporter's text cleaned and clipped."""
    return {
        "rank": suspect.rank,
        "role": suspect.role.value,
        "node_name": clean_or_none(suspect.node_name, MAX_NODE_NAME),
        "gpu_uuid": clean_or_none(suspect.gpu_uuid, MAX_GPU_UUID),
        "reasons": _texts(suspect.reasons, MAX_REASONS, MAX_TEXT),
    }


def _texts(values: Sequence[str], count: int, limit: int) -> list[str]:
    """At most `count` of the reporter's texts, each cleaned and clipped to `limit`; what is
    left out is counted in a last entry."""
    kept = [clean(v, limit) for v in values[:count]]
    if len(values) > count:
        kept.append(f"({len(values) - count} more left out)")
    return kept


def _resume(report: SdcReport) -> dict[str, Any]:
    resume = resume_of(report).to_evidence()
    checkpoint = resume.get("checkpoint")
    if checkpoint and checkpoint.get("location") is not None:
        checkpoint["location"] = clean(checkpoint["location"], MAX_LOCATION)
    return resume


def _findings(report: SdcReport) -> dict[str, Any]:
    return {
        "nonfinite": list(report.nonfinite),
        "mismatched_pairs": [list(p) for p in report.mismatched_pairs],
        "culprits": list(report.culprits),
        "verdicts": [
            {"pair": list(v.pair), "third": v.third, "suspect": v.suspect, "kind": v.kind.value}
            for v in report.verdicts
        ],
        "weight_suspects": (
            None if report.weight_suspects is None else list(report.weight_suspects)
        ),
        "suspect_window": list(report.suspect_window) if report.suspect_window else None,
        "last_audit_pass": report.last_audit_pass,
        "last_weight_check_pass": report.last_weight_check_pass,
        "resume": _resume(report),
        "errors": _texts(report.errors, MAX_ERRORS, MAX_TEXT),
        **_watch(report),
    }


MAX_WATCH_RANKS = 64
MAX_WATCH_INSTANCES = 16


def _watch(report: SdcReport) -> dict[str, Any]:
    """What the decision table reads of a hang or straggler report (the stacks and every
    rank's scores stay in the stored report): ranks and instances bounded, the collective's
    name cleaned."""
    found: dict[str, Any] = {}
    if report.hang is not None:
        hang = report.hang
        waiting = hang.get("waiting_collective")
        found["hang"] = {
            "localised_instance": hang.get("localised_instance"),
            "signals": list(hang.get("signals") or []),
            "named_instances": list(hang.get("named_instances") or [])[:MAX_WATCH_INSTANCES],
            "missing_ranks": list(hang.get("missing_ranks") or [])[:MAX_WATCH_RANKS],
            "silent_ranks": list(hang.get("silent_ranks") or [])[:MAX_WATCH_RANKS],
            "odd_stack_ranks": list(hang.get("odd_stack_ranks") or [])[:MAX_WATCH_RANKS],
            "waiting_collective": (
                {"seq": waiting["seq"], "name": clean_or_none(waiting.get("name"), MAX_NAME)}
                if waiting
                else None
            ),
            "timeout_s": hang.get("timeout_s"),
            "stacks": _stacks(hang),
        }
    if report.straggler is not None:
        straggler = report.straggler
        flagged = list(straggler.get("flagged") or [])[:MAX_WATCH_RANKS]
        found["straggler"] = {
            "flagged": flagged,
            "named_instances": list(straggler.get("named_instances") or [])[:MAX_WATCH_INSTANCES],
            "threshold": straggler.get("threshold"),
            "windows_required": straggler.get("windows_required"),
            "window_steps": straggler.get("window_steps"),
            "relative": [
                {
                    "rank": entry["rank"],
                    "score": entry.get("relative"),
                    "windows": entry.get("consecutive"),
                }
                for entry in straggler.get("scores") or []
                if entry["rank"] in flagged
            ],
        }
    return found


MAX_STACK_RANKS = 4
MAX_STACK_FRAMES = 6
MAX_FRAME = 120


def _stacks(hang: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The training thread's innermost frames of the first ranks the report shows (the named
    ranks first, then a peer), each frame cleaned: the card sets them side by side."""
    return [
        {
            "rank": entry.get("rank"),
            "stack": [clean(frame, MAX_FRAME) for frame in entry["stack"][-MAX_STACK_FRAMES:]],
        }
        for entry in (hang.get("ranks") or [])[:MAX_STACK_RANKS]
        if isinstance(entry, dict) and isinstance(entry.get("stack"), list) and entry["stack"]
    ]


def add_evidence(incident: Incident, item: dict[str, Any]) -> bool:
    """Attach `item` unless the same key is already there; True when the incident changed.
    Beyond MAX_EVIDENCE items or MAX_EVIDENCE_BYTES (less TRUSTED_ROOM for what a pod can send)
    it is counted, not kept (reports stay stored whole under their instance), unless it is a
    report proposing a recovery and reports proposing none make room (`_weaker_reports`)."""
    if any(existing.get("key") == item["key"] for existing in incident.evidence):
        return False
    room, room_bytes = (0, 0) if trusted_item(item) else (TRUSTED_ROOM, TRUSTED_ROOM_BYTES)

    def fits() -> bool:
        full = size_of(incident.evidence) + size_of(item) > MAX_EVIDENCE_BYTES - room_bytes
        return len(incident.evidence) < MAX_EVIDENCE - room and not full

    weaker = _weaker_reports(incident, item)
    kept = list(incident.evidence)
    while not fits() and weaker:
        incident.evidence.remove(weaker.pop(0))
    if fits():
        incident.evidence.append(item)
        incident.evidence_dropped += len(kept) + 1 - len(incident.evidence)
    else:
        incident.evidence[:] = kept
        incident.evidence_dropped += 1
    return True


def _weaker_reports(incident: Incident, item: dict[str, Any]) -> list[dict[str, Any]]:
    """The evidence on `incident` (oldest first, never the trigger that opened it) that a
    report `item` proposing a recovery takes the place of when there is no room for it: alarms
    and reports that propose nothing beyond a health check. Any pod can send reports naming a
    node, and put the datapoints its alarms fire on: forty reports naming it involved filled a
    genuine alarm's incident, and the culprit's own report was only counted, its replacement
    never proposed."""
    if item.get("kind") != TriggerSource.REPORT or not report_row(item)[0].proposes_recovery:
        return []
    return [e for e in incident.evidence[1:] if _proposes_nothing(e)]


def _proposes_nothing(item: dict[str, Any]) -> bool:
    if item.get("kind") == TriggerSource.ALARM:
        return True
    return item.get("kind") == TriggerSource.REPORT and not report_row(item)[0].proposes_recovery
