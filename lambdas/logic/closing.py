"""Closing: the end of every path of the remediation state machine, failed included."""

from __future__ import annotations

from lambdas.logic import isolation
from lambdas.logic.core import lifecycle
from lambdas.logic.core.measures import elapsed, report_waiting
from lambdas.logic.core.steps import Step, send_notice
from lambdas.logic.evidence import cards
from lambdas.logic.evidence.history import record_history
from lambdas.logic.ports import Deps
from lambdas.metric_names import PipelineMetric as M
from lambdas.metric_names import closed_metric
from lambdas.models.audit import AuditAction
from lambdas.models.errors import ErrorRecord
from lambdas.models.guard import HoldKind
from lambdas.models.incident import Incident, IncidentState
from lambdas.models.notices import NoticeKind
from lambdas.models.payloads import CloseRequest, CloseResult
from lambdas.observability import count, logger, seconds

S = IncidentState


def close_incident(request: CloseRequest, deps: Deps) -> CloseResult:
    """The end of every path: final state, the node's isolation lifted (unless it was replaced),
    lock and guard slot released, audited, history kept, notified (failures too).

    Closing twice is harmless: a closed incident keeps its state; what the first attempt may not
    have finished (it died after saving the state) is finished: the locks and the slot are
    released again (idempotent), the closing is audited and the history written if no
    `incident_closed` entry exists yet, and the notice is sent if it did not go out. An outcome
    that does not follow from the incident's state closes it as failed, with the reason.
    """
    step = Step(deps, "close_incident")
    incident = step.load(request.incident_id)
    audited = False
    if incident.closed_at is None:
        target, mismatch = lifecycle.closing_state(incident, request.outcome)
        error = _close_error(request, incident, mismatch)
        at = step.now()

        def close(current: Incident) -> bool:
            current.state = target
            current.error = error
            current.closed_at = at
            current.task_token = None
            return True

        incident = step.update(request.incident_id, close, incident)
    else:
        born_closed = incident.state is S.SKIPPED or (
            incident.state is S.HELD and not incident.execution_arn
        )  # recorded closed when opened: audited then (incident_skipped / incident_held)
        audited = born_closed or any(
            e.action == AuditAction.INCIDENT_CLOSED
            for e in deps.audit.entries(incident.incident_id)
        )
    if incident.state is S.FAILED and lifecycle.recovery_in_flight(incident):
        # Never release a node mid-recovery: isolation, lock and slot stay until
        # reconciliation sees HyperPod's own answer (lambdas.logic.safety.reconcile).
        incident = _hand_to_reconciliation(step, incident)
    elif not lifecycle.awaiting_reconciliation(incident):
        release_node(step, incident)
    if not audited:
        replacement = incident.replacement
        step.audit(
            incident.incident_id,
            AuditAction.INCIDENT_CLOSED,
            {
                "state": incident.state.value,
                "outcome": request.outcome.value,
                "error": incident.error.to_record() if incident.error else None,
                "dry_run": bool(replacement and replacement.dry_run),
                "new_instance_id": replacement.new_instance_id if replacement else None,
                "hold": incident.hold.to_record() if incident.hold else None,
            },
        )
        count(closed_metric(incident.state))
        _measure_close(step, incident)
        logger.info("incident closed", incident_id=incident.incident_id, state=incident.state)
        record_history(step, incident)
    if (
        not incident.close_notified
        and incident.state is not S.SKIPPED
        and incident.hold_kind != HoldKind.STORM
    ):
        _notify_close(step, incident)
    return {"incident_id": incident.incident_id, "state": incident.state.value}


def release_node(step: Step, incident: Incident) -> Incident:
    """Lift the incident's isolation, then give back its locks and its guard slot (each
    idempotent): before the lock goes, so the next incident on this node never finds our
    cordon."""
    deps = step.deps
    incident = isolation.release(step, incident)
    for instance_id in incident.locked_instances:
        deps.incidents.release_lock(incident.cluster_name, instance_id, incident.incident_id)
    deps.guard.release_slot(incident.cluster_name, incident.incident_id)
    return incident


def _hand_to_reconciliation(step: Step, incident: Incident) -> Incident:
    """A failure close while a reboot or replacement may be running: keep the node isolated
    (and its lock and guard slot), record `recovery_unknown`, audit it once; reconciliation
    releases the node when HyperPod reports it Running again, or gone."""
    if incident.recovery_unknown:
        return incident
    at = step.now()

    def note(current: Incident) -> bool:
        current.recovery_unknown = at
        return True

    incident = step.update(incident.incident_id, note, incident)
    step.audit(
        incident.incident_id,
        AuditAction.RECOVERY_UNKNOWN,
        {
            "instance_id": incident.instance_id,
            "reboot": incident.reboot.to_record() if incident.reboot else None,
            "replacement": incident.replacement.to_record() if incident.replacement else None,
            "kept": "isolation, open lock and guard slot, until reconciliation",
        },
    )
    count(M.RECOVERIES_UNKNOWN)
    logger.warning("recovery may be running: node kept", incident_id=incident.incident_id)
    return incident


def _measure_close(step: Step, incident: Incident) -> None:
    """Time from opened to node recovered (replaced, by us or HyperPod, or rebooted and checked
    again; a dry run recovers nothing), and the approvals-waiting gauge when the incident had waited for a decision."""
    recovered = incident.state in (S.REPLACED, S.REPLACED_BY_HYPERPOD, S.REBOOTED)
    if recovered and not incident.dry_run:
        seconds(M.RECOVERY_LATENCY, elapsed(incident.created_at, step.deps.clock.now()))
    if incident.approval_requested_at:
        report_waiting(step, incident)


def _close_error(
    request: CloseRequest, incident: Incident, mismatch: str | None
) -> ErrorRecord | None:
    error = incident.error
    if request.error is not None:
        error = ErrorRecord({k: str(v)[:2000] for k, v in request.error.items()})
    if mismatch:
        error = (error or ErrorRecord()).with_mismatch(mismatch)
    return error


def _notify_close(step: Step, incident: Incident) -> None:
    notice = cards.close_notice(incident)
    # Not raised on failure: the execution must not end red for a notice.
    send_notice(
        step,
        incident,
        notice.subject,
        notice.text,
        NoticeKind.CLOSED,
        AuditAction.CLOSED_NOTIFIED,
        incident,
    )
