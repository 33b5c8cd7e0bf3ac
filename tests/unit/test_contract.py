from __future__ import annotations

import pytest

from tests.conftest import load_fixture
from trainer_emitter import contract
from trainer_emitter.contract import Metric, VerdictKind


def test_metric_names_are_the_three_sdc_checks_and_the_two_of_the_watch():
    assert {m.value for m in contract.SDC_METRICS} == {
        "sdc_nonfinite_grad",
        "sdc_replay_mismatch",
        "sdc_divergent_tensors",
    }
    assert {m.value for m in Metric} - {m.value for m in contract.SDC_METRICS} == {
        "sdc_hang",
        "sdc_straggler",
    }


def test_query_matches_the_expression_of_the_documented_contributor_event():
    event = load_fixture("events", "contributor_alarm")
    expression = event["detail"]["configuration"]["metrics"][0]["expression"]

    assert contract.metrics_insights_query(Metric.REPLAY_MISMATCH) == expression


def test_alarm_name_of_the_documented_event_maps_back_to_its_metric():
    event = load_fixture("events", "contributor_alarm")

    assert contract.metric_for_alarm_name(event["detail"]["alarmName"]) is Metric.REPLAY_MISMATCH
    assert contract.metric_for_alarm_name("prod-sdc-divergent-tensors") is Metric.DIVERGENT_TENSORS
    assert contract.metric_for_alarm_name("some-other-alarm") is None


@pytest.mark.parametrize(
    ("node_name", "expected"),
    [
        ("hyperpod-i-0aa00000000000001", "i-0aa00000000000001"),
        ("hyperpod-i-0123abcd", "i-0123abcd"),
        ("ip-10-1-2-3.us-west-2.compute.internal", None),
        ("hyperpod-i-0AA00000000000001", None),
        ("hyperpod-i-0aa0000000000000", None),
        ("", None),
        (None, None),
    ],
)
def test_instance_id_is_read_from_hyperpod_node_names_only(node_name, expected):
    assert contract.instance_id_from_node_name(node_name) == expected


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ("transient", VerdictKind.TRANSIENT),
        ("Persistent", VerdictKind.PERSISTENT),
        ("replayer computed wrong", VerdictKind.REPLAYER),
        ("replayer_wrong", VerdictKind.REPLAYER),
        ("unattributable", VerdictKind.UNATTRIBUTABLE),
        ("flaky", None),
        (7, None),
    ],
)
def test_verdict_kinds_parse_with_aliases_and_refuse_unknown_ones(raw, kind):
    assert VerdictKind.parse(raw) is kind


def test_report_schema_is_versioned_and_names_the_contract_metrics():
    schema = contract.report_schema()

    assert schema["properties"]["schema_version"] == {"const": contract.REPORT_SCHEMA_VERSION}
    assert set(schema["$defs"]["metric"]["enum"]) == {m.value for m in contract.SDC_METRICS}


def test_version_2_is_version_1_plus_the_watch_kinds_and_their_evidence():
    one, two = contract.report_schema("1"), contract.report_schema("2")

    assert two["properties"]["schema_version"] == {"const": "2"}
    assert set(two["$defs"]["metric"]["enum"]) == {m.value for m in Metric}
    assert set(two["properties"]["check"]["enum"]) == {c.value for c in contract.Check} | {None}
    assert set(two["properties"]) - set(one["properties"]) == {"hang", "straggler"}
    assert two["required"] == one["required"]  # the evidence is optional: v1's fields suffice
    for name, prop in one["properties"].items():
        if name not in ("schema_version", "check"):
            assert two["properties"][name] == prop, name


@pytest.mark.parametrize(
    ("check", "version"),
    [
        ("compute", "1"),
        ("weights", "1"),
        ("reduced gradient", "1"),
        (None, "1"),
        ("hang", "2"),
        ("straggler", "2"),
    ],
)
def test_sdc_reports_stay_version_1_and_watch_reports_are_version_2(check, version):
    assert contract.report_version(check) == version


def test_an_unknown_schema_version_is_refused_by_name():
    with pytest.raises(ValueError, match="'3' is not one of"):
        contract.report_schema("3")
