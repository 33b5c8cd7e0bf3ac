"""The remediation execution of an opened incident, started once: its first step isolates the
node (IsolateNode, `sdc_remediation.lambdas.logic.isolation`; the stage map in
`sdc_remediation.lambdas.logic` names what each of its states calls).

The execution is named after the incident, so however often an event is delivered, one
execution runs; the incident records its ARN.
"""

from __future__ import annotations

from typing import Any

from sdc_remediation.lambdas.logic.core.steps import Step, error_details
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.errors import ErrorRecord
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.observability import count


def ensure_execution(step: Step, incident_id: str, current: Incident | None = None) -> None:
    """Start the remediation execution unless the incident records one; `current` is the
    incident as the caller just wrote or read it (else it is loaded).

    A failure leaves the incident open (lock held, error recorded and audited) and re-raises:
    EventBridge retries the event, and the retry lands here again through the attach path.
    """
    incident = current if current is not None else step.load(incident_id)
    if incident.execution_arn or incident.state.terminal:
        return
    payload: dict[str, Any] = {
        "incident_id": incident.incident_id,
        "cluster_name": incident.cluster_name,
        "instance_id": incident.instance_id or None,
    }
    if incident.is_job:
        payload |= {"scope": incident.scope, "instance_ids": incident.instance_ids}
    try:
        started = step.deps.workflow.start_execution(incident.incident_id, payload)
    except Exception as err:
        details = error_details(err, step=step.actor)

        def record_error(current: Incident) -> bool:
            current.error = ErrorRecord(details)
            return True

        step.update(incident_id, record_error, incident)
        step.audit(
            incident_id, AuditAction.EXECUTION_START_FAILED, details, [details.get("request_id")]
        )
        raise

    def record(current: Incident) -> bool:
        current.execution_arn = started.arn
        current.error = None
        return True

    step.update(incident_id, record, incident)
    step.audit(
        incident_id,
        AuditAction.EXECUTION_STARTED,
        {"execution_arn": started.arn, "already_existed": started.already_existed},
        [started.request_id],
    )
    count(M.EXECUTIONS_STARTED)
