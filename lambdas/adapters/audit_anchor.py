"""AuditAnchor on a CloudWatch Logs group: every stored audit entry's (subject, seq, hash,
action) appended as one JSON log event.

The functions may only CreateLogStream and PutLogEvents on the group: a log event, once
written, cannot be changed by them, nor deleted (no DeleteLogStream, DeleteLogGroup or
retention change is granted). Each adapter writes to a stream of its own (one per function
instance), so concurrent writers never share one.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from sdc_remediation.lambdas.adapters._aws import (
    ClientFactory,
    LazyClient,
    aws_call,
    client_factory,
    error_code,
)
from sdc_remediation.lambdas.models.audit import AnchorRecord, AuditEntry


class LogsAuditAnchor:
    enabled = True

    def __init__(self, log_group: str, factory: ClientFactory | None = None) -> None:
        self.log_group = log_group
        self._client = LazyClient(factory or client_factory("logs"))
        self._stream: str | None = None

    @property
    def client(self) -> Any:
        return self._client.get()

    def anchor(self, entry: AuditEntry) -> None:
        stream = self._own_stream()
        message = json.dumps(AnchorRecord.of(entry).to_record(), sort_keys=True)
        with aws_call("PutLogEvents"):
            self.client.put_log_events(
                logGroupName=self.log_group,
                logStreamName=stream,
                logEvents=[{"timestamp": int(time.time() * 1000), "message": message}],
            )

    def records(self, subject: str | None = None) -> list[AnchorRecord]:
        """Every anchored record (of `subject`): FilterLogEvents over the whole group, narrowed
        by a quoted term on the subject and then matched exactly."""
        kwargs: dict[str, Any] = {"logGroupName": self.log_group}
        if subject is not None:
            kwargs["filterPattern"] = json.dumps(subject)
        found: list[AnchorRecord] = []
        while True:
            with aws_call("FilterLogEvents"):
                response = self.client.filter_log_events(**kwargs)
            for event in response.get("events", []):
                record = _parse(event.get("message", ""))
                if record is not None and (subject is None or record.subject == subject):
                    found.append(record)
            token = response.get("nextToken")
            if not token or token == kwargs.get("nextToken"):
                return found
            kwargs["nextToken"] = token

    def _own_stream(self) -> str:
        if self._stream is None:
            name = f"{datetime.now(UTC):%Y/%m/%d}/{uuid.uuid4().hex}"
            with aws_call("CreateLogStream"):
                try:
                    self.client.create_log_stream(logGroupName=self.log_group, logStreamName=name)
                except ClientError as err:
                    if error_code(err) != "ResourceAlreadyExistsException":
                        raise
            self._stream = name
        return self._stream


def _parse(message: str) -> AnchorRecord | None:
    """A log event of the anchor as a record; None for anything else in the group."""
    try:
        return AnchorRecord.from_record(json.loads(message))
    except (ValueError, KeyError, TypeError):
        return None


if TYPE_CHECKING:
    from sdc_remediation.lambdas.logic.ports import AuditAnchor

    _port: AuditAnchor = LogsAuditAnchor("g")
