"""What arrives for an instance an incident already speaks for joins that incident.

A trigger (a contributor alarm, or a report naming the node) for an instance whose open lock an
incident holds is attached to it, and its remediation execution started if it has none yet
(`attach`); an incident already judged is judged again on the new evidence, and a changed
recommendation is stored and audited. One for an instance a held incident speaks for joins the
held incident and nothing acts (`attach_held`). The event that created an incident, delivered again, finds it
(`redelivered`): what the first delivery did not finish (the execution, a job's locks, the held
notice) is finished, nothing is done twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sdc_remediation.lambdas.logic.core.steps import Step, send_notice
from sdc_remediation.lambdas.logic.evidence import summaries
from sdc_remediation.lambdas.logic.evidence.recommendation import audit_recommendation, rejudge
from sdc_remediation.lambdas.logic.opening.execution import ensure_execution
from sdc_remediation.lambdas.logic.safety import guard
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.evidence import Evidence, TriggerSource
from sdc_remediation.lambdas.models.guard import HoldKind
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.notices import NoticeKind
from sdc_remediation.lambdas.models.payloads import OpenAction, OpenIncidentResult
from sdc_remediation.lambdas.models.report import SdcReport
from sdc_remediation.lambdas.models.writes import Claimed
from sdc_remediation.lambdas.observability import count, logger
from sdc_remediation.lambdas.wording import cards, chat


@dataclass(frozen=True, slots=True)
class Trigger:
    """What asks for an incident about one node of a claim (`sdc_remediation.lambdas.models.claim`), or the
    job-level incident of an ambiguous report (`instance_id` empty)."""

    cluster_name: str
    instance_id: str
    at: datetime
    """The alarm's state change, or the report's emission: the incident id's timestamp."""
    event_id: str
    source: TriggerSource
    item: Evidence
    """The evidence it brings."""
    report: SdcReport | None = None
    """The report of a report trigger (an alarm's stored reports come with its confirmed node,
    `Confirmed.reports`)."""
    metric: str | None = None
    mute: guard.Blocker | None = None
    """An alarm mute rule mutes the alarm that is the trigger: its incident is held."""


def attach(step: Step, holder: str, trigger: Trigger) -> OpenIncidentResult:
    logger.set_correlation_id(holder)
    items = [trigger.item]
    if trigger.source == TriggerSource.REPORT and trigger.report is not None:
        items = [summaries.report_evidence(trigger.report, trigger.instance_id)]
    incident = attach_items(step, holder, items, trigger.event_id, trigger.source)
    ensure_execution(step, holder, incident)
    return {"incident_id": holder, "action": OpenAction.ATTACHED}


def attach_held(step: Step, holder: str, trigger: Trigger) -> OpenIncidentResult:
    """Another channel (or a later event, or a redelivery) for an instance a held incident
    speaks for: its evidence joins the held incident; nothing acts. Its held notice goes out
    only if it has not yet (a failed publish is retried by the next event)."""
    logger.set_correlation_id(holder)
    incident = attach_items(step, holder, [trigger.item], trigger.event_id, trigger.source)
    notify_held(step, incident)
    return {"incident_id": holder, "action": OpenAction.HELD}


def attach_items(
    step: Step, holder: str, items: Sequence[Evidence], event_id: str, kind: TriggerSource
) -> Incident:
    added: list[str] = []

    changed: list[bool] = []
    at = step.now()

    def attach(incident: Incident) -> bool:
        added.clear()
        changed.clear()
        for item in items:
            if summaries.add_evidence(incident, item):
                added.append(item.key)
        again = rejudge(incident, at) if added else None
        if again is not None and not again.same_advice(incident.recommendation):
            incident.recommendation = again
            changed.append(True)
        return bool(added)

    incident = step.update(holder, attach)
    if added:
        step.audit(
            holder,
            AuditAction.EVIDENCE_ATTACHED,
            {"kind": kind, "keys": added, "event_id": event_id},
        )
        count(M.EVIDENCE_ATTACHED)
        if changed:
            audit_recommendation(step, incident, AuditAction.EVIDENCE_ATTACHED)
    else:
        logger.info("duplicate delivery", incident_id=holder, event_id=event_id)
    return incident


def redelivered(step: Step, incident_id: str, trigger: Trigger) -> OpenIncidentResult:
    """The event that created `incident_id` came again (possibly after the incident closed)."""
    incident = step.load(incident_id)
    logger.set_correlation_id(incident_id)
    logger.info("event already handled", incident_id=incident_id, event_id=trigger.event_id)
    if incident.state is IncidentState.SKIPPED:
        return {"incident_id": incident_id, "action": OpenAction.SKIPPED}
    if incident.state is IncidentState.HELD and incident.execution_arn is None:
        notify_held(step, incident)
        return {"incident_id": incident_id, "action": OpenAction.HELD}
    if not incident.state.terminal:
        if incident.is_job:
            incident = claim_locks(step, incident)
        ensure_execution(step, incident_id, incident)
    return {"incident_id": incident_id, "action": OpenAction.ATTACHED}


def claim_locks(step: Step, incident: Incident) -> Incident:
    """Take the open locks of a job-level incident's instances; an instance another incident
    took meanwhile leaves the job (its alarm belongs to that incident). Idempotent. Returns the
    incident as written: its `instance_ids` are the instances it holds."""
    claimed = [
        i
        for i in incident.instance_ids
        if isinstance(
            step.deps.incidents.claim_lock(incident.cluster_name, i, incident.incident_id),
            Claimed,
        )
    ]
    if claimed != incident.instance_ids:

        def keep(current: Incident) -> bool:
            current.instance_ids = claimed
            return True

        return step.update(incident.incident_id, keep, incident)
    return incident


def notify_held(step: Step, incident: Incident, *, window_notice: bool = False) -> None:
    """The held notice, unless it went out already or a storm holds the incident (the storm
    hold's one notification covers every incident it holds), or the rate bound holds it and it
    is not the cluster's first rate-held incident of the minute (`window_notice`: that one's
    notice covers the minute). A failed publish is audited (the incident stays recorded, the
    next event for it tries again), never raised."""
    if incident.close_notified or incident.hold_kind == HoldKind.STORM:
        return
    if incident.hold_kind == HoldKind.RATE and not window_notice:
        return
    notice = cards.held_notice(incident)
    send_notice(
        step,
        incident,
        notice.subject,
        notice.text,
        chat.incident_notice(NoticeKind.HELD, incident, notice.subject, notice.text),
        AuditAction.HELD_NOTIFIED,
        incident,
    )
