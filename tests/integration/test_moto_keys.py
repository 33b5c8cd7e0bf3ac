"""`sdc_remediation.infra.local.moto_keys`: moto answers the same with the serializer's keys remembered."""

from __future__ import annotations

from typing import Any

from moto.core.serialize import XFormedAttributePicker

from sdc_remediation.infra.local import moto_keys
from tests.integration.conftest import SESSION, create_incidents_table

ITEM = {
    "pk": {"S": "INCIDENT#i-1"},
    "sk": {"S": "META"},
    "count": {"N": "3"},
    "blob": {"B": b"\x00\x01"},
    "names": {"SS": ["a", "b"]},
    "numbers": {"NS": ["1", "2"]},
    "blobs": {"BS": [b"x", b"y"]},
    "nested": {"M": {"list": {"L": [{"S": "x"}, {"NULL": True}, {"BOOL": False}]}}},
}


def _answers(client: Any) -> list[Any]:
    """A read, a query and a table description, without the per-request metadata."""
    answers = [
        client.get_item(TableName="sdc-incidents", Key={"pk": ITEM["pk"], "sk": ITEM["sk"]}),
        client.query(
            TableName="sdc-incidents",
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": ITEM["pk"]},
        ),
        client.describe_table(TableName="sdc-incidents"),
    ]
    for answer in answers:
        answer.pop("ResponseMetadata")
    return answers


def test_remembered_keys_give_the_answers_moto_works_out_each_time(aws_env, monkeypatch):
    moto_keys.remember_response_keys()
    client = SESSION.client("dynamodb")
    create_incidents_table(client)
    client.put_item(TableName="sdc-incidents", Item=ITEM)

    remembered = [_answers(client) for _ in range(2)]  # the second one from what was remembered
    monkeypatch.setattr(XFormedAttributePicker, "get_possible_keys", moto_keys.work_out_keys)
    worked_out = _answers(client)

    assert remembered[0] == remembered[1] == worked_out
    assert remembered[0][0]["Item"] == ITEM
