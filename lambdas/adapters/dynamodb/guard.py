"""GuardStore on the incidents table: the cluster's guard item (guard slots, the last storm
reset), storm flags, and storm holds with the pointer to the cluster's active one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sdc_remediation.lambdas.adapters._aws import aws_call, pages, to_item
from sdc_remediation.lambdas.adapters.dynamodb._table import ItemTable, Write, versioned_put
from sdc_remediation.lambdas.adapters.dynamodb.keys import (
    flag_pk,
    guard_key,
    held_key,
    hold_key,
    tally_key,
)
from sdc_remediation.lambdas.models.errors import ConditionFailed
from sdc_remediation.lambdas.models.guard import ClusterHold, GuardState, slots_of
from sdc_remediation.lambdas.models.writes import Created, CreateHoldResult, HoldExists


def take_slots(
    table_name: str, cluster_name: str, slots: Sequence[str], limit: int
) -> dict[str, Any]:
    """The update that gives an incident its `slots` of the cluster's guard (one per node it
    acts on) while at most `limit` are then taken (a retry whose slots are taken already passes):
    a write of the creating transaction."""
    return {
        "TableName": table_name,
        "Key": to_item(guard_key(cluster_name)),
        "UpdateExpression": "ADD open_ids :ids",
        "ConditionExpression": "attribute_not_exists(open_ids) "
        "OR size(open_ids) <= :room OR contains(open_ids, :id)",
        "ExpressionAttributeValues": {
            ":ids": {"SS": list(slots)},
            ":id": {"S": slots[0]},
            ":room": {"N": str(limit - len(slots))},
        },
    }


def slots_in(guard: Mapping[str, Any]) -> tuple[str, ...]:
    """The guard slots taken, from the guard item (plain values)."""
    return tuple(sorted(guard.get("open_ids") or []))


class DynamoGuardStore(ItemTable):
    """Implements GuardStore."""

    def guard_state(self, cluster_name: str) -> GuardState:
        item = self.read(guard_key(cluster_name)) or {}
        reset_at = item.get("storm_reset_at")
        return GuardState(
            slots=slots_in(item),
            storm_reset_at=int(reset_at) if reset_at is not None else None,
        )

    def release_slot(self, cluster_name: str, incident_id: str) -> None:
        """Deletes the incident's slots as read now: a slot another incident adds meanwhile is
        not one of them, and deleting an element already gone is a no-op."""
        mine = slots_of(self.guard_state(cluster_name).slots, incident_id)
        if not mine:
            return
        with aws_call("UpdateItem"):
            self.client.update_item(
                TableName=self.table_name,
                Key=to_item(guard_key(cluster_name)),
                UpdateExpression="DELETE open_ids :ids",
                ExpressionAttributeValues={":ids": {"SS": mine}},
            )

    def flag_instance(
        self, cluster_name: str, instance_id: str, at: int, expires_at: int, *, trusted: bool
    ) -> None:
        """One UpdateItem: `trusted_at` is set by a trusted flag only, so an untrusted flag
        after it leaves it in place."""
        update = "SET flagged_at = :at, expires_at = :expires"
        if trusted:
            update += ", trusted_at = :at"
        with aws_call("UpdateItem"):
            self.client.update_item(
                TableName=self.table_name,
                Key=to_item({"pk": flag_pk(cluster_name), "sk": instance_id}),
                UpdateExpression=update,
                ExpressionAttributeValues=to_item({":at": at, ":expires": expires_at}),
            )

    def flagged_instances(
        self, cluster_name: str, since: int, *, trusted_only: bool = False
    ) -> set[str]:
        attribute = "trusted_at" if trusted_only else "flagged_at"
        flags = pages(
            self.client.query,
            "Query",
            TableName=self.table_name,
            KeyConditionExpression="pk = :pk",
            FilterExpression=f"{attribute} >= :since",
            ExpressionAttributeValues=to_item({":pk": flag_pk(cluster_name), ":since": since}),
            ConsistentRead=True,
        )
        return {str(flag["sk"]) for flag in flags}

    def tally(self, cluster_name: str, counter: str, expires_at: int) -> int:
        """One UpdateItem (ADD is atomic); the TTL attribute lets DynamoDB delete the counter
        once its window is long past."""
        with aws_call("UpdateItem"):
            response = self.client.update_item(
                TableName=self.table_name,
                Key=to_item(tally_key(cluster_name, counter)),
                UpdateExpression="ADD tally :one SET expires_at = :expires",
                ExpressionAttributeValues=to_item({":one": 1, ":expires": expires_at}),
                ReturnValues="UPDATED_NEW",
            )
        return int(response["Attributes"]["tally"]["N"])

    def create_hold(self, hold: ClusterHold) -> CreateHoldResult:
        """Any cancellation is HoldExists, a conflict with a racing create too: the racer's
        hold is the cluster's (or about to be), and this one must not be written."""
        pointer = {**held_key(hold.cluster_name), "hold_id": hold.hold_id}
        record = {**hold_key(hold.hold_id), **hold.to_record()}
        cancelled = self.transact(
            [("pointer", {"Put": self.new(pointer)}), ("hold", {"Put": self.new(record)})]
        )
        if cancelled is None:
            return Created()
        active = cancelled.failed.get("pointer", {}).get("hold_id")
        return HoldExists(str(active) if active else hold.hold_id)

    def active_hold(self, cluster_name: str) -> ClusterHold | None:
        item = self.read(held_key(cluster_name))
        return self.get_hold(str(item["hold_id"])) if item else None

    def get_hold(self, hold_id: str) -> ClusterHold | None:
        item = self.read(hold_key(hold_id))
        return ClusterHold.from_record(item) if item else None

    def save_hold(self, hold: ClusterHold) -> None:
        expected = hold.version
        self.put_version(hold_key(hold.hold_id), hold.to_record(), expected)
        hold.version = expected + 1

    def lift_hold(self, hold: ClusterHold, reset_at: int) -> None:
        expected = hold.version
        writes: list[Write] = [
            (
                "hold",
                {
                    "Put": versioned_put(
                        self.table_name, hold_key(hold.hold_id), hold.to_record(), expected
                    )
                },
            ),
            (
                "pointer",
                {
                    "Delete": {
                        "TableName": self.table_name,
                        "Key": to_item(held_key(hold.cluster_name)),
                        "ConditionExpression": "hold_id = :id",
                        "ExpressionAttributeValues": to_item({":id": hold.hold_id}),
                    }
                },
            ),
            (
                "reset",
                {
                    "Update": {
                        "TableName": self.table_name,
                        "Key": to_item(guard_key(hold.cluster_name)),
                        "UpdateExpression": "SET storm_reset_at = :at",
                        "ExpressionAttributeValues": to_item({":at": reset_at}),
                    }
                },
            ),
        ]
        cancelled = self.transact(writes)
        if cancelled is not None:
            raise ConditionFailed(
                f"storm hold {hold.hold_id} changed meanwhile",
                operation="TransactWriteItems",
                code="ConditionalCheckFailed",
                request_id=cancelled.error.request_id,
            ) from cancelled.error
        hold.version = expected + 1


if TYPE_CHECKING:
    from sdc_remediation.lambdas.logic.ports import GuardStore

    _guard: GuardStore = DynamoGuardStore("t")
