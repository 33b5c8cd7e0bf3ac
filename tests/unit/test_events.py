from __future__ import annotations

import copy
from datetime import UTC, datetime

import jsonschema
import pytest

from sdc_remediation.lambdas.models.errors import MalformedEvent
from sdc_remediation.lambdas.models.events import parse_contributor_event
from sdc_remediation.lambdas.models.report import parse_report_event
from tests.conftest import load_fixture
from trainer_emitter.contract import (
    MAX_CHECKPOINT_LOCATION,
    MAX_REPORT_CHECKPOINTS,
    Check,
    Metric,
    Role,
    report_schema,
)


def contributor(**changes):
    event = copy.deepcopy(load_fixture("events", "contributor_alarm"))
    event.update(changes)
    return event


def report_event():
    return copy.deepcopy(load_fixture("events", "sdc_report"))


# -- contributor events -----------------------------------------------------------------------


def test_documented_contributor_event_parses_into_its_instance_and_metric():
    alarm = parse_contributor_event(load_fixture("events", "contributor_alarm"))

    assert alarm.cluster_name == "ml-cluster-1"
    assert alarm.instance_id == "i-0abc1234def567890"
    assert alarm.metric is Metric.REPLAY_MISMATCH
    assert alarm.is_alarm
    assert alarm.event_id == "3f1c2a9e-7b41-4d0c-9a55-0c8e2f6b1d20"
    assert alarm.state_at == datetime(2026, 11, 30, 8, 15, 4, 512000, tzinfo=UTC)


def test_ok_contributor_event_parses_as_not_alarming():
    alarm = parse_contributor_event(load_fixture("events", "contributor_ok"))

    assert alarm.state == "OK"
    assert not alarm.is_alarm


def test_alarm_level_event_is_refused_for_having_no_contributor():
    event = load_fixture("events", "alarm_level_metrics_insights")

    with pytest.raises(MalformedEvent) as err:
        parse_contributor_event(event)

    assert err.value.field == "detail-type"


def test_contributor_event_without_instance_id_names_the_missing_field():
    event = contributor()
    del event["detail"]["alarmContributor"]["attributes"]["InstanceId"]

    with pytest.raises(MalformedEvent) as err:
        parse_contributor_event(event)

    assert err.value.field == "detail.alarmContributor.attributes.InstanceId"
    assert err.value.reason == "missing"


def test_contributor_event_with_a_node_name_as_instance_id_is_refused():
    event = contributor()
    event["detail"]["alarmContributor"]["attributes"]["InstanceId"] = "ip-10-1-2-3"

    with pytest.raises(MalformedEvent) as err:
        parse_contributor_event(event)

    assert err.value.field == "detail.alarmContributor.attributes.InstanceId"


def test_contributor_event_without_contributor_names_it():
    event = contributor()
    del event["detail"]["alarmContributor"]

    with pytest.raises(MalformedEvent) as err:
        parse_contributor_event(event)

    assert err.value.field == "detail.alarmContributor"


def test_unknown_alarm_state_is_refused():
    event = contributor()
    event["detail"]["state"]["value"] = "FIRING"

    with pytest.raises(MalformedEvent) as err:
        parse_contributor_event(event)

    assert err.value.field == "detail.state.value"


def test_bad_state_timestamp_is_refused():
    event = contributor()
    event["detail"]["state"]["timestamp"] = "yesterday"

    with pytest.raises(MalformedEvent) as err:
        parse_contributor_event(event)

    assert err.value.field == "detail.state.timestamp"


def test_metric_comes_from_the_query_when_the_alarm_has_a_custom_name():
    event = contributor()
    event["detail"]["alarmName"] = "team-a-gpu-corruption"

    assert parse_contributor_event(event).metric is Metric.REPLAY_MISMATCH


def test_alarm_that_is_not_an_sdc_alarm_is_refused():
    event = contributor()
    event["detail"]["alarmName"] = "cpu-high"
    event["detail"]["configuration"]["metrics"][0]["expression"] = "SELECT MAX(cpu) FROM x"

    with pytest.raises(MalformedEvent) as err:
        parse_contributor_event(event)

    assert err.value.field == "detail.alarmName"


def test_event_that_is_not_an_object_is_refused():
    with pytest.raises(MalformedEvent) as err:
        parse_contributor_event(["not", "an", "event"])

    assert err.value.field == "event"


# -- SDC reports ------------------------------------------------------------------------------


def test_report_fixture_is_valid_against_the_contract_schema():
    detail = report_event()["detail"]

    jsonschema.Draft202012Validator(
        report_schema(), format_checker=jsonschema.FormatChecker()
    ).validate(detail)


