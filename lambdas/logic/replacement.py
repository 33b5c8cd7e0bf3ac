"""The approved replacement: `replace_node` asks for it, `check_replacement` polls it.

Both run inside `Step.failing_visibly` (see `lambdas.logic.core.steps`). The request itself, its
write-ahead and the reading of every `Failed[]` code are shared with the reboot
(`lambdas.logic.safety.carrying_out`); what is particular to a replacement is when nothing is asked
(`_unasked`) and how its end is recognised (the old instance is gone).
"""

from __future__ import annotations

import dataclasses

from lambdas.logic.core import lifecycle
from lambdas.logic.core.steps import Step, node_status_of
from lambdas.logic.ports import Deps
from lambdas.logic.safety import carrying_out
from lambdas.metric_names import PipelineMetric as M
from lambdas.models.audit import AuditAction
from lambdas.models.errors import InvalidTransition, NodeNotFound
from lambdas.models.hyperpod import NodeRecovery, NodeStatus
from lambdas.models.incident import Incident, IncidentState
from lambdas.models.payloads import (
    IncidentRef,
    RecoveryResult,
    RecoveryStatus,
    ReplacementStatus,
)
from lambdas.models.recovery import ReplacementRecord
from lambdas.observability import count

S = IncidentState


def replace_node(ref: IncidentRef, deps: Deps) -> RecoveryResult:
    """Re-check the node, then BatchReplaceClusterNodes, reading every `Failed[]` code.

    - storm hold or paused, and nothing requested yet → held (nothing is called);
    - otherwise the one decision of `_unasked`: the node gone, a dry run or HyperPod's own
      replacement under way → recorded, nothing is called;
    - otherwise the request is written ahead (`pending`), then sent: InstanceIdInUse →
      in_progress, InvalidInstanceStatus or InternalServerError → retry, InstanceIdNotFound →
      gone, anything else → ReplacementRejected.
    """
    step = Step(deps, "replace_node")
    with step.failing_visibly(ref.incident_id):
        incident = step.load(ref.incident_id)
        ours = lifecycle.requested_by_us(incident)
        return carrying_out.carry_out(
            step,
            incident,
            carrying_out.REPLACEMENT,
            deps.hyperpod.replace_nodes,
            _unasked,
            ours=ours,
        )


def _unasked(found: carrying_out.Found) -> carrying_out.Unasked | None:
    """Why no replacement is asked for, or None to ask:

    - the node is gone → gone (HyperPod replaced it: closes as replaced_by_hyperpod unless
      this pipeline had asked);
    - DRY_RUN → "would replace" audited;
    - NodeRecovery Automatic and the node ShuttingDown without our request → in_progress: it is
      HyperPod's own replacement.
    """
    incident, status = found.incident, found.node_status
    if status == NodeStatus.NOT_FOUND:
        return carrying_out.Unasked(
            RecoveryStatus.GONE,
            AuditAction.NODE_GONE,
            {"reason": "the node is already gone: nothing to replace", "by_us": found.ours},
            ours=found.ours,
        )
    if found.dry_run:
        return carrying_out.Unasked(
            RecoveryStatus.DRY_RUN,
            AuditAction.REPLACEMENT_WOULD_REPLACE,
            {"would_replace": incident.instance_id, "node_status": status},
        )
    if (
        not found.ours
        and incident.node_recovery == NodeRecovery.AUTOMATIC
        and status == NodeStatus.SHUTTING_DOWN
    ):
        return carrying_out.Unasked(
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
            status="done",
            new_instance_id=new_instance_id,
            done_at=step.now(),
        )
        if not dry_run:
            current.node_status = NodeStatus.NOT_FOUND.value
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
