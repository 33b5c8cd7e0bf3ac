"""SNS: approval cards and closing notices, each with a message per protocol (plain text for
e-mail, the chat custom notification for `https` subscribers)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sdc_remediation.lambdas.adapters._aws import (
    ClientFactory,
    LazyClient,
    aws_call,
    client_factory,
    request_id,
)
from sdc_remediation.lambdas.models.notices import ChatNotification, sns_message


class SnsNotifier:
    def __init__(self, topic_arn: str, factory: ClientFactory | None = None) -> None:
        self.topic_arn = topic_arn
        self._client = LazyClient(factory or client_factory("sns"))

    @property
    def client(self) -> Any:
        return self._client.get()

    def publish(
        self,
        subject: str,
        message: str,
        attributes: Mapping[str, str],
        chat: ChatNotification | None = None,
    ) -> str | None:
        structured = {"MessageStructure": "json"} if chat is not None else {}
        with aws_call("Publish"):
            response = self.client.publish(
                TopicArn=self.topic_arn,
                Subject=subject,
                Message=sns_message(message, chat) if chat is not None else message,
                **structured,
                MessageAttributes={
                    key: {"DataType": "String", "StringValue": value}
                    for key, value in attributes.items()
                    if value
                },
            )
        return request_id(response)


if TYPE_CHECKING:
    from sdc_remediation.lambdas.logic.ports import Notifier

    _port: Notifier = SnsNotifier("arn")
