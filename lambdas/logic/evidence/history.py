"""Repeat offenders: closed node-level incidents kept by instance id and by GPU UUID.

Instance ids change when a node is replaced; a GPU UUID names the device. The approval card
lists both histories, and a transient verdict on a node with history is proposed for
replacement (`sdc_remediation.lambdas.logic.evidence.recommendation`). A node or GPU in
`Settings.repeat_offender_incidents` incidents within `repeat_offender_window_days` is a repeat
offender (`repeat_offence`): replacement is proposed whatever the last incident's evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from sdc_remediation.lambdas.logic.core.steps import Step, error_details
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.guard import PastIncident
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.recommendation import set_aside
from sdc_remediation.lambdas.models.settings import Settings
from sdc_remediation.lambdas.observability import logger


def record_history(step: Step, incident: Incident) -> None:
    """Keep a closed node-level incident (best effort: a failure is audited, never hides the
    incident's own outcome)."""
    if incident.is_job or incident.state is IncidentState.SKIPPED:
        return
    past = PastIncident(
        incident_id=incident.incident_id,
        cluster_name=incident.cluster_name,
        instance_id=incident.instance_id,
        state=incident.state,
        created_at=incident.created_at,
        closed_at=incident.closed_at or step.now(),
        gpu_uuids=tuple(incident.gpu_uuids),
        hold_kind=incident.hold_kind,
        advice=incident.recommendation.advice.value if incident.recommendation else None,
    )
    try:
        step.deps.history.record_past(past)
    except Exception as err:
        logger.exception("history not recorded", incident_id=incident.incident_id)
        step.audit(incident.incident_id, AuditAction.HISTORY_NOT_RECORDED, error_details(err))


def past_incidents(step: Step, incident: Incident) -> list[PastIncident]:
    """Earlier incidents of the same instance or of any GPU its reports name, oldest first,
    without the incident itself. Lookup failures leave the history empty (and are logged):
    the approval request must not fail for it."""
    found: dict[str, PastIncident] = {}
    try:
        for past in step.deps.history.past_for_instance(incident.instance_id):
            found[past.incident_id] = past
        for gpu_uuid in incident.gpu_uuids:
            for past in step.deps.history.past_for_gpu(gpu_uuid):
                found[past.incident_id] = past
    except Exception:
        logger.exception("history lookup failed", incident_id=incident.incident_id)
    found.pop(incident.incident_id, None)
    return sorted(found.values(), key=lambda p: p.closed_at)


def is_offence(past: PastIncident) -> bool:
    """Whether a past incident counts toward a repeat offence: it says something about the
    hardware (`counts_as_history`), nobody set it aside (`set_aside`), and, closed with no
    decision (expired), its judgement proposed a recovery: forged metric datapoints alone make
    an alarm-only incident that proposes nothing beyond a health check, and three of them left to
    expire must not add up to a replacement (a failed deep health check proposes replacing, so
    such an incident still counts)."""
    return past.counts_as_history and not set_aside(past.state, past.advice)


def repeat_offence(
    incident: Incident, past: Sequence[PastIncident], settings: Settings
) -> str | None:
    """Why `incident`'s node (its instance id) or one of its GPUs (a UUID its reports name) is a
    repeat offender: in `settings.repeat_offender_incidents` incidents, this one among them,
    within `settings.repeat_offender_window_days` before it opened; None when neither is. Only
    past incidents that count as history (`PastIncident.counts_as_history`) and that no approver
    rejected count. A job-level incident names no node: never."""
    if incident.is_job or not incident.instance_id:
        return None
    wanted = settings.repeat_offender_incidents
    days = settings.repeat_offender_window_days
    since = _dated(incident.created_at) - timedelta(days=days)
    counted = [
        p
        for p in past
        if is_offence(p) and p.incident_id != incident.incident_id and _dated(p.created_at) >= since
    ]
    found: list[str] = []
    mine = [p.incident_id for p in counted if p.instance_id == incident.instance_id]
    if len(mine) + 1 >= wanted:
        found.append(f"instance {incident.instance_id} in {len(mine) + 1} incidents ({_ids(mine)})")
    for gpu in incident.gpu_uuids:
        with_gpu = [p.incident_id for p in counted if gpu in p.gpu_uuids]
        if len(with_gpu) + 1 >= wanted:
            found.append(f"GPU {gpu} in {len(with_gpu) + 1} incidents ({_ids(with_gpu)})")
    if not found:
        return None
    return (
        f"{'; '.join(found)} within {days} days: at least {wanted} make a repeat offender "
        "(sdc:repeatOffenderIncidents, sdc:repeatOffenderWindowDays)"
    )


def _ids(incident_ids: Sequence[str]) -> str:
    shown = ", ".join([*incident_ids[-3:], "this one"])
    return shown if len(incident_ids) <= 3 else f"{len(incident_ids) - 3} more, {shown}"


def _dated(at: str) -> datetime:
    dated = datetime.fromisoformat(at)
    return dated if dated.tzinfo is not None else dated.replace(tzinfo=UTC)
