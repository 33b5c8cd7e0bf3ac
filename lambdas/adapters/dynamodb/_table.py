"""What the adapters of one DynamoDB table share: consistent single-item reads, conditional
puts and transactions that answer with the item that failed their condition, and the
version-checked put of a record.

A refused conditional write returns the item that refused it (`ReturnValuesOnConditionCheckFailure`
ALL_OLD), read in the same request: the adapter names the holder of a lock or the slots of a
full guard without a second read, and so without a second read's race.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from sdc_remediation.lambdas.adapters._aws import (
    DynamoTable,
    aws_call,
    error_code,
    from_item,
    to_item,
    translate,
)
from sdc_remediation.lambdas.models.errors import AwsError

ALL_OLD = {"ReturnValuesOnConditionCheckFailure": "ALL_OLD"}

Write = tuple[str, dict[str, Any]]
"""A named write of a transaction: ("lock", {"Put": {...}})."""


@dataclass(frozen=True, slots=True)
class Cancelled:
    """A TransactWriteItems that was cancelled: nothing of it was written."""

    failed: dict[str, dict[str, Any]]
    """Each write whose condition failed, by name → the item that failed it (plain values)."""
    error: AwsError
    """The cancellation as a domain error: what to raise when the caller has no answer for it."""


class ItemTable(DynamoTable):
    """Base of the adapters on one table: items in and out as plain Python values."""

    def read(self, key: Mapping[str, Any]) -> dict[str, Any] | None:
        """The item under `key` (a consistent read), or None."""
        with aws_call("GetItem"):
            response = self.client.get_item(
                TableName=self.table_name, Key=to_item(key), ConsistentRead=True
            )
        item = response.get("Item")
        return from_item(item) if item else None

    def new(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """A put of an item (plain values) that must not exist yet."""
        return {
            "TableName": self.table_name,
            "Item": to_item(item),
            "ConditionExpression": "attribute_not_exists(pk)",
        }

    def put_if(self, put: Mapping[str, Any]) -> dict[str, Any] | None:
        """PutItem of a conditional `put`: None once written, else the item whose presence
        failed the condition."""
        with aws_call("PutItem"):
            try:
                self.client.put_item(**put, **ALL_OLD)
            except ClientError as err:
                if error_code(err) != "ConditionalCheckFailedException":
                    raise
                return from_item(err.response.get("Item") or {})
        return None

    def put_version(self, key: Mapping[str, Any], record: Mapping[str, Any], expected: int) -> None:
        """Put `record` under `key` with version `expected + 1`, only if the stored one has
        version `expected`. Raises ConditionFailed otherwise (a stale copy, or no record)."""
        with aws_call("PutItem"):
            self.client.put_item(**versioned_put(self.table_name, key, record, expected))

    def transact(self, writes: Sequence[Write]) -> Cancelled | None:
        """TransactWriteItems of the named `writes`: None once written, else what cancelled
        it. Any other error is raised as its domain error."""
        with_items = [{op: _all_old(body) for op, body in w.items()} for _, w in writes]
        with aws_call("TransactWriteItems"):
            try:
                self.client.transact_write_items(TransactItems=with_items)
            except ClientError as err:
                if error_code(err) != "TransactionCanceledException":
                    raise
                return _cancelled(writes, err)
        return None


def versioned_put(
    table_name: str, key: Mapping[str, Any], record: Mapping[str, Any], expected: int
) -> dict[str, Any]:
    """The put of a record whose stored version must still be `expected` (optimistic locking);
    the record is written with the next version."""
    return {
        "TableName": table_name,
        "Item": to_item({**key, **record, "version": expected + 1}),
        "ConditionExpression": "attribute_exists(pk) AND version = :expected",
        "ExpressionAttributeValues": to_item({":expected": expected}),
    }


def _cancelled(writes: Sequence[Write], err: ClientError) -> Cancelled:
    error = translate(err, "TransactWriteItems")
    error.__cause__ = err
    reasons = err.response.get("CancellationReasons", [])
    failed = {
        name: from_item(reason.get("Item") or {})
        for (name, _), reason in zip(writes, reasons, strict=False)
        if reason.get("Code") == "ConditionalCheckFailed"
    }
    return Cancelled(failed, error)


def _all_old(body: dict[str, Any]) -> dict[str, Any]:
    return {**body, **ALL_OLD} if "ConditionExpression" in body else body
