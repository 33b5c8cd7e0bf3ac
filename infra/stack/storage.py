"""DynamoDB: the incidents table and the append-only audit table (docs/pipeline.md, Storage)."""

from __future__ import annotations

from typing import Any, Final

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from constructs import Construct

from sdc_remediation.infra.stack.nag import acknowledge_checkov

BY_STATE_INDEX: Final = "by_state"
TTL_ATTRIBUTE: Final = "expires_at"

INCIDENT_ACTIONS: Final = (
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:ConditionCheckItem",
)
"""Item-level work on incidents, locks and reports (the lock item is deleted on close). No Scan."""

AUDIT_ACTIONS: Final = ("dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:Query")
"""Append and read only: no UpdateItem, no DeleteItem, no BatchWriteItem (which can delete)."""


class Storage(Construct):
    """Both tables: pay-per-request, point-in-time recovery, deletion protection, encryption at
    rest with the AWS managed key (`aws/dynamodb`), retained when the stack is deleted."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)

        self.incidents = dynamodb.Table(
            self,
            "IncidentsTable",
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
            time_to_live_attribute=TTL_ATTRIBUTE,
            **_protections(),
        )
        self.incidents.add_global_secondary_index(
            index_name=BY_STATE_INDEX,
            partition_key=dynamodb.Attribute(name="state", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="created_at", type=dynamodb.AttributeType.STRING),
            projection_type=dynamodb.ProjectionType.ALL,
        )
        _stable_id(self.incidents, "IncidentsTable")

        self.audit = dynamodb.Table(
            self,
            "AuditTable",
            partition_key=dynamodb.Attribute(
                name="incident_id", type=dynamodb.AttributeType.STRING
            ),
            sort_key=dynamodb.Attribute(name="seq", type=dynamodb.AttributeType.NUMBER),
            **_protections(),
        )
        _stable_id(self.audit, "AuditTable")

    def grant_incidents(self, grantee: iam.IGrantable) -> None:
        """Item reads and writes on the incidents table and its `by_state` index (named, no `*`)."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid="IncidentsTable",
                actions=list(INCIDENT_ACTIONS),
                resources=[
                    self.incidents.table_arn,
                    f"{self.incidents.table_arn}/index/{BY_STATE_INDEX}",
                ],
            )
        )

    def grant_open_incidents_read(self, grantee: iam.IGrantable) -> None:
        """`Query` on the incidents table's `by_state` index and nothing else: what the
        dashboard's page reads. The index holds items with a `state` only, so never a task
        token's (`TOKEN#`), and no grant here reaches the table's own items."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid="OpenIncidentsByState",
                actions=["dynamodb:Query"],
                resources=[f"{self.incidents.table_arn}/index/{BY_STATE_INDEX}"],
            )
        )

    def grant_audit_append(self, grantee: iam.IGrantable) -> None:
        """Append-only audit log: conditional PutItem plus reads; never UpdateItem/DeleteItem.

        A custom statement rather than `grant_write_data`, which would include both."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid="AuditTableAppendOnly",
                actions=list(AUDIT_ACTIONS),
                resources=[self.audit.table_arn],
            )
        )

    def deny_audit_subjects(self, grantee: iam.IGrantable, prefixes: list[str]) -> None:
        """No PutItem on audit subjects starting with `prefixes` (`event#`, `decision#`): a
        function that never audits such a subject cannot write one. As far as IAM reaches: the
        incidents' own subjects are written by every step, so no key condition separates them."""
        if not prefixes:
            return
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid="AuditSubjectsNotItsOwn",
                effect=iam.Effect.DENY,
                actions=["dynamodb:PutItem"],
                resources=[self.audit.table_arn],
                conditions={
                    "ForAnyValue:StringLike": {
                        "dynamodb:LeadingKeys": [f"{prefix}*" for prefix in prefixes]
                    }
                },
            )
        )

    def grant_audit_scan(self, grantee: iam.IGrantable) -> None:
        """The scheduled audit check reads every chain: one Scan of the audit table."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid="AuditTableScan",
                actions=["dynamodb:Scan"],
                resources=[self.audit.table_arn],
            )
        )


def _protections() -> dict[str, Any]:
    return {
        "billing_mode": dynamodb.BillingMode.PAY_PER_REQUEST,
        "point_in_time_recovery_specification": dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        "deletion_protection": True,
        "encryption": dynamodb.TableEncryption.AWS_MANAGED,
        "removal_policy": RemovalPolicy.RETAIN,
    }


def _stable_id(table: dynamodb.Table, logical_id: str) -> None:
    cfn = table.node.default_child
    assert isinstance(cfn, dynamodb.CfnTable)
    cfn.override_logical_id(logical_id)
    acknowledge_checkov(
        table,
        "CKV_AWS_119",
        "Encrypted at rest with the AWS managed key (TableEncryption.AWS_MANAGED), whose use "
        "CloudTrail records; the tables hold evidence, decisions and task tokens that only the "
        "functions' roles can read. The audit log's integrity comes from its hash chain and "
        "append-only grants, which a customer managed key would not add to.",
    )
