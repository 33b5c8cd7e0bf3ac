"""The approved recovery, by tier: a reboot or a replacement, each asked for once and polled.

A reboot keeps the instance and its volumes and takes minutes; a replacement destroys both and
takes tens of minutes. The approver chooses (decision `reboot` or `approve`):

    reboot_node        BatchRebootClusterNodes
    check_reboot       polled (bounded by the state machine) until the node is Running again
    then               `health_check.start_health_check` runs the deep health check once more:
                       passed → the incident closes as `rebooted` and the node is released;
                       failed → a new approval card with the new result. A reboot never turns
                       into a replacement without a second human decision, and an incident is
                       rebooted at most `MAX_REBOOTS` times (`sdc_remediation.lambdas.models.recovery`).

    replace_node       BatchReplaceClusterNodes
    check_replacement  polled until the old instance is gone (or HyperPod's own recovery
                       replaced it first)

Both requests run inside `Step.failing_visibly` (see `sdc_remediation.lambdas.logic.core.steps`). The request
itself, its write-ahead (a retry never reboots or replaces twice) and the reading of every
`Failed[]` code (InstanceIdInUse → in progress, InvalidInstanceStatus / InternalServerError →
retry, InstanceIdNotFound → gone) are shared (`sdc_remediation.lambdas.logic.recovery.engine`); what is
particular to each tier is when nothing is asked (`_reboot_unasked`, `_replacement_unasked`)
and how its end is recognised.

Dry run: the recovery is recorded as "would reboot" / "would replace" and nothing is called. A
cluster that hands its recoveries to HyperPod (`sdc_remediation.lambdas.logic.recovery.path`) gets the
node health label instead of the API call; the audit says which path acted.

This package is the stage: its steps are here, on top; `engine` (the one way a recovery is
asked for) and `path` (which way it goes) are what they run.
"""

from __future__ import annotations

import dataclasses

from sdc_remediation.lambdas.logic.core import lifecycle
from sdc_remediation.lambdas.logic.core.steps import Step, node_status_of
from sdc_remediation.lambdas.logic.ports import Deps
from sdc_remediation.lambdas.logic.recovery import engine
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.errors import InvalidTransition, NodeNotFound
from sdc_remediation.lambdas.models.hyperpod import NodeRecovery, NodeStatus
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.payloads import (
    IncidentRef,
    RebootStatus,
    RecoveryResult,
    RecoveryStatus,
    ReplacementStatus,
)
from sdc_remediation.lambdas.models.recovery import RebootRecord, ReplacementRecord
from sdc_remediation.lambdas.observability import count

S = IncidentState

# -- the reboot ---------------------------------------------------------------------------------

RUNNING_POLLS_WITHOUT_DOWN = 2
"""HyperPod may report a quick reboot as Running throughout: after this many polls that all saw
Running (the first one a poll interval after the request), the reboot counts as done."""


def reboot_node(ref: IncidentRef, deps: Deps) -> RecoveryResult:
    """Re-check the node, then BatchRebootClusterNodes (see the module docstring)."""
    step = Step(deps, "reboot_node")
    with step.failing_visibly(ref.incident_id):
        incident = step.load(ref.incident_id)
        ours = lifecycle.reboot_requested(incident)
        return engine.carry_out(
            step,
            incident,
            engine.REBOOT,
            deps.hyperpod.reboot_nodes,
            _reboot_unasked,
            ours=ours,
            on_enter=_start_reboot_record,
        )


