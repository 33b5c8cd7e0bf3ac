"""SNS: approval cards and closing notices."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lambdas.adapters._aws import ClientFactory, LazyClient, aws_call, client_factory, request_id


class SnsNotifier:
    def __init__(self, topic_arn: str, factory: ClientFactory | None = None) -> None:
        self.topic_arn = topic_arn
        self._client = LazyClient(factory or client_factory("sns"))

    @property
    def client(self) -> Any:
        return self._client.get()

    def publish(self, subject: str, message: str, attributes: Mapping[str, str]) -> str | None:
        with aws_call("Publish"):
            response = self.client.publish(
                TopicArn=self.topic_arn,
                Subject=subject,
                Message=message,
                MessageAttributes={
                    key: {"DataType": "String", "StringValue": value}
                    for key, value in attributes.items()
                    if value
                },
            )
        return request_id(response)


if TYPE_CHECKING:
    from lambdas.logic.ports import Notifier

    _port: Notifier = SnsNotifier("arn")
