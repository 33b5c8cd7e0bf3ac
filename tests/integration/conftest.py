"""Handlers and adapters on moto: the tables, topic and state machines of docs/pipeline.md,
with HyperPod played by the project's fake, wired in through `sdc_remediation.lambdas.handlers._deps`."""

from __future__ import annotations

import json
import os

os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "SDCRemediationTest")

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from moto import mock_aws

from sdc_remediation.infra.local.fake_hyperpod import FakeHyperPod
from sdc_remediation.infra.local.lambda_context import LocalContext
from sdc_remediation.lambdas.adapters.dynamodb.audit import DynamoAuditLog
from sdc_remediation.lambdas.adapters.dynamodb.guard import DynamoGuardStore
from sdc_remediation.lambdas.adapters.dynamodb.incidents import DynamoIncidentStore
from sdc_remediation.lambdas.handlers import _deps
from sdc_remediation.lambdas.models.audit import AuditEntry
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.settings import Settings
from tests.unit.world import EKS

REGION = "us-west-2"
CLUSTER = "ml-cluster-1"
INSTANCE = "i-0abc1234def567890"
GROUP = "gpu-workers"
INCIDENTS_TABLE = "sdc-incidents"
AUDIT_TABLE = "sdc-audit"
ROLE = "arn:aws:iam::123456789012:role/sdc-states"
# One session for the whole suite: clients share its loaded service models (a fresh session per
# client costs ~0.1 s). moto is imported above, so its hook is in the session's handlers.
SESSION = boto3.session.Session(region_name=REGION)
TRIVIAL_DEFINITION = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}})


def create_incidents_table(client: Any, name: str = INCIDENTS_TABLE) -> None:
    client.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
            {"AttributeName": "state", "AttributeType": "S"},
            {"AttributeName": "created_at", "AttributeType": "S"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by_state",
                "KeySchema": [
                    {"AttributeName": "state", "KeyType": "HASH"},
                    {"AttributeName": "created_at", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    )
    client.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"}
    )


def create_audit_table(client: Any, name: str = AUDIT_TABLE) -> None:
    client.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[
            {"AttributeName": "incident_id", "KeyType": "HASH"},
            {"AttributeName": "seq", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "incident_id", "AttributeType": "S"},
            {"AttributeName": "seq", "AttributeType": "N"},
        ],
    )


@dataclass
class Aws:
    """The moto account: clients, the fake HyperPod, and readers for what the handlers left."""

    settings: Settings
    hyperpod: FakeHyperPod
    queue_url: str
    dynamodb: Any = field(default_factory=lambda: SESSION.client("dynamodb"))
    sfn: Any = field(default_factory=lambda: SESSION.client("stepfunctions"))
    sqs: Any = field(default_factory=lambda: SESSION.client("sqs"))
    _messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def incidents(self) -> DynamoIncidentStore:
        return DynamoIncidentStore(INCIDENTS_TABLE, lambda: self.dynamodb)

    @property
    def guard(self) -> DynamoGuardStore:
        return DynamoGuardStore(INCIDENTS_TABLE, lambda: self.dynamodb)

    def incident(self, incident_id: str) -> Incident:
        found = self.incidents.get(incident_id)
        assert found is not None, f"no incident {incident_id} in {INCIDENTS_TABLE}"
        return found

    def audit(self, subject: str) -> list[AuditEntry]:
        return DynamoAuditLog(AUDIT_TABLE, lambda: self.dynamodb).entries(subject)

    def actions(self, subject: str) -> list[str]:
        return [e.action for e in self.audit(subject)]

    def messages(self) -> list[dict[str, Any]]:
        """Every SNS notification so far (Subject, Message, MessageAttributes)."""
        while True:
            got = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10)
            batch = got.get("Messages", [])
            if not batch:
                return list(self._messages)
            for message in batch:
                self._messages.append(json.loads(message["Body"]))
                self.sqs.delete_message(
                    QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )

    def executions(self) -> list[dict[str, Any]]:
        arn = self.settings.state_machine_arn
        return self.sfn.list_executions(stateMachineArn=arn)["executions"]

    def items(self, pk_prefix: str) -> list[dict[str, Any]]:
        scanned = self.dynamodb.scan(TableName=INCIDENTS_TABLE)["Items"]
        return [i for i in scanned if i["pk"]["S"].startswith(pk_prefix)]


def invoke(module: Any, event: dict[str, Any]) -> Any:
    """Run a handler in-process the way Lambda would."""
    return module.handler(event, LocalContext(function_name=module.__name__.rsplit(".", 1)[-1]))


FAKE_CREDENTIALS = {
    "AWS_DEFAULT_REGION": REGION,
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}


