"""Node isolation while an incident is open: cordon the suspect node and taint it with the
incident (`sdc.remediation/incident=<incident id>:NoSchedule`) through the EKS cluster's
Kubernetes API, so that a restarted job does not land on it while the approval is pending; undo
exactly that when the incident closes without a replacement. On a cluster orchestrated by Slurm
the same step drains the node on the cluster's controller instead
(`sdc_remediation.lambdas.logic.isolation.slurm`): which one runs is what HyperPod's DescribeCluster names as the
orchestrator; the rules of when to release, keep or leave a node are the same for both.

`incident.isolation` records what was done, per instance (`sdc_remediation.lambdas.models.isolation`).

Rules: an incident whose course (`sdc_remediation.lambdas.logic.evidence.recommendation.course_of`: the
decision table's row for the training watch's evidence alone) is not to act isolates nothing, a
hang the table calls ambiguous included; a cluster not configured for isolation is not touched; a Kubernetes API that does not
answer (or refuses) never fails the incident: it records "not isolated: <cause>" and the flow
goes on; before a node is patched its prior `unschedulable` is written ahead, so a retried step
neither patches twice nor mistakes its own cordon for an operator's; release removes only the
taint naming this incident and clears `unschedulable` only if this incident set it.
"""

from __future__ import annotations

import dataclasses

from sdc_remediation.lambdas.logic.core import lifecycle
from sdc_remediation.lambdas.logic.core.steps import Step
from sdc_remediation.lambdas.logic.evidence.recommendation import course_of
from sdc_remediation.lambdas.logic.ports import Deps
from sdc_remediation.lambdas.logic.safety import guard
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.errors import KubernetesError, KubernetesNotFound, SdcError
from sdc_remediation.lambdas.models.health_check import HealthCheckResult
from sdc_remediation.lambdas.models.hyperpod import Orchestrator
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.isolation import (
    IsolatedNode,
    IsolationCause,
    IsolationRecord,
    IsolationState,
)
from sdc_remediation.lambdas.models.kubernetes import Taint, incident_taint
from sdc_remediation.lambdas.models.payloads import IncidentRef, IsolationResult
from sdc_remediation.lambdas.models.recommendation import Course
from sdc_remediation.lambdas.models.slurm import drain_reason
from sdc_remediation.lambdas.observability import count, logger

from . import outcomes, slurm

_TO_RELEASE = frozenset(
    {IsolationState.ISOLATED, IsolationState.PENDING, IsolationState.RELEASE_FAILED}
)


def isolate_node(ref: IncidentRef, deps: Deps) -> IsolationResult:
    """The remediation state machine's first step. Never fails for the Kubernetes API: the
    incident records why its node is not isolated and the flow goes on."""
    step = Step(deps, "isolate_node")
    with step.failing_visibly(ref.incident_id):
        incident = isolate(step, step.load(ref.incident_id))
        record = incident.isolation
        return {
            "isolated": record is not None and record.state == IsolationState.ISOLATED,
            "state": str(record.state if record else None),
            "reason": record.reason if record else None,
        }