def _reboot_unasked(found: engine.Found) -> engine.Unasked | None:
    """Why no reboot is asked for (the node is gone; a dry run), or None to ask."""
    if found.node_status == NodeStatus.NOT_FOUND:
        return engine.Unasked(
            RecoveryStatus.GONE,
            AuditAction.NODE_GONE,
            {"reason": "the node is gone: nothing to reboot"},
        )
    if found.dry_run:
        return engine.Unasked(
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
            _finish_reboot(step, incident, NodeStatus(str(incident.node_status)), [])
            return {"done": True, "gone": False, "status": str(incident.node_status)}

        _, status, done = poll_reboot(step, incident)
        gone = status == NodeStatus.NOT_FOUND
        return {"done": done, "gone": gone, "status": status}


def poll_reboot(step: Step, incident: Incident) -> tuple[Incident, NodeStatus, bool]:
    """One look at the node of a reboot asked for and not done: the incident as recorded, the
    node's status, and whether the
    reboot is now done (Running again after a status other than Running, or after
    `RUNNING_POLLS_WITHOUT_DOWN` looks that all saw Running), recorded and audited. `check_reboot`
    polls with it, and so does reconciliation (`sdc_remediation.lambdas.logic.closing`): a node is counted back
    from its reboot on this evidence alone."""
    reboot = incident.reboot or RebootRecord()
    status, request_id = node_status_of(step.deps, incident)
    if status == NodeStatus.NOT_FOUND:
        step.audit(
            incident.incident_id,
            AuditAction.REBOOT_NODE_GONE,
            {"node_status": status},
            [request_id],
        )
        return incident, status, False
    polls = reboot.polls + 1
    seen_down = reboot.seen_down or status != NodeStatus.RUNNING
    if status == NodeStatus.RUNNING and (seen_down or polls >= RUNNING_POLLS_WITHOUT_DOWN):
        incident = _finish_reboot(step, incident, status, [request_id], polls=polls)
        return incident, status, True
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

    incident = step.update(incident.incident_id, note, incident)
    if changed:
        step.audit(
            incident.incident_id,
            AuditAction.REBOOT_STATUS,
            {"node_status": status, "polls": polls},
            [request_id],
        )
    return incident, status, False


def _start_reboot_record(current: Incident) -> None:
    """Entering `rebooting`: the decision is kept with the reboot it started."""
    current.reboot = dataclasses.replace(
        current.reboot or RebootRecord(),
        decision=current.decision,
        count=current.reboots + 1,
        path=None,
        status=None,
        polls=0,
        seen_down=False,
    )


def _finish_reboot(
    step: Step,
    incident: Incident,
    status: NodeStatus,
    request_ids: list[str | None],
    *,
    polls: int | None = None,
) -> Incident:
    dry_run = bool(incident.reboot and incident.reboot.dry_run)

    def record(current: Incident) -> bool:
        earlier = current.reboot or RebootRecord()
        current.reboot = dataclasses.replace(
            earlier,
            status=RecoveryStatus.DONE,
            node_status=status,
            done_at=step.now(),
            polls=earlier.polls if polls is None else polls,
        )
        current.node_status = status
        return True

    incident = step.update(incident.incident_id, record, incident)
    step.audit(
        incident.incident_id,
        AuditAction.REBOOT_DONE,
        {"instance_id": incident.instance_id, "node_status": status, "dry_run": dry_run},
        request_ids,
    )
    count(M.REBOOTS_DONE)
    return incident


# -- the replacement -----------------------------------------------------------------------------


def replace_node(ref: IncidentRef, deps: Deps) -> RecoveryResult:
    """Re-check the node, then BatchReplaceClusterNodes, reading every `Failed[]` code.

    - storm hold or paused, and nothing requested yet → held (nothing is called);
    - otherwise the one decision of `_replacement_unasked`: the node gone, a dry run or HyperPod's own
      replacement under way → recorded, nothing is called;
    - otherwise the request is written ahead (`pending`), then sent: InstanceIdInUse →
      in_progress, InvalidInstanceStatus or InternalServerError → retry, InstanceIdNotFound →
      gone, anything else → ReplacementRejected.
    """
    step = Step(deps, "replace_node")
    with step.failing_visibly(ref.incident_id):
        incident = step.load(ref.incident_id)
        ours = lifecycle.requested_by_us(incident)
        return engine.carry_out(
            step,
            incident,
            engine.REPLACEMENT,
            deps.hyperpod.replace_nodes,
            _replacement_unasked,
            ours=ours,
        )


def _replacement_unasked(found: engine.Found) -> engine.Unasked | None:
    """Why no replacement is asked for, or None to ask:

    - the node is gone → gone (HyperPod replaced it: closes as replaced_by_hyperpod unless
      this pipeline had asked);
    - DRY_RUN → "would replace" audited;
    - NodeRecovery Automatic and the node ShuttingDown without our request → in_progress: it is
      HyperPod's own replacement.
    """
    incident, status = found.incident, found.node_status
    if status == NodeStatus.NOT_FOUND:
        return engine.Unasked(
            RecoveryStatus.GONE,
            AuditAction.NODE_GONE,
            {"reason": "the node is already gone: nothing to replace", "by_us": found.ours},
            ours=found.ours,
        )
    if found.dry_run:
        return engine.Unasked(
            RecoveryStatus.DRY_RUN,
            AuditAction.REPLACEMENT_WOULD_REPLACE,
            {"would_replace": incident.instance_id, "node_status": status},
        )
    if (
        not found.ours
        and incident.node_recovery == NodeRecovery.AUTOMATIC
        and status == NodeStatus.SHUTTING_DOWN
    ):
        return engine.Unasked(
            RecoveryStatus.IN_PROGRESS,
            AuditAction.REPLACEMENT_BY_HYPERPOD,
            {
                "reason": "NodeRecovery is Automatic and HyperPod is already replacing the "
                "node: nothing requested",
                "node_status": status,
            },
        )
    return None


def check_replacement(ref: IncidentRef, deps: Deps) -> ReplacementStatus:
    """Done once the old instance is gone; the new instance id is recorded when HyperPod names
    it (the replacement keeps the node's logical id)."""
    step = Step(deps, "check_replacement")
    with step.failing_visibly(ref.incident_id):
        incident = step.load(ref.incident_id)
        if incident.state is not S.REPLACING:
            raise InvalidTransition(f"no replacement to poll: incident is {incident.state}")
        replacement = incident.replacement or ReplacementRecord()
        if replacement.done:
            return {"done": True, "new_instance_id": replacement.new_instance_id}
        if replacement.dry_run:
            _finish_replacement(step, incident, None, [], dry_run=True)
            return {"done": True, "new_instance_id": None}

        status, request_id = node_status_of(deps, incident)
        if status != NodeStatus.NOT_FOUND:
            if status != replacement.node_status:

                def note(current: Incident) -> bool:
                    current.replacement = dataclasses.replace(
                        current.replacement or ReplacementRecord(), node_status=status
                    )
                    current.node_status = status
                    return True

                step.update(ref.incident_id, note, incident)
                step.audit(
                    ref.incident_id,
                    AuditAction.REPLACEMENT_STATUS,
                    {"node_status": status},
                    [request_id],
                )
            return {"done": False, "new_instance_id": None}

        new_id, new_request_id = _new_instance_id(deps, incident)
        _finish_replacement(step, incident, new_id, [request_id, new_request_id])
        return {"done": True, "new_instance_id": new_id}


def _new_instance_id(deps: Deps, incident: Incident) -> tuple[str | None, str | None]:
    if not incident.node_logical_id:
        return None, None
    try:
        node = deps.hyperpod.describe_node_by_logical_id(
            incident.cluster_name, incident.node_logical_id
        )
    except NodeNotFound as err:
        return None, err.request_id
    if node.instance_id == incident.instance_id:
        return None, node.request_id
    return node.instance_id, node.request_id


def _finish_replacement(
    step: Step,
    incident: Incident,
    new_instance_id: str | None,
    request_ids: list[str | None],
    *,
    dry_run: bool = False,
) -> None:
    def record(current: Incident) -> bool:
        current.replacement = dataclasses.replace(
            current.replacement or ReplacementRecord(),
            status=RecoveryStatus.DONE,
            new_instance_id=new_instance_id,
            done_at=step.now(),
        )
        if not dry_run:
            current.node_status = NodeStatus.NOT_FOUND
        return True

    step.update(incident.incident_id, record, incident)
    step.audit(
        incident.incident_id,
        AuditAction.REPLACEMENT_DONE,
        {
            "old_instance_id": incident.instance_id,
            "new_instance_id": new_instance_id,
            "dry_run": dry_run,
        },
        request_ids,
    )
    count(M.REPLACEMENTS_DONE)
