"""The approver's reboot: the middle tier between a health check and a replacement.

A reboot keeps the instance and its volumes and takes minutes; a replacement destroys both and
takes tens of minutes. When an approver decides `reboot`:

    reboot_node   BatchRebootClusterNodes, every Failed[] code read as for the replacement
                  (InstanceIdInUse → in progress, InvalidInstanceStatus / InternalServerError →
                  retry, InstanceIdNotFound → gone), written ahead so a retry never reboots twice
    check_reboot  polled (bounded by the state machine) until the node is Running again
    then          `health_check.start_health_check` runs the deep health check once more: passed →
                  the incident closes as `rebooted` and the node is released; failed → a new
                  approval card with the new result. A reboot never turns into a replacement
                  without a second human decision, and an incident is rebooted at most
                  `lifecycle.MAX_REBOOTS` times.

Dry run: the reboot is recorded as "would reboot" and nothing is called. A cluster that hands
its recoveries to HyperPod (`lambdas.logic.safety.recovery_path`) gets the node health label instead of
the API call; the audit says which path acted.
"""

from __future__ import annotations

import dataclasses

from lambdas.logic.core import lifecycle
from lambdas.logic.core.steps import Step, node_status_of
from lambdas.logic.ports import Deps
from lambdas.logic.safety import carrying_out
from lambdas.metric_names import PipelineMetric as M
from lambdas.models.audit import AuditAction
from lambdas.models.errors import InvalidTransition
from lambdas.models.hyperpod import NodeStatus
from lambdas.models.incident import Incident, IncidentState
from lambdas.models.payloads import (
    IncidentRef,
    RebootStatus,
    RecoveryResult,
    RecoveryStatus,
)
from lambdas.models.recovery import RebootRecord
from lambdas.observability import count

S = IncidentState

RUNNING_POLLS_WITHOUT_DOWN = 2
"""HyperPod may report a quick reboot as Running throughout: after this many polls that all saw
Running (the first one a poll interval after the request), the reboot counts as done."""


def reboot_node(ref: IncidentRef, deps: Deps) -> RecoveryResult:
    """Re-check the node, then BatchRebootClusterNodes (see the module docstring)."""
    step = Step(deps, "reboot_node")
    with step.failing_visibly(ref.incident_id):
        incident = step.load(ref.incident_id)
        ours = lifecycle.reboot_requested(incident)
        return carrying_out.carry_out(
            step,
            incident,
            carrying_out.REBOOT,
            deps.hyperpod.reboot_nodes,
            _unasked,
            ours=ours,
            on_enter=_start_reboot_record,
        )


def _unasked(found: carrying_out.Found) -> carrying_out.Unasked | None:
    """Why no reboot is asked for (the node is gone; a dry run), or None to ask."""
    if found.node_status == NodeStatus.NOT_FOUND:
        return carrying_out.Unasked(
            RecoveryStatus.GONE,
            AuditAction.NODE_GONE,
            {"reason": "the node is gone: nothing to reboot"},
        )
    if found.dry_run:
        return carrying_out.Unasked(
            RecoveryStatus.DRY_RUN,
            AuditAction.REBOOT_WOULD_REBOOT,
            {"would_reboot": found.incident.instance_id, "node_status": found.node_status},
        )
    return None


def check_reboot(ref: IncidentRef, deps: Deps) -> RebootStatus:
    """One poll: done once the node is Running again (after a status other than Running, or
    `RUNNING_POLLS_WITHOUT_DOWN` polls of Running); gone if HyperPod no longer knows it."""
    step = Step(deps, "check_reboot")
    with step.failing_visibly(ref.incident_id):
        incident = step.load(ref.incident_id)
        if incident.state is not S.REBOOTING:
            raise InvalidTransition(f"no reboot to poll: incident is {incident.state}")
        reboot = incident.reboot or RebootRecord()
        if reboot.done:
            return {"done": True, "gone": False, "status": str(incident.node_status)}
        if reboot.dry_run:
            _finish(step, incident, str(incident.node_status), [])
            return {"done": True, "gone": False, "status": str(incident.node_status)}

        status, request_id = node_status_of(deps, incident)
        if status == NodeStatus.NOT_FOUND:
            step.audit(
                ref.incident_id, AuditAction.REBOOT_NODE_GONE, {"node_status": status}, [request_id]
            )
            return {"done": False, "gone": True, "status": status}
        polls = reboot.polls + 1
        seen_down = reboot.seen_down or status != NodeStatus.RUNNING
        if status == NodeStatus.RUNNING and (seen_down or polls >= RUNNING_POLLS_WITHOUT_DOWN):
            _finish(step, incident, status, [request_id], polls=polls)
            return {"done": True, "gone": False, "status": status}
        changed = status != reboot.node_status

        def note(current: Incident) -> bool:
            current.reboot = dataclasses.replace(
                current.reboot or RebootRecord(),
                node_status=status,
                polls=polls,
                seen_down=seen_down,
            )
            current.node_status = status
            return True

        step.update(ref.incident_id, note, incident)
        if changed:
            step.audit(
                ref.incident_id,
                AuditAction.REBOOT_STATUS,
                {"node_status": status, "polls": polls},
                [request_id],
            )
        return {"done": False, "gone": False, "status": status}


def _start_reboot_record(current: Incident) -> None:
    """Entering `rebooting`: the decision is kept with the reboot it started."""
    current.reboot = dataclasses.replace(
        current.reboot or RebootRecord(),
        decision=current.decision,
        count=lifecycle.reboots_done(current) + 1,
        path=None,
        status=None,
        polls=0,
        seen_down=False,
    )


def _finish(
    step: Step,
    incident: Incident,
    status: str,
    request_ids: list[str | None],
    *,
    polls: int | None = None,
) -> None:
    dry_run = bool(incident.reboot and incident.reboot.dry_run)

    def record(current: Incident) -> bool:
        earlier = current.reboot or RebootRecord()
        current.reboot = dataclasses.replace(
            earlier,
            status="done",
            node_status=status,
            done_at=step.now(),
            polls=earlier.polls if polls is None else polls,
        )
        current.node_status = status
        return True

    step.update(incident.incident_id, record, incident)
    step.audit(
        incident.incident_id,
        AuditAction.REBOOT_DONE,
        {"instance_id": incident.instance_id, "node_status": status, "dry_run": dry_run},
        request_ids,
    )
    count(M.REBOOTS_DONE)