def isolate(step: Step, incident: Incident) -> Incident:
    """Cordon and taint the incident's node(s) if its cluster is configured for it; record and
    audit what was done. A finished earlier attempt is returned as it is."""
    existing = incident.isolation
    if existing and existing.state in (
        IsolationState.ISOLATED,
        IsolationState.NOT_ISOLATED,
        IsolationState.RELEASED,
        IsolationState.RELEASE_FAILED,
        IsolationState.KEPT,
    ):
        return incident
    deps = step.deps
    taint = incident_taint(incident.incident_id)
    base = IsolationRecord(IsolationState.PENDING, taint=str(taint))
    if incident.state is not IncidentState.OPENED:
        return _settle(
            step, incident, base, IsolationCause.STATE, f"the incident is already {incident.state}"
        )
    course, why = course_of(incident)
    if course is not Course.ACT:
        return _settle(
            step, incident, base, IsolationCause.COURSE, f"the decision table's row: {why}"
        )
    config = deps.settings.isolation_for(incident.cluster_name)
    if not config.isolate:
        return _settle(
            step,
            incident,
            base,
            IsolationCause.OFF,
            f"node isolation is off for cluster {incident.cluster_name} (sdc:nodeIsolation)",
        )
    blocker = guard.blocker(deps, incident.cluster_name, trusted=incident.has_trusted_evidence)
    if blocker is not None:
        return _settle(step, incident, base, IsolationCause.HELD, f"nothing acts: {blocker.reason}")
    instances = [i for i in incident.locked_instances if i]
    if not instances:
        return _settle(
            step, incident, base, IsolationCause.NO_INSTANCE, "the incident names no instance"
        )
    try:
        info = deps.hyperpod.describe_cluster(incident.cluster_name)
    except SdcError as err:
        return _settle(
            step, incident, base, IsolationCause.HYPERPOD, f"DescribeCluster failed: {err}"
        )
    if config.slurm_controller or info.orchestrator is Orchestrator.SLURM:
        return _drain(step, incident, base, info.orchestrator, config.slurm_controller, instances)
    eks = config.eks_cluster or info.eks_cluster_name
    if info.eks_cluster_name is None:
        return _settle(
            step,
            incident,
            base,
            IsolationCause.NOT_EKS,
            f"cluster {incident.cluster_name} is not orchestrated by EKS: no Kubernetes node "
            "to cordon",
        )
    if eks != info.eks_cluster_name:
        return _settle(
            step,
            incident,
            base,
            IsolationCause.MISMATCH,
            f"configured EKS cluster {eks}, but HyperPod names {info.eks_cluster_name} as the "
            f"orchestrator of {incident.cluster_name}",
        )
    assert eks is not None
    nodes = dict(existing.nodes) if existing else {}
    for instance_id in instances:
        nodes[instance_id], incident = _isolate_one(step, incident, eks, taint, instance_id, nodes)
    done = dataclasses.replace(base, eks_cluster=eks, nodes=nodes)
    return _settle_nodes(step, incident, done)


def _drain(
    step: Step,
    incident: Incident,
    base: IsolationRecord,
    orchestrator: Orchestrator | None,
    controller: str | None,
    instances: list[str],
) -> Incident:
    """Slurm: drain each instance's node on the controller (`sdc_remediation.lambdas.logic.isolation.slurm`)."""
    base = dataclasses.replace(base, taint=drain_reason(incident.incident_id))
    refused = slurm.refusal(orchestrator, controller, incident.cluster_name)
    if refused is not None:
        return _settle(step, incident, base, *refused)
    assert controller is not None
    existing = incident.isolation
    nodes = dict(existing.nodes) if existing else {}
    silent: str | None = None
    for instance_id in instances:
        if silent is not None:
            # One wait for an answer per node would outlast the function's time limit: the
            # other nodes are not sent (nothing of ours can land on them later).
            nodes[instance_id] = slurm.not_sent(step, incident, controller, instance_id, silent)
            continue
        nodes[instance_id] = slurm.isolate_one(step, incident, controller, instance_id)
        if nodes[instance_id].cause is IsolationCause.UNREACHABLE:
            silent = instance_id
    done = dataclasses.replace(base, slurm_controller=controller, nodes=nodes)
    return _settle_nodes(step, incident, done)


