"""IncidentStore on the incidents table: incidents, the open lock of a (cluster, instance), the
held lock of a held incident, the guard slot an incident takes when it is created, and the task
token of its waiting approval.

The task token is an item of its own, `TOKEN#<incident id>` / `TASK` (`keys.task_token_key`),
never an attribute of the incident: whoever holds it can answer the waiting approval with
SendTaskSuccess, past `decide` (no bound approval, no identity, no N-of-M). Approvers may read
incidents (GetItem, infra/stack/approval.py) but not items under `TOKEN#` (a
`dynamodb:LeadingKeys` condition); the item has no `state`, so the `by_state` index never lists
it. The incident keeps only the token's SHA-256 (`Incident.task_token_sha256`), which `decide`
checks the token against.

Items written before the token moved out hold it as a `task_token` attribute of the incident
(`TASK_TOKEN`). They still work once: reading the incident derives its digest from it,
`task_token` falls back to it, and the first save of the incident (which writes the record
without it) moves it to the token item, unless a newer token item exists already.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sdc_remediation.lambdas.adapters._aws import DynamoTable, aws_call, from_item, pages, to_item
from sdc_remediation.lambdas.adapters.dynamodb._table import ItemTable, Write, versioned_put
from sdc_remediation.lambdas.adapters.dynamodb.guard import slots_in, take_slots
from sdc_remediation.lambdas.adapters.dynamodb.keys import (
    BY_STATE_INDEX,
    held_lock_key,
    incident_key,
    lock_key,
    proof_key,
    task_token_key,
)
from sdc_remediation.lambdas.models.errors import ConditionFailed
from sdc_remediation.lambdas.models.guard import check_slot_room
from sdc_remediation.lambdas.models.incident import Incident, IncidentState, task_token_digest
from sdc_remediation.lambdas.models.writes import (
    Claimed,
    ClaimHeldResult,
    ClaimLockResult,
    Created,
    CreateHeldResult,
    CreateResult,
    GuardFull,
    HeldBy,
    IncidentExists,
    LockHeld,
)

HELD_LOCK_TTL_SECONDS = 86_400
"""How long a held lock's item stays after its window (the table's TTL then deletes it)."""

TASK_TOKEN = "task_token"
"""The attribute holding the task token: of the token item, and of a legacy incident item (one
written before the token moved to its own item)."""


class DynamoIncidentStore(ItemTable):
    """Implements IncidentStore. A refused create or claim names the holder from the item that
    refused it, read in the same request."""

    def create(self, incident: Incident, *, slot_limit: int | None = None) -> CreateResult:
        check_slot_room(incident.guard_slots, slot_limit)
        record = self._record(incident)
        if not incident.holds_lock and slot_limit is None:
            written = self.put_if(self.new(record)) is None
            return Created() if written else IncidentExists(incident.incident_id)
        writes: list[Write] = []
        if incident.holds_lock:
            lock = {
                **lock_key(incident.cluster_name, incident.instance_id),
                "incident_id": incident.incident_id,
                "created_at": incident.created_at,
            }
            writes.append(("lock", {"Put": self.new(lock)}))
        writes.append(("incident", {"Put": self.new(record)}))
        if slot_limit is not None:
            slot = take_slots(
                self.table_name, incident.cluster_name, incident.guard_slots, slot_limit
            )
            writes.append(("slot", {"Update": slot}))
        cancelled = self.transact(writes)
        if cancelled is None:
            return Created()
        failed = cancelled.failed
        if "incident" in failed:
            return IncidentExists(incident.incident_id)
        if "lock" in failed:
            return LockHeld(str(failed["lock"]["incident_id"]))
        if "slot" in failed and slot_limit is not None:
            return GuardFull(slots_in(failed["slot"]), slot_limit)
        raise cancelled.error

    def create_held(
        self, incident: Incident, *, until: int, now: int, replacing: str | None = None
    ) -> CreateHeldResult:
        record = self._record(incident)
        if incident.is_job:  # its instances' held locks are claimed one by one
            written = self.put_if(self.new(record)) is None
            return Created() if written else IncidentExists(incident.incident_id)
        held = self._held_lock_put(
            incident.cluster_name, incident.instance_id, incident.incident_id, until, now, replacing
        )
        cancelled = self.transact(
            [("held", {"Put": held}), ("incident", {"Put": self.new(record)})]
        )
        if cancelled is None:
            return Created()
        if "incident" in cancelled.failed:
            return IncidentExists(incident.incident_id)
        if "held" in cancelled.failed:
            return HeldBy(str(cancelled.failed["held"]["incident_id"]))
        raise cancelled.error

    def claim_held(
        self, cluster_name: str, instance_id: str, incident_id: str, *, until: int, now: int
    ) -> ClaimHeldResult:
        refused = self.put_if(
            self._held_lock_put(cluster_name, instance_id, incident_id, until, now)
        )
        return Claimed() if refused is None else HeldBy(str(refused["incident_id"]))

    def held_incident_id(self, cluster_name: str, instance_id: str, now: int) -> str | None:
        item = self.read(held_lock_key(cluster_name, instance_id))
        if not item or int(item["held_until"]) < now:
            return None
        return str(item["incident_id"])

    def _held_lock_put(
        self,
        cluster_name: str,
        instance_id: str,
        incident_id: str,
        until: int,
        now: int,
        replacing: str | None = None,
    ) -> dict[str, Any]:
        """A held lock is free once its window has passed (`held_until` < now); the item itself
        goes with the table's TTL a day later. The holder may take it again (a retry), and an
        incident may take it over from `replacing` (a holder whose hold has ended)."""
        return {
            "TableName": self.table_name,
            "Item": to_item(
                {
                    **held_lock_key(cluster_name, instance_id),
                    "incident_id": incident_id,
                    "held_until": until,
                    "expires_at": until + HELD_LOCK_TTL_SECONDS,
                }
            ),
            "ConditionExpression": "attribute_not_exists(pk) OR held_until < :now "
            "OR incident_id IN (:id, :old)",
            "ExpressionAttributeValues": to_item(
                {":now": now, ":id": incident_id, ":old": replacing or incident_id}
            ),
        }

    def claim_lock(self, cluster_name: str, instance_id: str, incident_id: str) -> ClaimLockResult:
        refused = self.put_if(
            {
                "TableName": self.table_name,
                "Item": to_item(
                    {**lock_key(cluster_name, instance_id), "incident_id": incident_id}
                ),
                "ConditionExpression": "attribute_not_exists(pk) OR incident_id = :id",
                "ExpressionAttributeValues": to_item({":id": incident_id}),
            }
        )
        return Claimed() if refused is None else LockHeld(str(refused["incident_id"]))

    def get(self, incident_id: str) -> Incident | None:
        item = self.read(incident_key(incident_id))
        return incident_of(item) if item else None

    def in_state(self, state: IncidentState) -> list[Incident]:
        """The incidents in `state`, oldest first, through the `by_state` index (eventually
        consistent, as every GSI: a change made a moment ago may not show yet)."""
        return incidents_in_state(self, state)

    def save(self, incident: Incident) -> None:
        """The version-checked put (`put_version`), answering with the item it replaced: a
        legacy task token on it moves to the token item (the module docstring)."""
        expected = incident.version
        put = versioned_put(
            self.table_name, incident_key(incident.incident_id), incident.to_record(), expected
        )
        with aws_call("PutItem"):
            replaced = self.client.put_item(**put, ReturnValues="ALL_OLD").get("Attributes")
        incident.version = expected + 1
        legacy = from_item(replaced or {}).get(TASK_TOKEN)
        if legacy:
            self.put_if(self.new({**task_token_key(incident.incident_id), TASK_TOKEN: legacy}))

    def keep_task_token(self, incident_id: str, task_token: str) -> None:
        with aws_call("PutItem"):
            self.client.put_item(
                TableName=self.table_name,
                Item=to_item({**task_token_key(incident_id), TASK_TOKEN: task_token}),
            )

    def task_token(self, incident_id: str) -> str | None:
        item = self.read(task_token_key(incident_id))
        if item is None:  # a legacy incident item holds its token itself
            item = self.read(incident_key(incident_id))
        token = (item or {}).get(TASK_TOKEN)
        return str(token) if token else None

    def forget_task_token(self, incident_id: str) -> None:
        with aws_call("DeleteItem"):
            self.client.delete_item(
                TableName=self.table_name, Key=to_item(task_token_key(incident_id))
            )

    def open_incident_id(self, cluster_name: str, instance_id: str) -> str | None:
        item = self.read(lock_key(cluster_name, instance_id))
        return str(item["incident_id"]) if item else None

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

    def redeem_proof(
        self, proof_id: str, approval_execution_arn: str, expires_at: int
    ) -> str | None:
        refused = self.put_if(
            {
                "TableName": self.table_name,
                "Item": to_item(
                    {
                        **proof_key(proof_id),
                        "approval_execution_arn": approval_execution_arn,
                        "expires_at": expires_at,
                    }
                ),
                "ConditionExpression": "attribute_not_exists(pk) OR approval_execution_arn = :arn",
                "ExpressionAttributeValues": to_item({":arn": approval_execution_arn}),
            }
        )
        return None if refused is None else str(refused.get("approval_execution_arn"))

    def _record(self, incident: Incident) -> dict[str, Any]:
        return {**incident_key(incident.incident_id), **incident.to_record()}


class DynamoOpenIncidents(DynamoTable):
    """Implements OpenIncidents: every incident in a state that is not final, one query of the
    `by_state` index per state. The dashboard's page reads through it and is granted that
    index alone: a task token's item has no `state`, so the index never holds one."""

    def open_incidents(self) -> list[Incident]:
        return [
            incident
            for state in IncidentState
            if not state.terminal
            for incident in incidents_in_state(self, state)
        ]


