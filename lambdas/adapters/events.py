"""EventBridge: the incident lifecycle events (`sdc_remediation.lambdas.models.lifecycle_event`)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sdc_remediation.lambdas.adapters._aws import (
    ClientFactory,
    LazyClient,
    aws_call,
    client_factory,
)
from sdc_remediation.lambdas.models.errors import DependencyFailed
from sdc_remediation.lambdas.models.lifecycle_event import (
    LIFECYCLE_DETAIL_TYPE,
    LIFECYCLE_SOURCE,
    IncidentStateChange,
)


class EventBridgeLifecycleEvents:
    def __init__(self, bus_name: str, factory: ClientFactory | None = None) -> None:
        self.bus_name = bus_name
        self._client = LazyClient(factory or client_factory("events"))

    @property
    def client(self) -> Any:
        return self._client.get()

    def publish(self, change: IncidentStateChange) -> str | None:
        """PutEvents with one entry; an entry EventBridge did not accept (a 200 answer with
        `FailedEntryCount`) is a DependencyFailed naming its error code."""
        with aws_call("PutEvents"):
            response = self.client.put_events(
                Entries=[
                    {
                        "Source": LIFECYCLE_SOURCE,
                        "DetailType": LIFECYCLE_DETAIL_TYPE,
                        "Detail": json.dumps(change.to_detail()),
                        "EventBusName": self.bus_name,
                    }
                ]
            )
        (entry,) = response.get("Entries") or [{}]
        if response.get("FailedEntryCount") or "EventId" not in entry:
            raise DependencyFailed(
                f"PutEvents did not accept the event: {entry.get('ErrorCode')} "
                f"{entry.get('ErrorMessage') or ''}".strip(),
                operation="PutEvents",
                code=entry.get("ErrorCode"),
            )
        return str(entry["EventId"])


if TYPE_CHECKING:
    from sdc_remediation.lambdas.logic.ports import LifecycleEvents

    _port: LifecycleEvents = EventBridgeLifecycleEvents("default")
