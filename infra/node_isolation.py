"""EKS access entries for node isolation: the roles of the functions that cordon and uncordon
nodes (isolate_node, close_incident) may call each configured EKS cluster's Kubernetes API.

Default (`sdc:nodeIsolationAccess` = `group`): each role is mapped to the Kubernetes group
`sdc-remediation`, which has no rights until the cluster's operator applies the RBAC manifest of
docs/deploy.md (a ClusterRole with get, list and patch on nodes, bound to the group): least
privilege, since EKS's managed access policies that can patch nodes amount to cluster admin.
`clusterAdminPolicy` associates AmazonEKSClusterAdminPolicy instead: no manifest to apply, but
the functions' roles become cluster admins; an explicit opt-in.

Roles that only read nodes (`request_approval`, which shows the node's HyperPod labels on the
card) get entries of their own: the group `sdc-remediation-readers` (get and list nodes, in the
same manifest), or with `clusterAdminPolicy` the read-only `AmazonEKSAdminViewPolicy`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from aws_cdk import aws_eks as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.settings import Settings

KUBERNETES_GROUP: Final = "sdc-remediation"
READER_GROUP: Final = "sdc-remediation-readers"
CLUSTER_ADMIN_POLICY: Final = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
ADMIN_VIEW_POLICY: Final = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSAdminViewPolicy"


class NodeIsolationAccess(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        roles: Sequence[iam.IRole],
        readers: Sequence[iam.IRole] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        self.entries: list[eks.CfnAccessEntry] = []
        admin = settings.node_isolation_access == "clusterAdminPolicy"
        for cluster in settings.eks_clusters:
            for index, role in enumerate(roles):
                self.entries.append(
                    self._entry(
                        f"{_logical(cluster)}Entry{index}",
                        cluster,
                        role,
                        CLUSTER_ADMIN_POLICY if admin else None,
                        KUBERNETES_GROUP,
                    )
                )
            for index, role in enumerate(readers):
                self.entries.append(
                    self._entry(
                        f"{_logical(cluster)}Reader{index}",
                        cluster,
                        role,
                        ADMIN_VIEW_POLICY if admin else None,
                        READER_GROUP,
                    )
                )

    def _entry(
        self, logical_id: str, cluster: str, role: iam.IRole, policy: str | None, group: str
    ) -> eks.CfnAccessEntry:
        """An access entry: the managed `policy` (cluster scope) if given, else `group`."""
        return eks.CfnAccessEntry(
            self,
            logical_id,
            cluster_name=cluster,
            principal_arn=role.role_arn,
            type="STANDARD",
            kubernetes_groups=None if policy else [group],
            access_policies=(
                [
                    eks.CfnAccessEntry.AccessPolicyProperty(
                        policy_arn=policy,
                        access_scope=eks.CfnAccessEntry.AccessScopeProperty(type="cluster"),
                    )
                ]
                if policy
                else None
            ),
        )


def _logical(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.replace("_", "-").split("-"))
