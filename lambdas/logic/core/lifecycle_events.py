"""Every incident state change, as an event other tools route (`lambdas.models.lifecycle_event`):
built from the incident record after the change was saved, published by the step that made it
(`Step.update`, `Step.created` in `lambdas.logic.core.steps`).

A failed publish never fails the step: it is audited (`lifecycle_event_failed`, naming the
change) and logged; the incident record and its audit trail keep the change either way.
"""

from __future__ import annotations

from lambdas.logic.evidence import attached
from lambdas.logic.evidence.recommendation import recommend
from lambdas.models.incident import Incident, IncidentState
from lambdas.models.lifecycle_event import IncidentStateChange


def state_change(
    incident: Incident, old_state: IncidentState | None, approval_arn: str | None
) -> IncidentStateChange:
    """The event of `incident` having just moved from `old_state` (None: just created)."""
    from lambdas.logic.evidence.cards import console_link

    advice = recommend(
        attached.reports(incident),
        incident.health_check.result if incident.health_check else None,
        job_level=incident.is_job,
        rebooted=incident.reboots > 0,
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
