"""SQS, read by the operator: how many messages wait in a dead-letter queue. The functions
never call it (they only send to the queues through EventBridge and Lambda destinations)."""

from __future__ import annotations

from typing import Any

from sdc_remediation.lambdas.adapters._aws import (
    ClientFactory,
    LazyClient,
    aws_call,
    client_factory,
)


class QueueDepths:
    def __init__(self, factory: ClientFactory | None = None) -> None:
        self._client = LazyClient(factory or client_factory("sqs"))

    @property
    def client(self) -> Any:
        return self._client.get()

    def depth(self, queue_url: str) -> int:
        """Messages waiting in the queue: visible plus in flight (being received right now)."""
        with aws_call("GetQueueAttributes"):
            attributes = self.client.get_queue_attributes(
                QueueUrl=queue_url,
                AttributeNames=[
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesNotVisible",
                ],
            )["Attributes"]
        return int(attributes.get("ApproximateNumberOfMessages", 0)) + int(
            attributes.get("ApproximateNumberOfMessagesNotVisible", 0)
        )
