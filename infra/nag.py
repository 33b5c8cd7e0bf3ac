"""cdk-nag (v3) wiring: the AwsSolutions pack as a CDK policy-validation plugin, and reasoned
acknowledgments. cdk-nag 3 replaced v2's Aspect + NagSuppressions with CDK's own
`Validations.of(...).add_plugins(...)` / `.acknowledge(...)`."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct


def add_checks(app: IConstruct) -> None:
    """Run the AwsSolutions pack on synth; acknowledgments are also written into each resource's
    Metadata (`cdk_nag.rules_to_suppress`), so the template carries its own audit trail."""
    Validations.of(app).add_plugins(
        AwsSolutionsChecks(app, verbose=True, write_suppressions_to_cloud_formation=True)
    )


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge `rule` (e.g. `AwsSolutions-IAM5[Resource::*]`) on `scope` and its children."""
    Validations.of(scope).acknowledge(Acknowledgment(id=rule, reason=reason))
