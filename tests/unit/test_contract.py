from __future__ import annotations

import pytest

from tests.conftest import load_fixture
from trainer_emitter import contract
from trainer_emitter.contract import Metric, VerdictKind


def test_metric_names_are_exactly_the_three_the_design_fixes():
    assert {m.value for m in Metric} == {
        "sdc_nonfinite_grad",
        "sdc_replay_mismatch",
        "sdc_divergent_tensors",
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
    assert set(schema["$defs"]["metric"]["enum"]) == {m.value for m in Metric}
