"""DynamoDB tables and the SNS topic: keys as docs/pipeline.md says, protected and encrypted."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match, Template

from sdc_remediation.infra.stack.template import resources_of_type


@pytest.mark.parametrize("table_id", ["IncidentsTable", "AuditTable"])
def test_tables_have_pitr_deletion_protection_encryption_and_on_demand_billing(template, table_id):
    table = template["Resources"][table_id]
    props = table["Properties"]

    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["DeletionProtectionEnabled"] is True
    assert props["SSESpecification"]["SSEEnabled"] is True
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert table["DeletionPolicy"] == "Retain"
    assert table["UpdateReplacePolicy"] == "Retain"


def test_incidents_table_keys_index_and_ttl(template):
    Template.from_json(template).has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            "AttributeDefinitions": Match.array_with(
                [
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                    {"AttributeName": "state", "AttributeType": "S"},
                    {"AttributeName": "created_at", "AttributeType": "S"},
                ]
            ),
            "GlobalSecondaryIndexes": [
                {
                    "IndexName": "by_state",
                    "KeySchema": [
                        {"AttributeName": "state", "KeyType": "HASH"},
                        {"AttributeName": "created_at", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
            "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
        },
    )


def test_audit_table_keys(template):
    props = template["Resources"]["AuditTable"]["Properties"]

    assert props["KeySchema"] == [
        {"AttributeName": "incident_id", "KeyType": "HASH"},
        {"AttributeName": "seq", "KeyType": "RANGE"},
    ]
    assert {"AttributeName": "seq", "AttributeType": "N"} in props["AttributeDefinitions"]
    assert "TimeToLiveSpecification" not in props


def test_topic_is_encrypted_with_a_rotating_key_and_requires_tls(template):
    topic = template["Resources"]["NotificationTopic"]["Properties"]
    key_id = topic["KmsMasterKeyId"]["Fn::GetAtt"][0]
    (policy,) = [
        p
        for p in template["Resources"].values()
        if p["Type"] == "AWS::SNS::TopicPolicy"
        and p["Properties"]["Topics"] == [{"Ref": "NotificationTopic"}]
    ]
    denies = [
        s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"
    ]

    assert template["Resources"][key_id]["Properties"]["EnableKeyRotation"] is True
    assert any(d["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for d in denies)


def test_the_notification_email_is_subscribed_when_configured(template, variant_template):
    subscriptions = [
        s
        for s in resources_of_type(template, "AWS::SNS::Subscription").values()
        if s["Properties"]["TopicArn"] == {"Ref": "NotificationTopic"}
    ]

    assert [s["Properties"]["Endpoint"] for s in subscriptions] == ["oncall@example.com"]
    assert [s["Properties"]["Protocol"] for s in subscriptions] == ["email"]
    assert resources_of_type(variant_template, "AWS::SNS::Subscription") == {}
