"""What a command works with: one boto3 session, the deployment its Outputs describe, and the
adapters over them. The session comes from --profile and --region, or from the caller (tests,
and the local run's in-process moto account); --endpoint-url sends every call elsewhere (a moto
server)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any, Final

import boto3
from botocore.config import Config

from sdc_remediation.infra.cli import deployment
from sdc_remediation.infra.cli.approvals import ApprovalExecutions
from sdc_remediation.infra.cli.deployment import Deployment
from sdc_remediation.infra.cli.exits import CliError
from sdc_remediation.infra.cli.queries import DynamoAuditChains, DynamoIncidentQueries
from sdc_remediation.lambdas.adapters.audit_anchor import LogsAuditAnchor
from sdc_remediation.lambdas.adapters.dynamodb.audit import DynamoAuditLog
from sdc_remediation.lambdas.adapters.dynamodb.guard import DynamoGuardStore
from sdc_remediation.lambdas.adapters.dynamodb.incidents import DynamoIncidentStore
from sdc_remediation.lambdas.adapters.queues import QueueDepths
from sdc_remediation.lambdas.adapters.ssm import SsmPauseSwitch
from sdc_remediation.lambdas.models.guard import ClusterHold
from sdc_remediation.lambdas.models.incident import Incident

CLIENT_CONFIG: Final = Config(
    retries={"mode": "standard", "max_attempts": 3}, user_agent_extra="sdc-remediation-cli"
)


def default_session(args: argparse.Namespace) -> boto3.session.Session:
    """The session of --profile and --region."""
    return boto3.session.Session(profile_name=args.profile, region_name=args.region)


class Operator:
    """What a command works with. Clients are built on first use, one per service."""

    def __init__(self, args: argparse.Namespace, session: boto3.session.Session) -> None:
        self.args = args
        self.session = session
        self._clients: dict[str, Any] = {}

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self.session.client(
                service, endpoint_url=self.args.endpoint_url, config=CLIENT_CONFIG
            )
        return self._clients[service]

    def factory(self, service: str) -> Callable[[], Any]:
        return lambda: self.client(service)

    @cached_property
    def deployment(self) -> Deployment:
        if self.args.outputs:
            return deployment.from_file(Path(self.args.outputs), self.args.stack)
        return deployment.from_stack(self.client("cloudformation"), self.args.stack)

    def incidents(self) -> DynamoIncidentStore:
        return DynamoIncidentStore(self.deployment.incidents_table, self.factory("dynamodb"))

    def guard(self) -> DynamoGuardStore:
        return DynamoGuardStore(self.deployment.incidents_table, self.factory("dynamodb"))

    def queries(self) -> DynamoIncidentQueries:
        return DynamoIncidentQueries(self.deployment.incidents_table, self.factory("dynamodb"))

    def audit(self) -> DynamoAuditLog:
        return DynamoAuditLog(self.deployment.audit_table, self.factory("dynamodb"))

    def chains(self) -> DynamoAuditChains:
        return DynamoAuditChains(self.deployment.audit_table, self.factory("dynamodb"))

    def anchor(self) -> LogsAuditAnchor | None:
        """The audit anchor (None: a deployment from before it existed)."""
        name = self.deployment.optional(deployment.AUDIT_ANCHOR)
        return LogsAuditAnchor(name, self.factory("logs")) if name else None

    def sts_signer(self) -> Any:
        """STS on the region's own endpoint, for presigning identity proofs only (presigning
        sends nothing, so --endpoint-url does not apply: the proof must name STS itself)."""
        region = self.session.region_name or "us-east-1"
        return self.session.client(
            "sts", region_name=region, endpoint_url=f"https://sts.{region}.amazonaws.com"
        )

    def approvals(self) -> ApprovalExecutions:
        return ApprovalExecutions(
            self.deployment.approval_state_machine_arn, self.factory("stepfunctions")
        )

    def pause_switch(self) -> SsmPauseSwitch | None:
        name = self.deployment.optional(deployment.PAUSE_PARAMETER)
        return SsmPauseSwitch(name, self.factory("ssm")) if name else None

    def queues(self) -> QueueDepths:
        return QueueDepths(self.factory("sqs"))

    def hold(self, hold_id: str) -> ClusterHold:
        found = self.guard().get_hold(hold_id)
        if found is None:
            raise self._unknown(f"storm hold {hold_id}", "; `sdc holds` lists them")
        return found

    def incident(self, incident_id: str) -> Incident:
        found = self.incidents().get(incident_id)
        if found is None:
            raise self._unknown(f"incident {incident_id}")
        return found

    def _unknown(self, what: str, hint: str = "") -> CliError:
        where = f"{self.deployment.incidents_table} ({self.deployment.source})"
        return CliError(f"unknown {what}: not in table {where}{hint}")