def test_report_event_parses_the_evidence_fields():
    event = parse_report_event(report_event())
    report = event.report

    assert report.report_id == "r-5f3c9a1e2b7d4c60"
    assert report.check is Check.COMPUTE
    assert report.step == 30
    assert report.culprits == (13,)
    assert report.mismatched_pairs == ((13, 5), (21, 13))
    assert report.suspect_window == (21, 30)
    instance = report.instance("i-0abc1234def567890")
    assert instance is not None
    assert instance.role is Role.CULPRIT
    assert instance.ranks == (13,)


def test_report_with_another_source_is_refused():
    event = report_event()
    event["source"] = "someone.else"

    with pytest.raises(MalformedEvent) as err:
        parse_report_event(event)

    assert err.value.field == "source"


def test_report_with_an_unknown_schema_version_is_refused():
    event = report_event()
    event["detail"]["schema_version"] = "3"

    with pytest.raises(MalformedEvent) as err:
        parse_report_event(event)

    assert err.value.field == "detail.schema_version"


def test_report_with_a_bad_instance_id_names_the_entry():
    event = report_event()
    event["detail"]["instances"][0]["instance_id"] = "hyperpod-i-0abc1234def567890"

    with pytest.raises(MalformedEvent) as err:
        parse_report_event(event)

    assert err.value.field == "detail.instances[0].instance_id"


def test_report_with_an_unknown_verdict_kind_names_the_verdict():
    event = report_event()
    event["detail"]["verdicts"] = [{"pair": [13, 5], "third": 21, "suspect": 13, "kind": "flaky"}]

    with pytest.raises(MalformedEvent) as err:
        parse_report_event(event)

    assert err.value.field == "detail.verdicts[0].kind"


def test_report_missing_a_required_field_names_it():
    event = report_event()
    del event["detail"]["suspect_window"]

    with pytest.raises(MalformedEvent) as err:
        parse_report_event(event)

    assert err.value.field == "detail.suspect_window"


def test_report_with_a_negative_rank_is_refused():
    event = report_event()
    event["detail"]["culprits"] = [-1]

    with pytest.raises(MalformedEvent) as err:
        parse_report_event(event)

    assert err.value.field == "detail.culprits[0]"


def test_a_report_error_says_why_with_the_value_received():
    event = report_event()
    event["detail"]["step"] = "30"

    with pytest.raises(MalformedEvent) as err:
        parse_report_event(event)

    assert err.value.field == "detail.step"
    assert err.value.reason == "must be integer or null, got '30'"


def test_a_report_field_the_schema_does_not_define_is_refused_and_named():
    event = report_event()
    event["detail"]["suspects"][0]["confidence"] = 0.9

    with pytest.raises(MalformedEvent) as err:
        parse_report_event(event)

    assert err.value.field == "detail.suspects[0].confidence"
    assert err.value.reason == "not a field of the schema"


def test_integral_numbers_written_as_floats_read_as_ints():
    event = report_event()
    event["detail"].update(step=30.0, culprits=[13.0])

    report = parse_report_event(event).report

    assert (report.step, report.culprits) == (30, (13,))
    assert type(report.step) is int and type(report.culprits[0]) is int


def test_a_contributor_event_from_another_source_is_refused():
    with pytest.raises(MalformedEvent, match="source"):
        parse_contributor_event(contributor(source="aws.ec2"))


def test_an_event_larger_than_eventbridge_allows_is_refused():
    event = contributor()
    event["detail"]["state"]["reason"] = "x" * 300_000

    with pytest.raises(MalformedEvent, match="bytes"):
        parse_contributor_event(event)


def test_a_contributor_cluster_name_that_is_no_hyperpod_name_is_refused():
    event = contributor()
    event["detail"]["alarmContributor"]["attributes"]["ClusterName"] = "a/b"

    with pytest.raises(MalformedEvent, match="ClusterName"):
        parse_contributor_event(event)


def test_an_event_id_longer_than_any_eventbridge_id_is_refused():
    with pytest.raises(MalformedEvent, match="id"):
        parse_contributor_event(contributor(id="x" * 300))


# -- report checkpoints (optional, read leniently) ---------------------------------------------


def checkpoint(step: int, **changes):
    return {
        "step": step,
        "last_audit_pass": step,
        "last_weight_check_pass": step,
        "location": f"s3://ckpt/step-{step}",
        **changes,
    }


def with_checkpoints(checkpoints):
    event = report_event()
    event["detail"]["checkpoints"] = checkpoints
    return event


def test_a_report_without_checkpoints_parses_with_none():
    assert parse_report_event(report_event()).report.checkpoints == ()


