"""Who carries out an approved reboot or replacement: this pipeline through the HyperPod API
(the default), or HyperPod itself, handed the node through its node health label.

On HyperPod EKS clusters whose NodeRecovery is `Automatic`, setting the node's
`sagemaker.amazonaws.com/node-health-status` label to `UnschedulablePendingReboot` or
`UnschedulablePendingReplacement` makes HyperPod reboot or replace it within minutes, through its
own recovery. A cluster opts in per cluster (`sdc:recoveryThroughNodeLabel`); the label is used
only when the cluster's NodeRecovery is Automatic (otherwise HyperPod ignores it) and the node's
Kubernetes name is known (isolation found it). Anything else goes through the API, and the audit
says which path acted and why.
"""

from __future__ import annotations

from dataclasses import dataclass

from sdc_remediation.lambdas.logic.core.steps import Step, error_details
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.errors import KubernetesError
from sdc_remediation.lambdas.models.hyperpod import NodeRecovery
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.kubernetes import NODE_HEALTH_LABEL
from sdc_remediation.lambdas.models.settings import RECOVERY_API, RECOVERY_NODE_LABEL


@dataclass(frozen=True, slots=True)
class Route:
    path: str
    """RECOVERY_API or RECOVERY_NODE_LABEL (what `sdc:recoveryThroughNodeLabel` chooses)."""
    reason: str
    eks_cluster: str | None = None
    node_name: str | None = None


def route(step: Step, incident: Incident) -> Route:
    """The path this incident's recovery takes, and why."""
    config = step.deps.settings.isolation_for(incident.cluster_name)
    if config.recovery != RECOVERY_NODE_LABEL:
        return Route(RECOVERY_API, "the cluster's recovery goes through the HyperPod API")
    if incident.node_recovery != NodeRecovery.AUTOMATIC:
        return Route(
            RECOVERY_API,
            f"NodeRecovery is {incident.node_recovery or 'unknown'}, not Automatic: HyperPod "
            "acts on its node health label only with Automatic",
        )
    isolation = incident.isolation
    node = isolation.node(incident.instance_id) if isolation else None
    eks = isolation.eks_cluster if isolation else None
    name = node.node_name if node else None
    if not eks or not name:
        return Route(RECOVERY_API, "the node's Kubernetes name is unknown (it was not isolated)")
    return Route(
        RECOVERY_NODE_LABEL,
        "handed to HyperPod's own recovery through its node health label",
        eks,
        name,
    )


def hand_over(step: Step, incident: Incident, chosen: Route, value: str) -> Route:
    """Set the node health label to `value`; if the Kubernetes API refuses, say so in the audit
    log and fall back to the API path (the decision is carried out either way)."""
    assert chosen.eks_cluster and chosen.node_name
    try:
        step.deps.kubernetes.label(chosen.eks_cluster, chosen.node_name, NODE_HEALTH_LABEL, value)
    except KubernetesError as err:
        step.audit(
            incident.incident_id,
            AuditAction.NODE_LABEL_FAILED,
            error_details(err, label=f"{NODE_HEALTH_LABEL}={value}", node_name=chosen.node_name),
        )
        return Route(
            RECOVERY_API, f"the node health label could not be set ({err}): through the API"
        )
    return chosen


def details(chosen: Route, value: str | None = None) -> dict[str, str]:
    """What the audit entry of the request records about its path."""
    record = {"path": chosen.path, "path_reason": chosen.reason}
    if chosen.path == RECOVERY_NODE_LABEL and value is not None:
        record |= {"label": f"{NODE_HEALTH_LABEL}={value}", "node_name": str(chosen.node_name)}
    return record
