"""DynamoDB: the incidents table (incidents, open locks, reports, guard state, storm holds,
history) and the append-only audit table. Layout: docs/pipeline.md, "Storage"."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError

from lambdas.adapters._aws import (
    DynamoTable,
    aws_call,
    error_code,
    from_item,
    pages,
    request_id,
    to_item,
    translate,
)
from lambdas.models.audit import AuditEntry
from lambdas.models.errors import (
    ConditionFailed,
    GuardFull,
    HeldBy,
    HoldExists,
    IncidentExists,
    LockHeld,
)
from lambdas.models.events import SdcReport, parse_report
from lambdas.models.guard import (
    PAST_INCIDENTS_LIMIT,
    ClusterHold,
    GuardState,
    PastIncident,
    check_slot_limit,
)
from lambdas.models.incident import Incident, IncidentState

BY_STATE_INDEX: Final = "by_state"
"""infra/storage.py's index (pk `state`, sk `created_at`); retyped because the Lambda asset
holds `lambdas/` only, not `infra/`."""

META = "META"
LOCK = "LOCK"
GUARD = "GUARD"
HISTORY_TTL_DAYS = 400


def incident_key(incident_id: str) -> dict[str, Any]:
    return {"pk": f"INCIDENT#{incident_id}", "sk": META}


def lock_key(cluster_name: str, instance_id: str) -> dict[str, Any]:
    return {"pk": f"OPEN#{cluster_name}#{instance_id}", "sk": LOCK}


def held_lock_key(cluster_name: str, instance_id: str) -> dict[str, Any]:
    return {"pk": f"HELDFOR#{cluster_name}#{instance_id}", "sk": LOCK}


def report_pk(cluster_name: str, instance_id: str) -> str:
    return f"REPORT#{cluster_name}#{instance_id}"


def guard_key(cluster_name: str) -> dict[str, Any]:
    return {"pk": f"GUARD#{cluster_name}", "sk": GUARD}


def flag_pk(cluster_name: str) -> str:
    return f"FLAG#{cluster_name}"


def hold_key(hold_id: str) -> dict[str, Any]:
    return {"pk": f"HOLD#{hold_id}", "sk": META}


def held_key(cluster_name: str) -> dict[str, Any]:
    return {"pk": f"HELD#{cluster_name}", "sk": LOCK}


def history_pks(past: PastIncident) -> list[str]:
    return [f"HISTORY#INSTANCE#{past.instance_id}"] + [
        f"HISTORY#GPU#{gpu}" for gpu in past.gpu_uuids
    ]


class DynamoIncidentStore(DynamoTable):
    """Implements IncidentStore, ReportStore, GuardStore and HistoryStore on the one incidents
    table."""

    # -- incidents -------------------------------------------------------------------------

    def create(self, incident: Incident, *, slot_limit: int | None = None) -> None:
        check_slot_limit(slot_limit)
        item = to_item({**incident_key(incident.incident_id), **incident.to_record()})
        if not incident.holds_lock and slot_limit is None:
            self._put_new(item)
            return
        writes: list[tuple[str, dict[str, Any]]] = []
        if incident.holds_lock:
            lock = to_item(
                {
                    **lock_key(incident.cluster_name, incident.instance_id),
                    "incident_id": incident.incident_id,
                    "created_at": incident.created_at,
                }
            )
            writes.append(("lock", {"Put": self._new(lock)}))
        writes.append(("incident", {"Put": self._new(item)}))
        if slot_limit is not None:
            writes.append(
                (
                    "slot",
                    {
                        "Update": {
                            "TableName": self.table_name,
                            "Key": to_item(guard_key(incident.cluster_name)),
                            "UpdateExpression": "ADD open_ids :ids",
                            "ConditionExpression": "attribute_not_exists(open_ids) "
                            "OR size(open_ids) < :limit OR contains(open_ids, :id)",
                            "ExpressionAttributeValues": {
                                ":ids": {"SS": [incident.incident_id]},
                                ":id": {"S": incident.incident_id},
                                ":limit": {"N": str(slot_limit)},
                            },
                        }
                    },
                )
            )

        def refused(failed: set[str], kwargs: dict[str, Any]) -> Exception | None:
            if "incident" in failed:
                return IncidentExists(f"incident {incident.incident_id} exists", **kwargs)
            if "lock" in failed:
                holder = self.open_incident_id(incident.cluster_name, incident.instance_id)
                if holder:
                    return LockHeld(holder, **kwargs)
            if "slot" in failed and slot_limit is not None:
                open_ids = list(self.guard_state(incident.cluster_name).open_ids)
                return GuardFull(open_ids, slot_limit, **kwargs)
            return None

        self._transact(writes, refused)

    def create_held(
        self, incident: Incident, *, until: int, now: int, replacing: str | None = None
    ) -> None:
        item = to_item({**incident_key(incident.incident_id), **incident.to_record()})
        if incident.is_job:
            self._put_new(item)  # its instances' held locks are claimed one by one
            return
        held = self._held_lock_put(
            incident.cluster_name, incident.instance_id, incident.incident_id, until, now, replacing
        )

        def refused(failed: set[str], kwargs: dict[str, Any]) -> Exception | None:
            if "incident" in failed:
                return IncidentExists(f"incident {incident.incident_id} exists", **kwargs)
            holder = self.held_incident_id(incident.cluster_name, incident.instance_id, now)
            return HeldBy(holder, **kwargs) if "held" in failed and holder else None

        self._transact([("held", {"Put": held}), ("incident", {"Put": self._new(item)})], refused)

    def _new(self, item: dict[str, Any]) -> dict[str, Any]:
        """A put of an item that must not exist yet."""
        return {
            "TableName": self.table_name,
            "Item": item,
            "ConditionExpression": "attribute_not_exists(pk)",
        }

    def _put_new(self, item: dict[str, Any]) -> None:
        with aws_call("PutItem", {"ConditionalCheckFailedException": IncidentExists}):
            self.client.put_item(**self._new(item))

    def _transact(
        self,
        writes: list[tuple[str, dict[str, Any]]],
        refused: Callable[[set[str], dict[str, Any]], Exception | None],
    ) -> None:
        """TransactWriteItems of the named `writes`; when conditions cancel it, `refused(the
        names whose condition failed, error kwargs)` says what to raise (None: a plain error)."""
        try:
            self.client.transact_write_items(TransactItems=[write for _, write in writes])
        except ClientError as err:
            if error_code(err) != "TransactionCanceledException":
                raise translate(err, "TransactWriteItems") from err
            codes = [r.get("Code") for r in err.response.get("CancellationReasons", [])]
            failed = {
                name
                for (name, _), code in zip(writes, codes, strict=False)
                if code == "ConditionalCheckFailed"
            }
            kwargs: dict[str, Any] = {
                "operation": "TransactWriteItems",
                "code": "ConditionalCheckFailed",
                "request_id": request_id(err.response),
            }
            raise (refused(failed, kwargs) or translate(err, "TransactWriteItems")) from err

    def claim_held(
        self, cluster_name: str, instance_id: str, incident_id: str, *, until: int, now: int
    ) -> str:
        put = self._held_lock_put(cluster_name, instance_id, incident_id, until, now)
        try:
            with aws_call("PutItem"):
                self.client.put_item(**put)
        except ConditionFailed:
            return self.held_incident_id(cluster_name, instance_id, now) or ""
        return incident_id

    def held_incident_id(self, cluster_name: str, instance_id: str, now: int) -> str | None:
        with aws_call("GetItem"):
            response = self.client.get_item(
                TableName=self.table_name,
                Key=to_item(held_lock_key(cluster_name, instance_id)),
                ConsistentRead=True,
            )
        item = from_item(response.get("Item") or {})
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
                    "expires_at": until + 86_400,
                }
            ),
            "ConditionExpression": "attribute_not_exists(pk) OR held_until < :now "
            "OR incident_id IN (:id, :old)",
            "ExpressionAttributeValues": to_item(
                {":now": now, ":id": incident_id, ":old": replacing or incident_id}
            ),
        }

    def claim_lock(self, cluster_name: str, instance_id: str, incident_id: str) -> str:
        lock = to_item({**lock_key(cluster_name, instance_id), "incident_id": incident_id})
        try:
            with aws_call("PutItem"):
                self.client.put_item(
                    TableName=self.table_name,
                    Item=lock,
                    ConditionExpression="attribute_not_exists(pk) OR incident_id = :id",
                    ExpressionAttributeValues=to_item({":id": incident_id}),
                )
        except ConditionFailed:
            return self.open_incident_id(cluster_name, instance_id) or ""
        return incident_id

    def get(self, incident_id: str) -> Incident | None:
        with aws_call("GetItem"):
            response = self.client.get_item(
                TableName=self.table_name,
                Key=to_item(incident_key(incident_id)),
                ConsistentRead=True,
            )
        item = response.get("Item")
        return Incident.from_record(from_item(item)) if item else None

    def in_state(self, state: IncidentState) -> list[Incident]:
        """The incidents in `state`, oldest first, through the `by_state` index (eventually
        consistent, as every GSI: a change made a moment ago may not show yet)."""
        return incidents_in_state(self, state)

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

    # -- guard: slots, storm flags, storm holds ------------------------------------------------

    def guard_state(self, cluster_name: str) -> GuardState:
        with aws_call("GetItem"):
            response = self.client.get_item(
                TableName=self.table_name, Key=to_item(guard_key(cluster_name)), ConsistentRead=True
            )
        item = from_item(response.get("Item") or {})
        reset_at = item.get("storm_reset_at")
        return GuardState(
            open_ids=tuple(sorted(item.get("open_ids") or [])),
            storm_reset_at=int(reset_at) if reset_at is not None else None,
        )

    def release_slot(self, cluster_name: str, incident_id: str) -> None:
        with aws_call("UpdateItem"):
            self.client.update_item(
                TableName=self.table_name,
                Key=to_item(guard_key(cluster_name)),
                UpdateExpression="DELETE open_ids :ids",
                ExpressionAttributeValues={":ids": {"SS": [incident_id]}},
            )

    def flag_instance(self, cluster_name: str, instance_id: str, at: int, expires_at: int) -> None:
        with aws_call("PutItem"):
            self.client.put_item(
                TableName=self.table_name,
                Item=to_item(
                    {
                        "pk": flag_pk(cluster_name),
                        "sk": instance_id,
                        "flagged_at": at,
                        "expires_at": expires_at,
                    }
                ),
            )

    def flagged_instances(self, cluster_name: str, since: int) -> set[str]:
        found: set[str] = set()
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "pk = :pk",
            "FilterExpression": "flagged_at >= :since",
            "ExpressionAttributeValues": to_item({":pk": flag_pk(cluster_name), ":since": since}),
            "ConsistentRead": True,
        }
        while True:
            with aws_call("Query"):
                response = self.client.query(**kwargs)
            found |= {str(from_item(i)["sk"]) for i in response.get("Items", [])}
            if "LastEvaluatedKey" not in response:
                return found
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def create_hold(self, hold: ClusterHold) -> None:
        pointer = to_item({**held_key(hold.cluster_name), "hold_id": hold.hold_id})
        record = to_item({**hold_key(hold.hold_id), **hold.to_record()})

        def refused(failed: set[str], kwargs: dict[str, Any]) -> Exception:
            active = self.active_hold(hold.cluster_name)
            return HoldExists(active.hold_id if active else hold.hold_id, **kwargs)

        self._transact(
            [("pointer", {"Put": self._new(pointer)}), ("hold", {"Put": self._new(record)})],
            refused,
        )

    def active_hold(self, cluster_name: str) -> ClusterHold | None:
        with aws_call("GetItem"):
            response = self.client.get_item(
                TableName=self.table_name, Key=to_item(held_key(cluster_name)), ConsistentRead=True
            )
        item = response.get("Item")
        return self.get_hold(str(from_item(item)["hold_id"])) if item else None

    def get_hold(self, hold_id: str) -> ClusterHold | None:
        with aws_call("GetItem"):
            response = self.client.get_item(
                TableName=self.table_name, Key=to_item(hold_key(hold_id)), ConsistentRead=True
            )
        item = response.get("Item")
        return ClusterHold.from_record(from_item(item)) if item else None

    def save_hold(self, hold: ClusterHold) -> None:
        expected = hold.version
        record = {**hold.to_record(), "version": expected + 1}
        with aws_call("PutItem"):
            self.client.put_item(
                TableName=self.table_name,
                Item=to_item({**hold_key(hold.hold_id), **record}),
                ConditionExpression="attribute_exists(pk) AND version = :expected",
                ExpressionAttributeValues=to_item({":expected": expected}),
            )
        hold.version = expected + 1

    def lift_hold(self, hold: ClusterHold, reset_at: int) -> None:
        expected = hold.version
        record = {**hold.to_record(), "version": expected + 1}
        writes: list[tuple[str, dict[str, Any]]] = [
            (
                "hold",
                {
                    "Put": {
                        "TableName": self.table_name,
                        "Item": to_item({**hold_key(hold.hold_id), **record}),
                        "ConditionExpression": "attribute_exists(pk) AND version = :expected",
                        "ExpressionAttributeValues": to_item({":expected": expected}),
                    }
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
        self._transact(
            writes,
            lambda _, kwargs: ConditionFailed(
                f"storm hold {hold.hold_id} changed meanwhile", **kwargs
            ),
        )
        hold.version = expected + 1

    # -- history ---------------------------------------------------------------------------

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
        return self._history(f"HISTORY#INSTANCE#{instance_id}")

    def past_for_gpu(self, gpu_uuid: str) -> list[PastIncident]:
        return self._history(f"HISTORY#GPU#{gpu_uuid}")

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


class DynamoAuditLog(DynamoTable):
    """Append-only: PutItem with `attribute_not_exists(seq)`, Query and GetItem; never updates."""

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
    from lambdas.logic.ports import AuditLog, GuardStore, HistoryStore, IncidentStore, ReportStore

    _incidents: IncidentStore = DynamoIncidentStore("t")
    _reports: ReportStore = DynamoIncidentStore("t")
    _guard: GuardStore = DynamoIncidentStore("t")
    _history: HistoryStore = DynamoIncidentStore("t")
    _audit: AuditLog = DynamoAuditLog("t")


def incidents_in_state(table: DynamoTable, state: IncidentState) -> list[Incident]:
    """The incidents of `table` in `state`, oldest first (the `by_state` index)."""
    return [
        Incident.from_record(item)
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
