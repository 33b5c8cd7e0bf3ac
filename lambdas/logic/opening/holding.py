"""Held incidents: recorded closed at birth, while a storm hold, a muted alarm, the pause switch
or a full blast-radius guard keeps anything from acting.

A held incident takes no open lock and no guard slot; a node-level one takes the held lock of
its instance, valid for STORM_WINDOW_SECONDS, so that whatever else arrives for the instance in
that window joins it (`arrivals.attach_held`) instead of opening another: one held incident and
at most one notice per instance and window. A held job-level incident takes none: an alarm on
one of its nodes is that node's own incident. Once what held it no longer holds (`still_held`),
a new trigger is judged afresh.

A notice-only incident (kind `notice`: the decision table's row for a straggler without hardware
corroboration) is held the same way, so that the straggler's alarm and report make one notice;
it holds only what the training watch says again and what, with its own evidence, the one
policy still calls a notice (a hold absorbs only evidence whose course is no stronger than its
own). Anything else for the node in its window (a hang localised by two signals, a hardware
alert, an SDC report or alarm) is the corroboration it lacked, or a fault of its own: it opens
the node's incident on the normal path.
"""

from __future__ import annotations

import copy

from sdc_remediation.lambdas.logic.core.steps import Step
from sdc_remediation.lambdas.logic.evidence import summaries
from sdc_remediation.lambdas.logic.evidence.history import record_history
from sdc_remediation.lambdas.logic.evidence.recommendation import course_of, watch_evidence
from sdc_remediation.lambdas.logic.opening import arrivals
from sdc_remediation.lambdas.logic.opening.arrivals import Trigger
from sdc_remediation.lambdas.logic.safety import guard, rate
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.guard import HoldKind
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.payloads import OpenAction, OpenIncidentResult
from sdc_remediation.lambdas.models.recommendation import Course
from sdc_remediation.lambdas.models.writes import Created, HeldBy, IncidentExists
from sdc_remediation.lambdas.observability import count, logger


def hold(
    step: Step, incident: Incident, trigger: Trigger, blocker: guard.Blocker
) -> OpenIncidentResult:
    """Record the incident as held: closed at once, no open lock, no guard slot, nothing acts;
    a node-level one takes the held lock of its instance for the hold window.

    Notified on its own unless it is held by a storm (the storm hold's one notification covers
    every incident it holds)."""
    at = step.now()
    incident.state = IncidentState.HELD
    incident.hold = blocker.record()
    incident.reason = blocker.reason
    incident.closed_at = at
    now = epoch(step)
    until = now + step.deps.settings.storm_window_seconds
    replacing: str | None = None
    while True:
        match step.deps.incidents.create_held(incident, until=until, now=now, replacing=replacing):
            case Created():
                break
            case IncidentExists():
                return arrivals.redelivered(step, incident.incident_id, trigger)
            case HeldBy(holder=holder):
                if replacing is not None or still_held(step, holder, trigger):
                    return arrivals.attach_held(step, holder, trigger)
                replacing = holder  # its hold has ended: this hold takes the lock over
    # A held job-level incident takes no held lock of its instances: an alarm on one of them,
    # or a report naming it as the culprit, is its own incident (opened, or held on its own),
    # never absorbed by a job incident that nothing checks.
    logger.set_correlation_id(incident.incident_id)
    step.audit(
        incident.incident_id,
        AuditAction.INCIDENT_HELD,
        {
            **blocker.record().to_record(),
            "cluster_name": incident.cluster_name,
            "instance_id": incident.instance_id or None,
            "instance_ids": incident.instance_ids,
            "source": trigger.source,
            "event_id": trigger.event_id,
        },
    )
    step.created(incident)
    count(M.INCIDENTS_HELD)
    logger.info("incident held", incident_id=incident.incident_id, kind=blocker.kind)
    if blocker.kind != HoldKind.RATE:  # unchecked: it must not enter a node's history
        record_history(step, incident)
    arrivals.notify_held(step, incident, window_notice=blocker.window_notice)
    return {"incident_id": incident.incident_id, "action": OpenAction.HELD}


def still_held(step: Step, incident_id: str, trigger: Trigger | None = None) -> bool:
    """Whether what held the incident still holds (for `trigger`): a reset storm hold, a pause
    switch flipped back or an ended mute window lets the next trigger be judged afresh (the
    recipe was fixed; a GPU that still fails is not to be swallowed by the old hold). A guard
    hold keeps its window: judging afresh would only hold again, with a second notice. A rate
    hold keeps its minute. A notice holds the training watch's own evidence only. A storm hold
    holds a trusted trigger (a hardware alert, a sweep) only once trusted flags made a storm."""
    incident = step.deps.incidents.get(incident_id)
    if incident is None:
        return False
    hold = incident.hold
    if hold is None:
        return True
    if hold.kind == HoldKind.STORM:
        active = step.deps.guard.active_hold(incident.cluster_name)
        if active is None or active.hold_id != hold.hold_id:
            return False
        # what the storm would not hold (`guard.storm_blocker`) is judged afresh, never
        # absorbed by an incident a report held
        return trigger is None or not trigger.source.trusted or active.trusted_at is not None
    if hold.kind == HoldKind.PAUSED:
        return guard.pause_blocker(step.deps) is not None
    if hold.kind == HoldKind.MUTED:
        until = hold.muted_until
        return until is not None and step.deps.clock.now() < until
    if hold.kind == HoldKind.RATE:
        return rate.held_this_minute(step, incident.closed_at)
    if hold.kind == HoldKind.NOTICE:
        return trigger is None or _no_stronger(incident, trigger)
    return True


def _no_stronger(held: Incident, trigger: Trigger) -> bool:
    """Whether the trigger's evidence, with what the notice holds, still takes the notice's
    course (the one policy, `course_of`): a hold absorbs only evidence whose course is no
    stronger than its own. A hang localised by two signals acts as it does alone; a straggler
    said again stays a notice."""
    if not watch_evidence(trigger.item):
        return False
    with_it = copy.deepcopy(held)
    summaries.add_evidence(with_it, trigger.item)
    course, _ = course_of(with_it)
    return course.strength <= Course.NOTICE.strength


def epoch(step: Step) -> int:
    """Now, in the epoch seconds the held locks' windows are kept in."""
    return int(step.deps.clock.now().timestamp())
