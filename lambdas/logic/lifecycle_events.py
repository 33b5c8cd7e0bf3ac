"""Every incident state change, as an event other tools route (`lambdas.models.lifecycle_event`):
built from the incident record after the change was saved, published by the step that made it.

A failed publish never fails the step: it is audited (`lifecycle_event_failed`, naming the
change) and logged; the incident record and its audit trail keep the change either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lambdas.logic import evidence
from lambdas.logic.recommendation import recommend
from lambdas.models.audit import AuditAction
from lambdas.models.incident import Incident, IncidentState
from lambdas.models.lifecycle_event import IncidentStateChange

if TYPE_CHECKING:
    from lambdas.logic._steps import Step


def state_change(
    incident: Incident, old_state: IncidentState | None, approval_arn: str | None
) -> IncidentStateChange:
    """The event of `incident` having just moved from `old_state` (None: just created)."""
    from lambdas.logic.cards import console_link
    from lambdas.logic.lifecycle import reboots_done

    advice = recommend(
        evidence.reports(incident),
        incident.health_check.result if incident.health_check else None,
        job_level=incident.is_job,
        rebooted=reboots_done(incident) > 0,
    )
    return IncidentStateChange(
        incident_id=incident.incident_id,
        cluster_name=incident.cluster_name,
        instance_id=incident.instance_id,
        old_state=old_state.value if old_state else None,
        new_state=incident.state.value,
        terminal=incident.state.terminal,
        changed_at=incident.updated_at,
        sequence=incident.version,
        scope=str(incident.scope),
        instance_ids=tuple(incident.instance_ids),
        recommendation={"advice": advice.advice.value, "reasons": list(advice.reasons)},
        decision=incident.decision.decision if incident.decision else None,
        reason=incident.reason,
        links={
            "show": f"sdc show {incident.incident_id}",
            "execution": console_link(incident.execution_arn),
            "approval": console_link(approval_arn),
        },
    )


def publish(step: Step, incident: Incident, old_state: IncidentState | None) -> None:
    """Publish the change; a failure is audited and logged, never raised."""
    from lambdas.logic._steps import error_details
    from lambdas.observability import logger

    change = state_change(incident, old_state, step.deps.settings.approval_state_machine_arn)
    try:
        step.deps.lifecycle.publish(change)
    except Exception as err:
        logger.exception("lifecycle event failed", incident_id=incident.incident_id)
        try:
            step.audit(
                incident.incident_id,
                AuditAction.LIFECYCLE_EVENT_FAILED,
                error_details(err, old_state=change.old_state, new_state=change.new_state),
            )
        except Exception:
            logger.exception("could not audit the failed event", incident_id=incident.incident_id)
