"""cdk-nag (v3) wiring: the AwsSolutions pack as a CDK policy-validation plugin, and reasoned
acknowledgments. cdk-nag 3 replaced v2's Aspect + NagSuppressions with CDK's own
`Validations.of(...).add_plugins(...)` / `.acknowledge(...)`."""

from __future__ import annotations

import jsii
from aws_cdk import (
    Acknowledgment,
    CfnResource,
    IPolicyValidationContext,
    IPolicyValidationPlugin,
    PolicyValidationPluginReport,
    Stage,
    Validations,
)
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct


@jsii.implements(IPolicyValidationPlugin)
class ConstructChecks:
    """The AwsSolutions pack as a validation plugin that walks one construct's tree. cdk-nag 3's
    own plugin walks the whole app it is registered on; in a team's own app the other stacks
    are theirs to check, so the pipeline's construct registers this one."""

    def __init__(self, scope: IConstruct) -> None:
        self._scope = scope
        self._pack = AwsSolutionsChecks(
            scope, verbose=True, write_suppressions_to_cloud_formation=True
        )

    @property
    def name(self) -> str:
        return self._pack.name

    @property
    def rule_ids(self) -> list[str] | None:
        return self._pack.rule_ids

    @property
    def version(self) -> str | None:
        return self._pack.version

    def validate(self, context: IPolicyValidationContext) -> PolicyValidationPluginReport:
        return self._pack.validate_scope(self._scope)


def check_construct(scope: IConstruct) -> None:
    """Run the AwsSolutions pack on `scope`'s tree at synth (the plugin is registered on its
    Stage, the only place CDK takes plugins); acknowledgments are also written into each
    resource's Metadata (`cdk_nag.rules_to_suppress`), so the template carries its own audit
    trail."""
    Validations.of(Stage.of(scope) or scope).add_plugins(ConstructChecks(scope))


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge `rule` (e.g. `AwsSolutions-IAM5[Resource::*]`) on `scope` and its children."""
    Validations.of(scope).acknowledge(Acknowledgment(id=rule, reason=reason))


# -- the outside validators of `make lint` (infra/stack/validate.py) ------------------------------------

VALIDATORS_METADATA = "sdc_validators"
"""Template metadata key under which the acknowledgements of validators that have no in-template
convention of their own are written (parliament's, under `PARLIAMENT_KEY`)."""
PARLIAMENT_KEY = "parliament"


def _cfn(scope: IConstruct) -> CfnResource:
    resource = scope if isinstance(scope, CfnResource) else scope.node.default_child
    if not isinstance(resource, CfnResource):
        raise TypeError(f"{scope.node.path} has no CloudFormation resource to annotate")
    return resource


def acknowledge_checkov(scope: IConstruct, check_id: str, reason: str) -> None:
    """Skip checkov's `check_id` on `scope`'s resource, with `reason` (checkov's own convention:
    `Metadata.checkov.skip[{id, comment}]`; checkov then reports the check as skipped)."""
    resource = _cfn(scope)
    metadata = resource.get_metadata("checkov") or {"skip": []}
    metadata["skip"] = [*metadata["skip"], {"id": check_id, "comment": reason}]
    resource.add_metadata("checkov", metadata)


def acknowledge_iam_lint(scope: IConstruct, issue: str, actions: list[str], reason: str) -> None:
    """Acknowledge the IAM linter's `issue` (e.g. `RESOURCE_MISMATCH`) on the policy `scope`,
    for `actions` only (IAM wildcards: `kms:*`): the same issue about any other action is still
    a finding."""
    resource = _cfn(scope)
    metadata = resource.get_metadata(VALIDATORS_METADATA) or {}
    ack = {"issue": issue, "actions": sorted(actions), "reason": reason}
    acks = [*metadata.get(PARLIAMENT_KEY, []), ack]
    resource.add_metadata(VALIDATORS_METADATA, {**metadata, PARLIAMENT_KEY: acks})


SQS_MANAGED_ENCRYPTION = (
    "A false positive: the queue is encrypted at rest with SQS managed keys (SSE-SQS, "
    "SqsManagedSseEnabled), which this check does not read; it only recognises a KMS key. The "
    "queues hold failed events, no secret, and SSE-SQS costs nothing to keep."
)
"""checkov CKV_AWS_27 on the two dead-letter queues."""
