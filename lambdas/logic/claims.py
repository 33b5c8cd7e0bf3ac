"""What a report claims about nodes, checked against what the reporter cannot forge.

Every training pod holds the training policy, so a report is a claim by a party the pipeline
cannot authenticate. Before anything acts on an instance a report names:

- HyperPod must know it as a node of the report's cluster (`hyperpod_nodes`); what it does not
  know is never flagged for the storm rule, counted, cordoned or health-checked.
- Where node isolation is configured for the cluster (it gives the pipeline the Kubernetes API),
  the node Kubernetes finds by `spec.providerID` is the truth about the node's name: a report
  naming another node for the instance does not match (`kubernetes_mismatches`).

What does not match is kept on the incident (`Incident.unconfirmed`, with why), shown in the
card's own section, and never acted on: a job-level incident leaves it out, a node-level
incident's reports then propose nothing beyond a health check.
"""

from __future__ import annotations

from collections.abc import Sequence

from lambdas.logic._steps import Step
from lambdas.models.errors import KubernetesError, NodeNotFound
from lambdas.models.hyperpod import ClusterInfo, NodeStatus
from lambdas.models.report import SdcReport
from lambdas.models.reporter_text import quoted


def hyperpod_nodes(
    step: Step, cluster_name: str, instance_ids: Sequence[str]
) -> tuple[list[str], dict[str, str]]:
    """Which of the instances HyperPod knows as nodes of the cluster (in the given order), and
    why each other one is not. Raises ClusterNotFound, and what HyperPod raises beyond
    NodeNotFound."""
    nodes: list[str] = []
    unconfirmed: dict[str, str] = {}
    for instance_id in instance_ids:
        try:
            node = step.deps.hyperpod.describe_node(cluster_name, instance_id)
        except NodeNotFound as err:
            unconfirmed[instance_id] = f"not a node of cluster {cluster_name} ({err})"
            continue
        if node.status == NodeStatus.NOT_FOUND:
            unconfirmed[instance_id] = f"not a node of cluster {cluster_name} (status NotFound)"
        else:
            nodes.append(instance_id)
    return nodes, unconfirmed


def kubernetes_mismatches(
    step: Step, cluster: ClusterInfo, report: SdcReport | None, instance_ids: Sequence[str]
) -> dict[str, str]:
    """The instances whose node, as `report` names it, is not the node Kubernetes finds for
    them by providerID (or could not be checked), each with why. Nothing is checked without
    node isolation for the cluster, on a cluster not orchestrated by EKS, or for an instance
    the report names no node for."""
    config = step.deps.settings.isolation_for(cluster.name)
    eks = config.eks_cluster or cluster.eks_cluster_name
    if report is None or not config.isolate or eks is None:
        return {}
    mismatches: dict[str, str] = {}
    for instance_id in instance_ids:
        claimed = sorted(
            {s.node_name for s in report.suspects if s.instance_id == instance_id and s.node_name}
        )
        if not claimed:
            continue
        try:
            node = step.deps.kubernetes.find_node(eks, instance_id)
        except KubernetesError as err:
            mismatches[instance_id] = (
                f"the report's node name {', '.join(quoted(n) for n in claimed)} could not be "
                f"checked against Kubernetes ({type(err).__name__})"
            )
            continue
        if claimed != [node.name]:
            mismatches[instance_id] = (
                f"the report names node {', '.join(quoted(n) for n in claimed)}; Kubernetes "
                f"finds {instance_id} by providerID as node {node.name}"
            )
    return mismatches
