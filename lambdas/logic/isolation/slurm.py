"""Node isolation on a HyperPod cluster orchestrated by Slurm: drain the suspect node with a
reason that names the incident (`sdc-remediation incident <id>`), on the cluster's controller;
resume it when the incident closes, only while the reason is still ours.

The orchestrator's other half is the package's own module (EKS: cordon and taint); the rules
are the same, and `isolation.release` decides for both when a node is released, kept or gone
(never mid-recovery, never a replaced node). What differs is here:
- the node's Slurm name is its host name (DescribeClusterNode's `PrivateDnsHostname`), taken
  from HyperPod, never from the report;
- a node that carries a reason already is someone else's (an operator, HyperPod's
  `Action:Replace`): it is reported in the record (`found_drain`) and left exactly as it was,
  neither drained nor resumed by us;
- a retried step finds its own reason (ALREADY_OURS) and changes nothing.
"""

from __future__ import annotations

import dataclasses

from sdc_remediation.lambdas.logic.core.steps import Step
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.errors import (
    SdcError,
    SlurmError,
    SlurmNodeNotFound,
    SlurmUnreachable,
)
from sdc_remediation.lambdas.models.hyperpod import Orchestrator
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.isolation import (
    IsolatedNode,
    IsolationCause,
    IsolationRecord,
    IsolationState,
)
from sdc_remediation.lambdas.models.slurm import DrainOutcome, drain_reason, slurm_node_name
from sdc_remediation.lambdas.observability import count, logger

from . import outcomes


def refusal(
    orchestrator: Orchestrator | None, controller: str | None, cluster_name: str
) -> tuple[IsolationCause, str] | None:
    """Why a Slurm drain cannot run for this cluster (None: it can)."""
    if orchestrator is not Orchestrator.SLURM:
        return (
            IsolationCause.MISMATCH,
            f"a Slurm controller is configured for {cluster_name}, but HyperPod names "
            f"{orchestrator or 'no orchestrator'} as its orchestrator",
        )
    if not controller:
        return (
            IsolationCause.NO_CONTROLLER,
            f"cluster {cluster_name} is orchestrated by Slurm and no controller is configured "
            "(slurm_controller in sdc:nodeIsolation): nowhere to drain",
        )
    return None


def isolate_one(step: Step, incident: Incident, controller: str, instance_id: str) -> IsolatedNode:
    """Drain one instance's node: its record (audited and counted)."""
    reason = drain_reason(incident.incident_id)
    try:
        node_name = _node_name(step, incident.cluster_name, instance_id)
    except _Unnamed as err:
        return _not_isolated(
            step, incident, instance_id, controller, IsolationCause.NO_HOSTNAME, err
        )
    except SdcError as err:
        return _not_isolated(step, incident, instance_id, controller, IsolationCause.HYPERPOD, err)
    try:
        change = step.deps.slurm.drain(controller, node_name, reason)
    except SlurmUnreachable as err:
        # No answer in time is no proof the drain did not run: Run Command may still deliver
        # it. The name is kept so that the release resumes it (only while the reason is ours).
        return _not_isolated(step, incident, instance_id, controller, err.cause, err, node_name)
    except SlurmError as err:
        return _not_isolated(step, incident, instance_id, controller, err.cause, err)
    ours = change.outcome is not DrainOutcome.FOREIGN
    record = IsolatedNode(
        IsolationState.ISOLATED,
        node_name=node_name,
        cordoned_by_us=ours,
        taint_added=change.outcome is DrainOutcome.DRAINED,
        found_drain=change.found_reason,
        reason=(
            f"drained by someone else ({change.found_reason!r}): reported, left as it is"
            if not ours
            else None
        ),
    )
    step.audit(
        incident.incident_id,
        AuditAction.NODE_ISOLATED,
        {
            "instance_id": instance_id,
            "slurm_controller": controller,
            "drain_reason": reason,
            **change.to_record(),
            "drained_by_us": ours,
        },
    )
    count(M.NODES_ISOLATED)
    logger.info(
        "node drained",
        incident_id=incident.incident_id,
        node=node_name,
        outcome=str(change.outcome),
    )
    return record


