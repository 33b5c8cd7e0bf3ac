"""How the grant check evaluates a role's statements for one call (infra/local/grants.py): the
parts a wrong answer would hide, a conditional Deny and a call mapped to its resource."""

from __future__ import annotations

from sdc_remediation.infra.local.grants import Call, Need, Statement, allowed, required

AUDIT = "arn:aws:dynamodb:us-west-2:123456789012:table/AuditTable"
PUT = "dynamodb:PutItem"


def put_subject(subject: str) -> Need:
    return Need(PUT, AUDIT, (("dynamodb:LeadingKeys", (subject,)),))


ALLOW = Statement("Allow", (PUT,), (AUDIT,), False)
DENY_EVENTS = Statement(
    "Deny",
    (PUT,),
    (AUDIT,),
    True,
    {"ForAnyValue:StringLike": {"dynamodb:LeadingKeys": ["event#*"]}},
)


def test_a_deny_on_other_subjects_lets_an_incident_subject_through():
    assert allowed([ALLOW, DENY_EVENTS], put_subject("sdc-ml-cluster-1-i-0abc")) is True


def test_a_deny_on_other_subjects_stops_a_write_to_one_of_them():
    assert allowed([ALLOW, DENY_EVENTS], put_subject("event#1234")) is False


def test_a_condition_the_check_cannot_evaluate_counts_against_the_call():
    odd = Statement("Allow", (PUT,), (AUDIT,), True, {"DateLessThan": {"aws:CurrentTime": "x"}})

    assert allowed([odd], put_subject("sdc-1")) is False


ALLOW_BUT_EVENTS = Statement(
    "Allow",
    (PUT,),
    (AUDIT,),
    True,
    {"ForAllValues:StringNotLike": {"dynamodb:LeadingKeys": ["event#*"]}},
)


def test_an_allow_outside_some_keys_lets_a_key_outside_them_through():
    assert allowed([ALLOW_BUT_EVENTS], put_subject("sdc-ml-cluster-1-i-0abc")) is True


def test_an_allow_outside_some_keys_does_not_allow_one_of_them():
    assert allowed([ALLOW_BUT_EVENTS], put_subject("event#1234")) is False


def test_a_negated_string_condition_on_a_single_value_holds_only_when_none_matches():
    only_other = Statement(
        "Allow", (PUT,), (AUDIT,), True, {"StringNotEquals": {"dynamodb:LeadingKeys": "sdc-1"}}
    )

    assert (
        allowed([only_other], put_subject("sdc-1")),
        allowed([only_other], put_subject("sdc-2")),
    ) == (
        False,
        True,
    )


def test_a_put_names_the_item_s_partition_key_as_the_leading_key():
    call = Call(
        "close_incident",
        "dynamodb",
        "PutItem",
        {"TableName": "AuditTable", "Item": {"incident_id": {"S": "sdc-1"}, "seq": {"N": "3"}}},
    )

    (need,) = required(call, {}, {"AuditTable": "incident_id"})

    assert need == put_subject("sdc-1")


def test_a_log_event_is_checked_against_its_stream_and_the_group_as_iam_names_it():
    group = {"logGroupName": "anchor"}
    put = Call("decide", "logs", "PutLogEvents", {**group, "logStreamName": "s1"})
    create = Call("decide", "logs", "CreateLogStream", {**group, "logStreamName": "s1"})

    (on_stream,) = required(put, {})
    (on_group,) = required(create, {})

    assert on_stream.resource.endswith(":log-group:anchor:log-stream:s1")
    assert on_group.resource.endswith(":log-group:anchor:*")
