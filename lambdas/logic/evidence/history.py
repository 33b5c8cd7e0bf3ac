"""Repeat offenders: closed node-level incidents kept by instance id and by GPU UUID.

Instance ids change when a node is replaced; a GPU UUID names the device. The approval card
lists both histories, and a transient verdict on a node with history is proposed for
replacement (`lambdas.logic.evidence.recommendation`).
"""

from __future__ import annotations

from lambdas.logic.core.steps import Step, error_details
from lambdas.models.audit import AuditAction
from lambdas.models.guard import PastIncident
from lambdas.models.incident import Incident, IncidentState
from lambdas.observability import logger


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
