"""HistoryStore on the incidents table: closed incidents under their instance id and under
each of their GPU UUIDs."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from sdc_remediation.lambdas.adapters._aws import aws_call, from_item, to_item
from sdc_remediation.lambdas.adapters.dynamodb._table import ItemTable
from sdc_remediation.lambdas.adapters.dynamodb.keys import (
    gpu_history_pk,
    history_pks,
    instance_history_pk,
)
from sdc_remediation.lambdas.models.guard import PAST_INCIDENTS_LIMIT, PastIncident

HISTORY_TTL_DAYS = 400


class DynamoHistoryStore(ItemTable):
    """Implements HistoryStore: one item per key and (closed_at, incident id), newest read
    first."""

    def record_past(self, past: PastIncident) -> None:
        record = past.to_record()
        expires_at = _epoch(past.closed_at) + HISTORY_TTL_DAYS * 86_400
        for pk in history_pks(past):
            with aws_call("PutItem"):
                self.client.put_item(
                    TableName=self.table_name,
                    Item=to_item(
                        {
                            **record,
                            "pk": pk,
                            "sk": f"{past.closed_at}#{past.incident_id}",
                            "expires_at": expires_at,
                        }
                    ),
                )

    def past_for_instance(self, instance_id: str) -> list[PastIncident]:
        return self._history(instance_history_pk(instance_id))

    def past_for_gpu(self, gpu_uuid: str) -> list[PastIncident]:
        return self._history(gpu_history_pk(gpu_uuid))

    def _history(self, pk: str) -> list[PastIncident]:
        with aws_call("Query"):
            response = self.client.query(
                TableName=self.table_name,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues=to_item({":pk": pk}),
                ScanIndexForward=False,
                Limit=PAST_INCIDENTS_LIMIT,
                ConsistentRead=True,
            )
        return [PastIncident.from_record(from_item(i)) for i in response.get("Items", [])]


def _epoch(iso: str) -> int:
    try:
        return int(datetime.fromisoformat(iso).timestamp())
    except ValueError:
        return 0


if TYPE_CHECKING:
    from sdc_remediation.lambdas.logic.ports import HistoryStore

    _history: HistoryStore = DynamoHistoryStore("t")
