"""AuditLog on the audit table (pk `incident_id`, sk `seq`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sdc_remediation.lambdas.adapters._aws import DynamoTable, aws_call, from_item, pages, to_item
from sdc_remediation.lambdas.models.audit import AuditEntry


class DynamoAuditLog(DynamoTable):
    """Append-only: PutItem with `attribute_not_exists(seq)`, Query and GetItem; never updates.
    `all_chains` scans (the scheduled audit check and `sdc audit verify --all` only)."""

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
        items = pages(
            self.client.query,
            "Query",
            TableName=self.table_name,
            KeyConditionExpression="incident_id = :id",
            ExpressionAttributeValues=to_item({":id": incident_id}),
            ConsistentRead=True,
        )
        return sorted((AuditEntry.from_record(item) for item in items), key=lambda e: e.seq)

    def all_chains(self) -> dict[str, list[AuditEntry]]:
        """Subject → its entries in seq order, subjects sorted. One Scan of the whole table
        (consistent reads), so use it for an audit, not in a loop."""
        chains: dict[str, list[AuditEntry]] = {}
        for item in pages(self.client.scan, "Scan", TableName=self.table_name, ConsistentRead=True):
            entry = AuditEntry.from_record(item)
            chains.setdefault(entry.incident_id, []).append(entry)
        return {subject: sorted(chains[subject], key=lambda e: e.seq) for subject in sorted(chains)}


if TYPE_CHECKING:
    from sdc_remediation.lambdas.logic.ports import AuditLog

    _audit: AuditLog = DynamoAuditLog("t")