def _isolate_one(
    step: Step,
    incident: Incident,
    eks: str,
    taint: Taint,
    instance_id: str,
    nodes: dict[str, IsolatedNode],
) -> tuple[IsolatedNode, Incident]:
    """Isolate one node: its record, and the incident as last written."""
    kube = step.deps.kubernetes
    earlier = nodes.get(instance_id)
    try:
        node = kube.find_node(eks, instance_id)
        if earlier and earlier.state == IsolationState.PENDING and earlier.node_name == node.name:
            was_unschedulable = bool(earlier.was_unschedulable)
        else:
            was_unschedulable = node.unschedulable
            incident = _write_ahead(step, incident, instance_id, node.name, was_unschedulable, eks)
        change = kube.cordon(eks, node.name, taint)
    except KubernetesError as err:
        record = _failed(err, earlier.node_name if earlier else None)
        step.audit(
            incident.incident_id,
            AuditAction.NODE_NOT_ISOLATED,
            {"instance_id": instance_id, "eks_cluster": eks, **record.to_record()},
        )
        count(M.NODES_NOT_ISOLATED)
        return record, incident
    record = IsolatedNode(
        IsolationState.ISOLATED,
        node_name=change.node_name,
        resource_version=change.resource_version,
        was_unschedulable=was_unschedulable,
        cordoned_by_us=not was_unschedulable,
        taint_added=change.found_taint is None,
        found_taint=change.found_taint,
        reason=(
            f"another incident's taint {change.found_taint} holds the taint slot; "
            "the node is cordoned"
            if change.found_taint
            else None
        ),
    )
    step.audit(
        incident.incident_id,
        AuditAction.NODE_ISOLATED,
        {
            "instance_id": instance_id,
            "eks_cluster": eks,
            "taint": str(taint),
            **change.to_record(),
            "cordoned_by_us": record.cordoned_by_us,
        },
    )
    count(M.NODES_ISOLATED)
    logger.info("node isolated", incident_id=incident.incident_id, node=change.node_name, eks=eks)
    return record, incident


def _write_ahead(
    step: Step, incident: Incident, instance_id: str, node_name: str, was: bool, eks: str
) -> Incident:
    """Keep the node's state before our patch: a retry after a crash knows the cordon is ours."""

    def note(current: Incident) -> bool:
        record = current.isolation or IsolationRecord(IsolationState.PENDING)
        nodes = {**record.nodes, instance_id: IsolatedNode(IsolationState.PENDING, node_name, was)}
        current.isolation = dataclasses.replace(
            record, state=IsolationState.PENDING, eks_cluster=eks, nodes=nodes
        )
        return True

    return step.update(incident.incident_id, note, incident)


def _failed(err: KubernetesError, node_name: str | None) -> IsolatedNode:
    return IsolatedNode(
        IsolationState.NOT_ISOLATED,
        node_name=node_name,
        cause=err.cause,
        reason=f"{err.cause}: {err}",
        status=err.status,
    )


def _settle_nodes(step: Step, incident: Incident, done: IsolationRecord) -> Incident:
    """Settle a record whose nodes were each tried: isolated when all are, else not, with each
    failed node's cause and reason."""
    failed = {i: n for i, n in done.nodes.items() if n.state != IsolationState.ISOLATED}
    if not failed:
        return _settle(step, incident, done, None, None, state=IsolationState.ISOLATED)
    causes = sorted({str(n.cause) for n in failed.values()})
    reason = "; ".join(f"{i}: {n.reason}" for i, n in sorted(failed.items()))
    return _settle(step, incident, done, ",".join(causes), reason)


def _settle(
    step: Step,
    incident: Incident,
    record: IsolationRecord,
    cause: str | None,
    reason: str | None,
    *,
    state: IsolationState = IsolationState.NOT_ISOLATED,
) -> Incident:
    at = step.now()
    final = dataclasses.replace(record, state=state, cause=cause, reason=reason, at=at)

    def keep(current: Incident) -> bool:
        current.isolation = final
        return True

    incident = step.update(incident.incident_id, keep, incident)
    if state != IsolationState.ISOLATED:
        step.audit(
            incident.incident_id,
            AuditAction.ISOLATION_SKIPPED if not record.nodes else AuditAction.ISOLATION_INCOMPLETE,
            {"cause": cause, "reason": reason},
        )
        count(M.ISOLATION_SKIPPED)
        logger.info("node not isolated", incident_id=incident.incident_id, cause=cause)
    return incident