@pytest.fixture(scope="module")
def eks_account() -> Iterator[None]:
    """One moto account for a module whose EKS cluster (`tests.unit.world.EKS`) and STS are only
    read: the Kubernetes modules share it across their tests."""
    with pytest.MonkeyPatch.context() as monkeypatch, mock_aws():
        for key, value in FAKE_CREDENTIALS.items():
            monkeypatch.setenv(key, value)
        SESSION.client("eks").create_cluster(
            name=EKS,
            roleArn="arn:aws:iam::123456789012:role/eks",
            resourcesVpcConfig={"subnetIds": ["subnet-0abc"]},
        )
        yield


@pytest.fixture
def fake_aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials no real account accepts, and the tests' region, in the environment: what
    boto3 finds in a process that builds its own clients (the emitter's)."""
    for key, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)


@pytest.fixture
def aws_env(fake_aws_credentials: None) -> Iterator[None]:
    """An empty moto account (for adapter tests that create what they need)."""
    with mock_aws():
        yield


@contextmanager
def moto_account() -> Iterator[Aws]:
    """A moto account with the pipeline's tables, topic (plus an SQS inbox subscribed to it)
    and state machines, the function environment set, and the handlers' deps injected: the
    boto3 adapters on moto with HyperPod played by the fake."""
    with pytest.MonkeyPatch.context() as monkeypatch, mock_aws():
        for key, value in FAKE_CREDENTIALS.items():
            monkeypatch.setenv(key, value)
        dynamodb = SESSION.client("dynamodb")
        create_incidents_table(dynamodb)
        create_audit_table(dynamodb)
        sns = SESSION.client("sns")
        sqs = SESSION.client("sqs")
        topic_arn = sns.create_topic(Name="sdc-notifications")["TopicArn"]
        queue_url = sqs.create_queue(QueueName="sdc-inbox")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=queue_arn)
        sfn = SESSION.client("stepfunctions")
        remediation = sfn.create_state_machine(
            name="sdc-remediation", definition=TRIVIAL_DEFINITION, roleArn=ROLE
        )["stateMachineArn"]
        approval = sfn.create_state_machine(
            name="sdc-approval", definition=TRIVIAL_DEFINITION, roleArn=ROLE
        )["stateMachineArn"]
        for key, value in {
            "INCIDENTS_TABLE": INCIDENTS_TABLE,
            "AUDIT_TABLE": AUDIT_TABLE,
            "TOPIC_ARN": topic_arn,
            "STATE_MACHINE_ARN": remediation,
            "APPROVAL_STATE_MACHINE_ARN": approval,
            "ALLOWED_CLUSTERS": CLUSTER,
            "DRY_RUN": "false",
        }.items():
            monkeypatch.setenv(key, value)

        settings = Settings.from_env()
        hyperpod = FakeHyperPod(health_check_polls=2, replacement_polls=2)
        hyperpod.add_cluster(CLUSTER, instance_groups=[GROUP])
        hyperpod.add_node(CLUSTER, GROUP, INSTANCE)
        _deps.set_deps(_deps.build_deps(settings, session=SESSION, hyperpod=hyperpod))
        try:
            yield Aws(
                settings=settings,
                hyperpod=hyperpod,
                queue_url=queue_url,
                dynamodb=dynamodb,
                sqs=sqs,
                sfn=sfn,
            )
        finally:
            _deps.reset()


@pytest.fixture
def aws() -> Iterator[Aws]:
    with moto_account() as account:
        yield account


@pytest.fixture(scope="session")
def prometheus() -> Iterator[Any]:
    """Debian's real Prometheus on 127.0.0.1 with tests/integration/prometheus_server.py's series
    backfilled. Not installed: every test that needs it errors, naming what to install
    (`make test` installs it)."""
    from sdc_remediation.infra.local.prometheus import real_prometheus
    from tests.integration.prometheus_server import Dataset, PrometheusWorld

    data = Dataset.build()
    with real_prometheus(data.series) as server:
        yield PrometheusWorld(server, data)


SLURM_NODES = ("ip-10-1-69-242", "ip-10-1-69-243", "ip-10-1-69-244")
"""The host names of the local controller's nodes (HyperPod's Slurm nodes are named after their
private address)."""


@pytest.fixture(scope="module")
def slurm() -> Iterator[Any]:
    """Debian's real slurmctld (with munged) on 127.0.0.1, `SLURM_NODES` defined. Not installed
    or not starting: every test that needs it errors with the reason (`make test` installs it)."""
    from sdc_remediation.infra.local.slurm import real_slurm

    with real_slurm(SLURM_NODES) as controller:
        yield controller
