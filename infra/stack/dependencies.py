"""Template hygiene: no redundant DependsOn (cfn-lint W3005)."""

from __future__ import annotations

from aws_cdk import CfnResource
from aws_cdk import aws_iam as iam
from constructs import IConstruct


def depend_on_role_policy_only(resource: IConstruct, role: iam.IRole) -> None:
    """Make `resource` (a function or state machine) DependsOn its role's default policy only.

    CDK makes it depend on the role *and* the role's default policy. The role dependency is
    already implied by the `Fn::GetAtt Role.Arn` in its properties (cfn-lint W3005); the policy
    dependency is not, and it matters: e.g. Lambda checks at creation of an EventInvokeConfig
    that the role may send to the failure queue. Call after the last grant to the role."""
    cfn = resource.node.default_child
    policy = role.node.try_find_child("DefaultPolicy")
    if not isinstance(cfn, CfnResource) or policy is None:
        return
    policy_cfn = policy.node.default_child
    assert isinstance(policy_cfn, CfnResource)
    cfn.add_override("DependsOn", [policy_cfn.logical_id])