def release(step: Step, incident: Incident) -> Incident:
    """Undo the isolation of a closing incident, node by node: a replaced node is gone (nothing
    to release); a node a job-level incident found failing its health check stays cordoned for
    inspection; every other isolated node loses our taint, and its cordon when we set it. A
    node whose release fails is recorded (the closing notice says how to lift it by hand);
    closing again retries it."""
    record = incident.isolation
    if record is None:
        return incident
    nodes = dict(record.nodes)
    due = {
        i: n
        for i, n in nodes.items()
        if n.state in _TO_RELEASE or slurm.may_carry_a_late_drain(record, n)
    }
    if not due:
        return incident
    taint = incident_taint(incident.incident_id)
    for instance_id, node in due.items():
        nodes[instance_id] = _release_one(step, incident, record, taint, instance_id, node)
    states = {n.state for n in nodes.values()}
    overall = (
        IsolationState.RELEASE_FAILED
        if IsolationState.RELEASE_FAILED in states
        else IsolationState.KEPT
        if IsolationState.KEPT in states
        else IsolationState.RELEASED
    )
    at = step.now()

    def keep(current: Incident) -> bool:
        current.isolation = dataclasses.replace(record, nodes=nodes, state=overall, released_at=at)
        return True

    return step.update(incident.incident_id, keep, incident)


def _release_one(
    step: Step,
    incident: Incident,
    record: IsolationRecord,
    taint: Taint,
    instance_id: str,
    node: IsolatedNode,
) -> IsolatedNode:
    eks = str(record.eks_cluster)
    name = node.node_name
    gone = _gone_reason(incident)
    kept = _kept_reason(incident, instance_id)
    if record.slurm_controller and name and (gone or not kept):
        # A replacement keeps the Slurm node's name: once it is done, the new instance
        # would stay drained under our reason; the drain is lifted (only while it is ours),
        # even where the old instance was to be kept for inspection (a job-level incident's
        # node that failed its health check): the name is the new instance's now.
        return slurm.release_one(step, incident, record, instance_id, node, replaced=gone)
    if gone or kept or not name:
        outcome = dataclasses.replace(
            node,
            state=IsolationState.GONE if gone or not name else IsolationState.KEPT,
            reason=gone or kept or "the node was never found: nothing to release",
        )
        step.audit(
            incident.incident_id,
            AuditAction.NODE_RELEASE_SKIPPED,
            {"instance_id": instance_id, "node_name": name, "reason": outcome.reason},
        )
        return outcome
    try:
        change = step.deps.kubernetes.uncordon(
            eks, str(name), taint, clear_unschedulable=bool(node.cordoned_by_us)
        )
    except KubernetesNotFound as err:
        return outcomes.gone(step, incident, instance_id, node, str(name), err)
    except KubernetesError as err:
        return outcomes.release_failed(step, incident, instance_id, node, str(name), err)
    step.audit(
        incident.incident_id,
        AuditAction.NODE_RELEASED,
        {"instance_id": instance_id, "eks_cluster": eks, "taint": str(taint), **change.to_record()},
    )
    count(M.NODES_RELEASED)
    return dataclasses.replace(
        node,
        state=IsolationState.RELEASED,
        resource_version=change.resource_version,
        reason=None,
        cause=None,
    )


def _gone_reason(incident: Incident) -> str | None:
    replacement = incident.replacement
    if incident.state is IncidentState.REPLACED_BY_HYPERPOD:
        return "HyperPod replaced the node: nothing to release"
    if replacement and replacement.done and not replacement.dry_run:
        return "the node was replaced: nothing to release"
    return None


def _kept_reason(incident: Incident, instance_id: str) -> str | None:
    if lifecycle.closed_undecided(incident):
        return (
            f"closed as {incident.state} with no decision on its approval request (the waiting "
            "task was answered outside the approval state machine): left cordoned for a person"
        )
    if not incident.is_job:
        return None
    nodes = incident.health_check.nodes if incident.health_check else None
    checked = (nodes or {}).get(instance_id)
    if checked and checked.result == HealthCheckResult.FAILED:
        return "failed its deep health check: left cordoned for inspection"
    return None
