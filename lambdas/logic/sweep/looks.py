"""What a sweep sees of each node: HyperPod's status, and its orchestrator's word on jobs,
cordons, drains and reservations.

Idle, on EKS: HyperPod says Running, and the Kubernetes node (found by providerID) is not
cordoned, carries no NoSchedule or NoExecute taint (anyone's: ours, HyperPod's, an operator's),
HyperPod's health label (where set) says Schedulable, and no workload pod is scheduled on it
(any pod of any namespace but a DaemonSet's, a static pod's mirror, or one that ended: a job's
pod whatever its labels, a notebook, a service). On Slurm: HyperPod says Running, and the controller
shows the node (by its host name) `IDLE` with no reason and no flag but those of a powered-down
cloud node: a drain, a down or failed node, a reservation (HyperPod's maintenance one while it
checks), a job (allocated, mixed, completing) all keep it out. Anything the sweep cannot see
(no orchestrator, a node its orchestrator does not know) is not idle: a sweep
never checks what it cannot judge.
"""

from __future__ import annotations

from sdc_remediation.lambdas.logic.core.steps import Step
from sdc_remediation.lambdas.models.hyperpod import ClusterInfo, NodeInfo, NodeStatus, Orchestrator
from sdc_remediation.lambdas.models.kubernetes import NODE_HEALTH_LABEL, KubeNode
from sdc_remediation.lambdas.models.slurm import SlurmNodeState, slurm_node_name
from sdc_remediation.lambdas.models.sweep import NodeLook, SkipReason

SCHEDULABLE = "Schedulable"
"""HyperPod's node health label value of a node free for jobs."""
KEEPS_OUT = ("NoSchedule", "NoExecute")
SLURM_IDLE_FLAGS = frozenset({"IDLE", "CLOUD", "POWERED_DOWN"})
"""The only state flags an idle Slurm node may show (a cloud node powered down is idle)."""
SLURM_RESERVED = frozenset({"RESERVED", "MAINTENANCE", "MAINT"})


class NotJudged(Exception):
    """Nothing of the cluster can be judged idle (the message says why)."""


def look(step: Step, cluster: ClusterInfo) -> dict[str, NodeLook]:
    """Every node of the cluster as the sweep sees it now, by instance id. Raises NotJudged
    when the cluster's orchestrator cannot tell idle nodes (none configured for the pipeline)."""
    deps = step.deps
    nodes = deps.hyperpod.list_nodes(cluster.name)
    config = deps.settings.isolation_for(cluster.name)
    if config.slurm_controller:
        states = {s.name: s for s in deps.slurm.nodes(config.slurm_controller)}
        return {n.instance_id: _slurm(n, states) for n in nodes}
    eks = config.eks_cluster or (
        cluster.eks_cluster_name if cluster.orchestrator == Orchestrator.EKS else None
    )
    if not config.isolate or eks is None:
        raise NotJudged(
            f"the pipeline reaches no orchestrator of {cluster.name} (sdc:nodeIsolation or "
            "sdc:slurmControllers): nothing can be judged idle"
        )
    kube = {n.instance_id: n for n in deps.kubernetes.list_nodes(eks) if n.instance_id}
    busy = deps.kubernetes.workload_nodes(eks)
    return {n.instance_id: _eks(n, kube.get(n.instance_id), busy) for n in nodes}


def _hyperpod(node: NodeInfo) -> NodeLook | None:
    if node.status == NodeStatus.RUNNING:
        return None
    return NodeLook(
        node.instance_id, node.instance_group, False, SkipReason.NOT_RUNNING, f"{node.status}"
    )


def _eks(node: NodeInfo, kube: KubeNode | None, busy: set[str]) -> NodeLook:
    not_running = _hyperpod(node)
    if not_running is not None:
        return not_running

    def no(reason: SkipReason, detail: str) -> NodeLook:
        return NodeLook(node.instance_id, node.instance_group, False, reason, detail)

    if kube is None:
        return no(SkipReason.UNKNOWN_TO_ORCHESTRATOR, "no Kubernetes node has its providerID")
    if kube.unschedulable:
        return no(SkipReason.CORDONED, f"{kube.name} is cordoned")
    taints = [t for t in kube.taints if t.get("effect") in KEEPS_OUT]
    if taints:
        return no(SkipReason.CORDONED, f"{kube.name} is tainted {taints[0].get('key')}")
    health = dict(kube.labels).get(NODE_HEALTH_LABEL)
    if health not in (None, SCHEDULABLE):
        return no(SkipReason.NOT_RUNNING, f"{kube.name} is labelled {health}")
    if kube.name in busy:
        return no(SkipReason.BUSY, f"a workload's pod runs on {kube.name}")
    return NodeLook(node.instance_id, node.instance_group, True)


def _slurm(node: NodeInfo, states: dict[str, SlurmNodeState]) -> NodeLook:
    not_running = _hyperpod(node)
    if not_running is not None:
        return not_running

    def no(reason: SkipReason, detail: str) -> NodeLook:
        return NodeLook(node.instance_id, node.instance_group, False, reason, detail)

    host = slurm_node_name(node.hostname) if node.hostname else None
    state = states.get(host) if host else None
    if state is None:
        return no(SkipReason.UNKNOWN_TO_ORCHESTRATOR, f"the controller shows no node {host}")
    seen = f"{state.name} State={state.state}" + (f" Reason={state.reason}" if state.reason else "")
    if state.reason or not state.in_service:
        return no(SkipReason.CORDONED, seen)
    if state.flags & SLURM_RESERVED:
        return no(SkipReason.RESERVED, seen)
    if not state.flags <= SLURM_IDLE_FLAGS or "IDLE" not in state.flags:
        return no(SkipReason.BUSY, seen)
    return NodeLook(node.instance_id, node.instance_group, True)
