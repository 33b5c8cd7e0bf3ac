"""DynamoDB: the incidents table (incidents, open locks, reports) and the append-only audit
table. Layout: docs/pipeline.md, "Storage"."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from lambdas.adapters._aws import (
    ClientFactory,
    LazyClient,
    aws_call,
    client_factory,
    error_code,
    from_item,
    request_id,
    to_item,
    translate,
)
from lambdas.models.audit import AuditEntry
from lambdas.models.errors import ConditionFailed, IncidentExists, LockHeld
from lambdas.models.events import SdcReport, parse_report
from lambdas.models.incident import Incident

META = "META"
LOCK = "LOCK"


def incident_key(incident_id: str) -> dict[str, Any]:
    return {"pk": f"INCIDENT#{incident_id}", "sk": META}


def lock_key(cluster_name: str, instance_id: str) -> dict[str, Any]:
    return {"pk": f"OPEN#{cluster_name}#{instance_id}", "sk": LOCK}


def report_pk(cluster_name: str, instance_id: str) -> str:
    return f"REPORT#{cluster_name}#{instance_id}"


class DynamoIncidentStore:
    """Implements both IncidentStore and ReportStore on the one incidents table."""

    def __init__(self, table_name: str, factory: ClientFactory | None = None) -> None:
        self.table_name = table_name
        self._client = LazyClient(factory or client_factory("dynamodb"))

    @property
    def client(self) -> Any:
        return self._client.get()

    # -- incidents -------------------------------------------------------------------------

    def create(self, incident: Incident) -> None:
        item = to_item({**incident_key(incident.incident_id), **incident.to_record()})
        if not incident.holds_lock:
            with aws_call("PutItem", {"ConditionalCheckFailedException": IncidentExists}):
                self.client.put_item(
                    TableName=self.table_name,
                    Item=item,
                    ConditionExpression="attribute_not_exists(pk)",
                )
            return
        lock = to_item(
            {
                **lock_key(incident.cluster_name, incident.instance_id),
                "incident_id": incident.incident_id,
                "created_at": incident.created_at,
            }
        )
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self.table_name,
                            "Item": lock,
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.table_name,
                            "Item": item,
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                ]
            )
        except ClientError as err:
            if error_code(err) != "TransactionCanceledException":
                raise translate(err, "TransactWriteItems") from err
            reasons = [r.get("Code") for r in err.response.get("CancellationReasons", [])]
            rid = request_id(err.response)
            holder = self.open_incident_id(incident.cluster_name, incident.instance_id)
            if len(reasons) > 1 and reasons[1] == "ConditionalCheckFailed":
                raise IncidentExists(
                    f"incident {incident.incident_id} exists",
                    operation="TransactWriteItems",
                    code="ConditionalCheckFailed",
                    request_id=rid,
                ) from err
            if reasons and reasons[0] == "ConditionalCheckFailed" and holder:
                raise LockHeld(
                    holder,
                    operation="TransactWriteItems",
                    code="ConditionalCheckFailed",
                    request_id=rid,
                ) from err
            raise translate(err, "TransactWriteItems") from err

    def get(self, incident_id: str) -> Incident | None:
        with aws_call("GetItem"):
            response = self.client.get_item(
                TableName=self.table_name,
                Key=to_item(incident_key(incident_id)),
                ConsistentRead=True,
            )
        item = response.get("Item")
        return Incident.from_record(from_item(item)) if item else None

    def save(self, incident: Incident) -> None:
        expected = incident.version
        record = {**incident.to_record(), "version": expected + 1}
        with aws_call("PutItem"):
            self.client.put_item(
                TableName=self.table_name,
                Item=to_item({**incident_key(incident.incident_id), **record}),
                ConditionExpression="attribute_exists(pk) AND version = :expected",
                ExpressionAttributeValues=to_item({":expected": expected}),
            )
        incident.version = expected + 1

    def open_incident_id(self, cluster_name: str, instance_id: str) -> str | None:
        with aws_call("GetItem"):
            response = self.client.get_item(
                TableName=self.table_name,
                Key=to_item(lock_key(cluster_name, instance_id)),
                ConsistentRead=True,
            )
        item = response.get("Item")
        return str(from_item(item)["incident_id"]) if item else None

    def release_lock(self, cluster_name: str, instance_id: str, incident_id: str) -> None:
        try:
            with aws_call("DeleteItem"):
                self.client.delete_item(
                    TableName=self.table_name,
                    Key=to_item(lock_key(cluster_name, instance_id)),
                    ConditionExpression="incident_id = :id",
                    ExpressionAttributeValues=to_item({":id": incident_id}),
                )
        except ConditionFailed:
            return  # released already, or held by another incident: not ours to delete

    # -- reports ---------------------------------------------------------------------------

    def put_report(self, report: SdcReport, instance_id: str, expires_at: int) -> bool:
        item = {
            "pk": report_pk(report.cluster_name, instance_id),
            "sk": f"{report.emitted_at}#{report.report_id}",
            "report_id": report.report_id,
            "cluster_name": report.cluster_name,
            "instance_id": instance_id,
            "emitted_at": report.emitted_at,
            "detail": dict(report.detail),
            "expires_at": expires_at,
        }
        try:
            with aws_call("PutItem"):
                self.client.put_item(
                    TableName=self.table_name,
                    Item=to_item(item),
                    ConditionExpression="attribute_not_exists(pk)",
                )
        except ConditionFailed:
            return False
        return True

    def latest_report(self, cluster_name: str, instance_id: str) -> SdcReport | None:
        with aws_call("Query"):
            response = self.client.query(
                TableName=self.table_name,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues=to_item({":pk": report_pk(cluster_name, instance_id)}),
                ScanIndexForward=False,
                Limit=1,
                ConsistentRead=True,
            )
        items = response.get("Items", [])
        return parse_report(from_item(items[0])["detail"]) if items else None


class DynamoAuditLog:
    """Append-only: PutItem with `attribute_not_exists(seq)`, Query and GetItem; never updates."""

    def __init__(self, table_name: str, factory: ClientFactory | None = None) -> None:
        self.table_name = table_name
        self._client = LazyClient(factory or client_factory("dynamodb"))

    @property
    def client(self) -> Any:
        return self._client.get()

    def last(self, incident_id: str) -> AuditEntry | None:
        with aws_call("Query"):
            response = self.client.query(
                TableName=self.table_name,
                KeyConditionExpression="incident_id = :id",
                ExpressionAttributeValues=to_item({":id": incident_id}),
                ScanIndexForward=False,
                Limit=1,
                ConsistentRead=True,
            )
        items = response.get("Items", [])
        return AuditEntry.from_record(from_item(items[0])) if items else None

    def append(self, entry: AuditEntry) -> None:
        with aws_call("PutItem"):
            self.client.put_item(
                TableName=self.table_name,
                Item=to_item(entry.to_record()),
                ConditionExpression="attribute_not_exists(seq)",
            )

    def entries(self, incident_id: str) -> list[AuditEntry]:
        entries: list[AuditEntry] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "incident_id = :id",
            "ExpressionAttributeValues": to_item({":id": incident_id}),
            "ConsistentRead": True,
        }
        while True:
            with aws_call("Query"):
                response = self.client.query(**kwargs)
            entries += [AuditEntry.from_record(from_item(i)) for i in response.get("Items", [])]
            if "LastEvaluatedKey" not in response:
                return sorted(entries, key=lambda e: e.seq)
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]


if TYPE_CHECKING:
    from lambdas.logic.ports import AuditLog, IncidentStore, ReportStore

    _incidents: IncidentStore = DynamoIncidentStore("t")
    _reports: ReportStore = DynamoIncidentStore("t")
    _audit: AuditLog = DynamoAuditLog("t")