def incidents_in_state(table: DynamoTable, state: IncidentState) -> list[Incident]:
    """The incidents of `table` in `state`, oldest first (the `by_state` index)."""
    return [
        incident_of(item)
        for item in pages(
            table.client.query,
            "Query",
            TableName=table.table_name,
            IndexName=BY_STATE_INDEX,
            # `state` is a DynamoDB reserved word.
            KeyConditionExpression="#state = :state",
            # The index holds every item with `state` and `created_at`, not only incidents.
            FilterExpression="begins_with(pk, :incident)",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={
                ":state": {"S": state.value},
                ":incident": {"S": incident_key("")["pk"]},
            },
        )
    ]


def incident_of(item: dict[str, Any]) -> Incident:
    """The incident an item of the table describes. A legacy item's task token is not read
    into it: its digest is (the module docstring)."""
    incident = Incident.from_record(item)
    legacy = item.get(TASK_TOKEN)
    if legacy and not incident.task_token_sha256:
        incident.task_token_sha256 = task_token_digest(str(legacy))
    return incident


if TYPE_CHECKING:
    from sdc_remediation.lambdas.logic.ports import IncidentStore, OpenIncidents

    _incidents: IncidentStore = DynamoIncidentStore("t")
    _open: OpenIncidents = DynamoOpenIncidents("t")