def not_sent(
    step: Step, incident: Incident, controller: str, instance_id: str, silent_for: str
) -> IsolatedNode:
    """The record of a node whose drain was not sent: the controller gave no answer for an
    earlier node of the same incident (audited and counted like any node not isolated)."""
    err = SlurmUnreachable(
        f"not sent: controller {controller} gave no answer in time for {silent_for}"
    )
    return _not_isolated(step, incident, instance_id, controller, err.cause, err)


def may_carry_a_late_drain(record: IsolationRecord, node: IsolatedNode) -> bool:
    """A node whose drain got no answer in time: the command may have run after all, so its
    release is due like an isolated node's (the resume touches only a reason that is ours)."""
    return (
        record.slurm_controller is not None
        and node.state is IsolationState.NOT_ISOLATED
        and node.cause is IsolationCause.UNREACHABLE
        and node.node_name is not None
    )


def release_one(
    step: Step,
    incident: Incident,
    record: IsolationRecord,
    instance_id: str,
    node: IsolatedNode,
    *,
    replaced: str | None = None,
) -> IsolatedNode:
    """Resume one node whose release is due (`isolation.release` decided that), only while its
    reason is ours: another reason is someone else's and stays (KEPT). `replaced`: the
    instance was replaced (the replacement is done): the node name it kept is resumed the same
    way, and the record says the instance is GONE."""
    controller = str(record.slurm_controller)
    name = str(node.node_name)
    reason = drain_reason(incident.incident_id)
    try:
        change = step.deps.slurm.resume(controller, name, reason)
    except SlurmNodeNotFound as err:
        return outcomes.gone(step, incident, instance_id, node, name, err)
    except SlurmError as err:
        return outcomes.release_failed(step, incident, instance_id, node, name, err)
    if change.outcome is DrainOutcome.FOREIGN:
        outcome = dataclasses.replace(
            node,
            state=IsolationState.KEPT,
            found_drain=change.found_reason,
            reason=f"drained by someone else ({change.found_reason!r}): left as it is",
        )
        step.audit(
            incident.incident_id,
            AuditAction.NODE_RELEASE_SKIPPED,
            {"instance_id": instance_id, **change.to_record(), "reason": outcome.reason},
        )
        return outcome
    step.audit(
        incident.incident_id,
        AuditAction.NODE_RELEASED,
        {
            "instance_id": instance_id,
            "slurm_controller": controller,
            **change.to_record(),
            **({"replaced": replaced} if replaced else {}),
        },
    )
    count(M.NODES_RELEASED)
    if replaced:
        return dataclasses.replace(
            node,
            state=IsolationState.GONE,
            reason=f"{replaced}; its replacement kept the Slurm node {name}, whose drain "
            f"({change.outcome}) no longer holds it",
            cause=None,
        )
    return dataclasses.replace(node, state=IsolationState.RELEASED, reason=None, cause=None)


class _Unnamed(SdcError):
    """HyperPod gave the instance no host name."""


def _node_name(step: Step, cluster_name: str, instance_id: str) -> str:
    info = step.deps.hyperpod.describe_node(cluster_name, instance_id)
    if not info.hostname:
        raise _Unnamed(
            f"HyperPod gives instance {instance_id} no PrivateDnsHostname: its Slurm node name "
            "is unknown"
        )
    return slurm_node_name(info.hostname)


def _not_isolated(
    step: Step,
    incident: Incident,
    instance_id: str,
    controller: str,
    cause: IsolationCause,
    err: SdcError,
    node_name: str | None = None,
) -> IsolatedNode:
    record = IsolatedNode(
        IsolationState.NOT_ISOLATED, node_name=node_name, cause=cause, reason=f"{cause}: {err}"
    )
    step.audit(
        incident.incident_id,
        AuditAction.NODE_NOT_ISOLATED,
        {"instance_id": instance_id, "slurm_controller": controller, **record.to_record()},
    )
    count(M.NODES_NOT_ISOLATED)
    return record
