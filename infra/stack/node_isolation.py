"""EKS access entries for node isolation: the roles of the functions that patch nodes
(isolate_node, close_incident, reconcile; with `sdc:recoveryThroughNodeLabel` also replace_node
and reboot_node) may call each configured EKS cluster's Kubernetes API, and the roles of the
functions that only read it (open_incident and store_report check a report's node names,
request_approval reads the node's labels) may read its nodes.

Default (`sdc:nodeIsolationAccess` = `group`): each isolating role is mapped to the Kubernetes
group `sdc-remediation`, which has no rights until the cluster's operator applies the RBAC
manifest of docs/deploy.md (a ClusterRole with get, list and patch on nodes, bound to the group,
and a ValidatingAdmissionPolicy that lets the group change only `spec.unschedulable` and the
`sdc.remediation/incident` taints): least privilege, since EKS's managed access policies that can
patch nodes amount to cluster admin. With `sdc:recoveryThroughNodeLabel`, replace_node and
reboot_node are mapped to `sdc-remediation-recovery` instead, whose policy lets it set HyperPod's
node health label to a pending reboot or replacement and change nothing else: no isolating role
can hand a node to HyperPod's recovery, and no recovering role can cordon or taint.
`clusterAdminPolicy` associates AmazonEKSClusterAdminPolicy instead: no manifest to apply, but
the functions' roles become cluster admins; an explicit opt-in.

The readers are mapped to the group `sdc-remediation-readers` (get and list on nodes, in the same
manifest); with `clusterAdminPolicy` they get AmazonEKSAdminViewPolicy instead, never more: the
functions that take input from training pods never hold a right to patch a node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from aws_cdk import aws_eks as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from sdc_remediation.infra.stack.settings import DeploymentSettings

KUBERNETES_GROUP: Final = "sdc-remediation"
RECOVERY_GROUP: Final = "sdc-remediation-recovery"
READER_GROUP: Final = "sdc-remediation-readers"
CLUSTER_ADMIN_POLICY: Final = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
ADMIN_VIEW_POLICY: Final = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSAdminViewPolicy"


@dataclass(frozen=True)
class NodeIsolationAccessProps:
    eks_clusters: Sequence[str]
    """The EKS clusters of `sdc:nodeIsolation`: an entry in each for every role."""
    roles: Sequence[iam.IRole]
    """The roles of the functions that cordon, taint and release nodes."""
    recoverers: Sequence[iam.IRole] = ()
    """The roles of the functions that set HyperPod's node health label
    (`sdc:recoveryThroughNodeLabel`)."""
    readers: Sequence[iam.IRole] = ()
    """The roles of the functions that only read nodes."""
    cluster_admin: bool = False
    """`sdc:nodeIsolationAccess` = `clusterAdminPolicy`: EKS access policies, no groups."""

    @classmethod
    def from_settings(
        cls,
        settings: DeploymentSettings,
        roles: Sequence[iam.IRole],
        recoverers: Sequence[iam.IRole] = (),
        readers: Sequence[iam.IRole] = (),
    ) -> NodeIsolationAccessProps:
        return cls(
            eks_clusters=settings.eks_clusters,
            roles=roles,
            recoverers=recoverers,
            readers=readers,
            cluster_admin=settings.node_isolation_access == "clusterAdminPolicy",
        )


class NodeIsolationAccess(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, props: NodeIsolationAccessProps
    ) -> None:
        super().__init__(scope, construct_id)
        self.entries: list[eks.CfnAccessEntry] = []
        admin = props.cluster_admin
        kinds = (
            ("Entry", props.roles, KUBERNETES_GROUP, CLUSTER_ADMIN_POLICY),
            ("Recovery", props.recoverers, RECOVERY_GROUP, CLUSTER_ADMIN_POLICY),
            ("Reader", props.readers, READER_GROUP, ADMIN_VIEW_POLICY),
        )
        for cluster in props.eks_clusters:
            for name, principals, group, policy in kinds:
                for index, role in enumerate(principals):
                    entry = eks.CfnAccessEntry(
                        self,
                        f"{_logical(cluster)}{name}{index}",
                        cluster_name=cluster,
                        principal_arn=role.role_arn,
                        type="STANDARD",
                        kubernetes_groups=None if admin else [group],
                        access_policies=_policy(policy) if admin else None,
                    )
                    self.entries.append(entry)


def _policy(arn: str) -> list[eks.CfnAccessEntry.AccessPolicyProperty]:
    return [
        eks.CfnAccessEntry.AccessPolicyProperty(
            policy_arn=arn, access_scope=eks.CfnAccessEntry.AccessScopeProperty(type="cluster")
        )
    ]


def _logical(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.replace("_", "-").split("-"))