def test_report_checkpoints_parse_oldest_first():
    report = parse_report_event(with_checkpoints([checkpoint(20), checkpoint(10)])).report

    assert [(c.step, c.location) for c in report.checkpoints] == [
        (10, "s3://ckpt/step-10"),
        (20, "s3://ckpt/step-20"),
    ]
    assert report.errors == ()


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        (checkpoint(-10), "detail.checkpoints[1].step"),
        ({"last_audit_pass": 10}, "detail.checkpoints[1].step"),
        (
            checkpoint(10, last_weight_check_pass="10"),
            "detail.checkpoints[1].last_weight_check_pass",
        ),
        (checkpoint(10, location=42), "detail.checkpoints[1].location"),
        (checkpoint(10, location="s3://" + "k" * MAX_CHECKPOINT_LOCATION), "[1].location"),
        ("s3://ckpt/step-10", "detail.checkpoints[1]"),
    ],
)
def test_a_malformed_checkpoint_is_dropped_and_named_and_the_report_kept(entry, field):
    report = parse_report_event(with_checkpoints([checkpoint(20), entry])).report

    assert [c.step for c in report.checkpoints] == [20]
    assert report.culprits == (13,)
    (note,) = report.errors
    assert field in note and "checkpoint dropped" in note


def test_checkpoints_that_are_not_an_array_are_ignored_with_a_note():
    report = parse_report_event(with_checkpoints({"step": 10})).report

    assert report.checkpoints == ()
    assert any("detail.checkpoints" in e for e in report.errors)


def test_only_the_newest_checkpoints_are_kept():
    many = [checkpoint(step) for step in range(1, MAX_REPORT_CHECKPOINTS + 5)]

    report = parse_report_event(with_checkpoints(many)).report

    assert [c.step for c in report.checkpoints] == list(range(5, MAX_REPORT_CHECKPOINTS + 5))
    assert any("only the newest" in e for e in report.errors)


# -- muted contributor alarms (CloudWatch alarm mute rules) -------------------------------------


def muted(**mute_changes):
    event = copy.deepcopy(load_fixture("events", "contributor_alarm_muted"))
    event["detail"]["muteDetail"].update(mute_changes)
    return event


def test_a_muted_contributor_alarm_parses_with_its_mute_rule_and_window():
    alarm = parse_contributor_event(load_fixture("events", "contributor_alarm_muted"))

    assert alarm.is_alarm
    assert alarm.mute is not None
    assert alarm.mute.rule_name == "gpu-fleet-maintenance"
    assert alarm.mute.rule_arn == (
        "arn:aws:cloudwatch:us-west-2:111122223333:alarm-mute-rule:gpu-fleet-maintenance"
    )
    assert alarm.mute.window_start == datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
    assert alarm.mute.window_end == datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


def test_an_alarm_without_mute_detail_is_not_muted():
    assert parse_contributor_event(load_fixture("events", "contributor_alarm")).mute is None


def test_the_other_documented_spelling_of_the_mute_rule_resource_is_read():
    event = muted(mutedByArn="arn:aws:cloudwatch:us-east-1:1234567890:alarm-mute:testMute")

    assert parse_contributor_event(event).mute.rule_name == "testMute"


@pytest.mark.parametrize(
    ("changes", "field", "reason"),
    [
        ({"mutedByArn": "gpu-fleet-maintenance"}, "mutedByArn", "not an alarm mute rule ARN"),
        (
            {"mutedByArn": "arn:aws:cloudwatch:us-west-2:111122223333:alarm:sdc-replay-mismatch"},
            "mutedByArn",
            "not an alarm mute rule ARN",
        ),
        ({"mutedByArn": ""}, "mutedByArn", "expected a non-empty string"),
        ({"muteWindowStart": "8 am"}, "muteWindowStart", "not an ISO 8601 time"),
        ({"muteWindowEnd": "2026-11-30T10:00:00"}, "muteWindowEnd", "time has no UTC offset"),
        (
            {"muteWindowEnd": "2026-11-30T07:00:00.000+0000"},
            "muteWindowEnd",
            "ends (2026-11-30T07:00:00+00:00) before it starts",
        ),
    ],
)
def test_a_malformed_mute_detail_names_the_field_and_why(changes, field, reason):
    with pytest.raises(MalformedEvent) as err:
        parse_contributor_event(muted(**changes))

    assert err.value.field == f"detail.muteDetail.{field}"
    assert reason in err.value.reason


@pytest.mark.parametrize("missing", ["mutedByArn", "muteWindowStart", "muteWindowEnd"])
def test_a_mute_detail_missing_a_field_names_it(missing):
    event = muted()
    del event["detail"]["muteDetail"][missing]

    with pytest.raises(MalformedEvent) as err:
        parse_contributor_event(event)

    assert (err.value.field, err.value.reason) == (f"detail.muteDetail.{missing}", "missing")


@pytest.mark.parametrize("value", [None, "muted", ["arn"]])
def test_a_mute_detail_that_is_not_an_object_is_refused(value):
    event = muted()
    event["detail"]["muteDetail"] = value

    with pytest.raises(MalformedEvent) as err:
        parse_contributor_event(event)

    assert err.value.field == "detail.muteDetail"
    assert err.value.reason.startswith("expected an object")
