"""The mapping from a training loop's alarm dict to datapoints and the SDC Report detail."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import jsonschema
import pytest

from sdc_remediation.lambdas.models.errors import MalformedEvent
from sdc_remediation.lambdas.models.report import parse_report
from tests.conftest import load_fixture
from trainer_emitter.contract import (
    MAX_CHECKPOINT_LOCATION,
    MAX_REPORT_CHECKPOINTS,
    NAMESPACE,
    report_schema,
)
from trainer_emitter.mapping import build_report
from trainer_emitter.rankmap import RankMap
from trainer_emitter.sinks import MAX_EVENT_BYTES, event_detail_json

NOW = datetime(2026, 11, 30, 8, 14, tzinfo=UTC)
FIRST, SECOND, THIRD, FOURTH = (
    "i-0aa00000000000001",
    "i-0bb00000000000002",
    "i-0cc00000000000003",
    "i-0dd00000000000004",
)
ALL_FOUR = [FIRST, SECOND, THIRD, FOURTH]


def rank_map() -> RankMap:
    return RankMap(load_fixture("alarms", "rank_map"))


def build(alarm: object, ranks: RankMap | None = None):
    return build_report(
        alarm,
        ranks if ranks is not None else rank_map(),
        cluster_name="ml-cluster-1",
        job_name="llama-pretrain",
        namespace=NAMESPACE,
        report_id="3b0f3c4e-0000-4000-8000-000000000001",
        now=NOW,
        reporting_rank=0,
    )


def published(report) -> set[tuple[str, str]]:
    return {(d.metric.value, d.instance_id) for d in report.datapoints}


def assert_valid(detail: dict) -> None:
    jsonschema.Draft202012Validator(
        report_schema(), format_checker=jsonschema.FormatChecker()
    ).validate(detail)


EXPECTED = {
    "replay_culprit": ({("sdc_replay_mismatch", SECOND)}, False),
    "nonfinite_transient": (
        {("sdc_nonfinite_grad", SECOND), ("sdc_replay_mismatch", SECOND)},
        False,
    ),
    "weights_suspect": ({("sdc_divergent_tensors", FIRST)}, False),
    "weights_no_majority": ({("sdc_divergent_tensors", i) for i in ALL_FOUR}, True),
    "reduced_gradient": ({("sdc_nonfinite_grad", i) for i in ALL_FOUR}, True),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_fixture_alarm_publishes_exactly_the_expected_datapoints(name):
    expected, ambiguous = EXPECTED[name]

    report = build(load_fixture("alarms", name))

    assert published(report) == expected
    assert len(report.datapoints) == len(expected)  # one per (metric, instance), no duplicates
    assert report.detail["ambiguous"] is ambiguous
    assert report.errors == []


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_schema_accepts_every_report_built_from_the_fixtures(name):
    report = build(load_fixture("alarms", name))

    assert_valid(report.detail)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_datapoints_carry_value_one_count_and_exactly_the_two_contract_dimensions(name):
    report = build(load_fixture("alarms", name))

    for datum in (d.to_metric_datum() for d in report.datapoints):
        assert [d["Name"] for d in datum["Dimensions"]] == ["ClusterName", "InstanceId"]
        assert datum["Dimensions"][0]["Value"] == "ml-cluster-1"
        assert (datum["Value"], datum["Unit"]) == (1.0, "Count")


def test_rank_13_of_the_fixtures_is_the_culprit_on_the_second_instance():
    report = build(load_fixture("alarms", "replay_culprit"))

    (suspect,) = report.detail["suspects"]
    assert suspect["rank"] == 13
    assert suspect["role"] == "culprit"
    assert suspect["instance_id"] == SECOND
    assert suspect["node_name"] == "hyperpod-" + SECOND
    assert suspect["gpu_uuid"].startswith("GPU-0000000d")


def test_a_transient_verdict_makes_its_suspect_confirmed_and_clears_the_replayer():
    report = build(load_fixture("alarms", "nonfinite_transient"))

    roles = {s["rank"]: s["role"] for s in report.detail["suspects"]}
    assert roles == {13: "confirmed_suspect"}  # rank 5 replayed and rank 21 confirmed: cleared
    assert report.detail["verdicts"][0]["kind"] == "transient"


def test_an_unattributable_verdict_marks_both_ranks_involved_and_the_report_ambiguous():
    alarm = {
        "step": 50,
        "check": "compute",
        "nonfinite": [],
        "mismatched_pairs": [[3, 11]],
        "culprits": [],
        "verdicts": [{"pair": [3, 11], "third": 19, "suspect": None, "kind": "unattributable"}],
        "suspect_window": [41, 50],
    }

    report = build(alarm)

    assert published(report) == {("sdc_replay_mismatch", FIRST), ("sdc_replay_mismatch", SECOND)}
    assert {s["role"] for s in report.detail["suspects"]} == {"involved"}
    assert report.detail["ambiguous"] is True


def test_a_replayer_verdict_names_the_replayer_not_the_target():
    alarm = {
        "step": 60,
        "check": "compute",
        "mismatched_pairs": [[3, 11]],
        "verdicts": [
            {"pair": [3, 11], "third": 19, "suspect": 11, "kind": "replayer computed wrong"}
        ],
        "suspect_window": [51, 60],
    }

    report = build(alarm)

    assert published(report) == {("sdc_replay_mismatch", SECOND)}
    assert report.detail["suspects"][0]["role"] == "confirmed_suspect"


def test_nonfinite_ranks_without_a_mismatched_pair_are_involved_only():
    alarm = {"step": 7, "check": "compute", "nonfinite": [2, 30], "suspect_window": [7, 7]}

    report = build(alarm)

    assert published(report) == {("sdc_nonfinite_grad", FIRST), ("sdc_nonfinite_grad", FOURTH)}
    assert report.detail["ambiguous"] is True


def test_several_ranks_on_one_instance_collapse_into_one_datapoint_with_the_strongest_role():
    alarm = {
        "step": 9,
        "check": "compute",
        "nonfinite": [8, 9],
        "mismatched_pairs": [[9, 1], [17, 9]],
        "culprits": [9],
        "suspect_window": [1, 9],
    }

    report = build(alarm)

    (instance,) = report.detail["instances"]
    assert instance == {
        "instance_id": SECOND,
        "metrics": ["sdc_nonfinite_grad", "sdc_replay_mismatch"],
        "ranks": [8, 9],
        "role": "culprit",
    }
    assert len(report.datapoints) == 2


def test_no_strict_majority_within_a_group_questions_only_the_groups_ranks():
    # the loop compared the two copies of one shard, on ranks 5 and 13 (first and second node)
    alarm = {
        "step": 1001,
        "check": "weights",
        "suspects": None,
        "replicas": [5, 13],
        "suspect_window": [1001, 1001],
    }

    report = build(alarm)

    assert published(report) == {
        ("sdc_divergent_tensors", FIRST),
        ("sdc_divergent_tensors", SECOND),
    }
    assert [(s["rank"], s["role"]) for s in report.detail["suspects"]] == [
        (5, "involved"),
        (13, "involved"),
    ]
    assert report.detail["ambiguous"] is True
    assert report.errors == []
    assert_valid(report.detail)


def test_an_unmapped_node_is_reported_as_unmapped_and_never_guessed():
    ranks = RankMap([{"rank": 0, "node": "ip-10-1-2-3.us-west-2.compute.internal"}])
    alarm = {"step": 35, "check": "weights", "suspects": [0], "suspect_window": [31, 35]}

    report = build(alarm, ranks)

    assert report.datapoints == []
    (suspect,) = report.detail["suspects"]
    assert suspect["mapped"] is False and suspect["instance_id"] is None
    assert any("has no known instance id" in e for e in report.errors)
    assert_valid(report.detail)


BAD_ALARMS = {
    "missing step and window": (
        {"check": "compute", "culprits": [13], "mismatched_pairs": [[13, 5], [21, 13]]},
        {("sdc_replay_mismatch", SECOND)},
        ["'step' is missing", "'suspect_window' is missing"],
    ),
    "unknown check": (
        {"step": 1, "check": "vibes", "nonfinite": [0], "suspect_window": [1, 1]},
        {("sdc_nonfinite_grad", FIRST)},
        ["'check' is 'vibes'"],
    ),
    "rank outside the map": (
        {"step": 1, "check": "compute", "culprits": [13, 40], "suspect_window": [1, 1]},
        {("sdc_replay_mismatch", SECOND)},
        ["rank 40 is not in the rank map (32 ranks)"],
    ),
    "nan values": (
        {
            "step": math.nan,
            "check": "compute",
            "nonfinite": [math.nan, 25],
            "suspect_window": [math.inf, 3],
            "last_audit_pass": math.nan,
        },
        {("sdc_nonfinite_grad", FOURTH)},
        [
            "'step' is nan",
            "'nonfinite' holds nan",
            "'suspect_window' is [inf, 3]",
            "'last_audit_pass' is nan",
        ],
    ),
    "weights without suspects": (
        {"step": 3, "check": "weights", "suspect_window": [1, 3]},
        set(),
        ["'suspects' is missing from a weights alarm"],
    ),
    "verdict without a suspect": (
        {
            "step": 4,
            "check": "compute",
            "mismatched_pairs": [[0, 8]],
            "verdicts": [{"pair": [0, 8], "third": 16, "kind": "persistent"}],
            "suspect_window": [1, 4],
        },
        {("sdc_replay_mismatch", FIRST), ("sdc_replay_mismatch", SECOND)},
        ["verdict 'persistent' on pair [0, 8] names no valid suspect"],
    ),
    "not a dict": ("step 5 went wrong", set(), ["alarm is a str, not a dict"]),
    "ranks not a list": (
        {"step": 5, "check": "compute", "culprits": 13, "suspect_window": [1, 5]},
        set(),
        ["'culprits' is 13, not a list of ranks"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_ALARMS))
def test_a_bad_alarm_names_each_problem_and_still_publishes_what_is_certain(case):
    alarm, expected, problems = BAD_ALARMS[case]

    report = build(alarm)

    assert published(report) == expected
    for problem in problems:
        assert any(problem in error for error in report.errors), (problem, report.errors)
    assert_valid(report.detail)  # the report itself stays valid and JSON-safe


CHECKPOINT = {
    "step": 20,
    "last_audit_pass": 20,
    "last_weight_check_pass": 20,
    "location": "s3://ckpt/llama/step-20",
}


def with_checkpoints(checkpoints: object, fixture_name: str = "replay_culprit") -> dict:
    return {**load_fixture("alarms", fixture_name), "checkpoints": checkpoints}


def test_the_report_carries_the_alarms_checkpoints_oldest_first():
    older = {**CHECKPOINT, "step": 10, "last_audit_pass": 10, "last_weight_check_pass": 10}

    report = build(with_checkpoints([CHECKPOINT, older]))

    assert report.detail["checkpoints"] == [older, CHECKPOINT]
    assert report.errors == []
    assert_valid(report.detail)


def test_an_alarm_without_checkpoints_gives_an_empty_list_and_older_reports_stay_valid():
    report = build(load_fixture("alarms", "replay_culprit"))

    assert report.detail["checkpoints"] == []
    older_emitter = {k: v for k, v in report.detail.items() if k != "checkpoints"}
    assert_valid(older_emitter)


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"last_audit_pass": 20}, "has no valid step"),
        ({**CHECKPOINT, "step": -20}, "has no valid step"),
        ({**CHECKPOINT, "last_weight_check_pass": "20"}, "has no valid last_weight_check_pass"),
        ("s3://ckpt/llama/step-20", "not a checkpoint dict"),
    ],
)
def test_a_malformed_checkpoint_is_left_out_with_an_error_and_the_rest_kept(entry, problem):
    good = {**CHECKPOINT, "step": 10}

    report = build(with_checkpoints([good, entry]))

    assert report.detail["checkpoints"] == [good]
    assert any(problem in error for error in report.errors), report.errors
    assert published(report) == {("sdc_replay_mismatch", SECOND)}
    assert_valid(report.detail)


def test_checkpoints_that_are_not_a_list_are_left_out_with_an_error():
    report = build(with_checkpoints({"step": 20}))

    assert report.detail["checkpoints"] == []
    assert any("'checkpoints' is" in error for error in report.errors)
    assert_valid(report.detail)


def test_a_location_too_long_or_not_a_string_is_dropped_and_the_checkpoint_kept():
    long = {**CHECKPOINT, "location": "s3://" + "k" * MAX_CHECKPOINT_LOCATION}
    odd = {**CHECKPOINT, "step": 10, "location": 10}

    report = build(with_checkpoints([long, odd]))

    assert [(c["step"], c["location"]) for c in report.detail["checkpoints"]] == [
        (10, None),
        (20, None),
    ]
    assert len([e for e in report.errors if "location" in e]) == 2
    assert_valid(report.detail)


def test_a_report_keeps_the_newest_checkpoints_and_stays_far_below_the_event_limit():
    location = "s3://" + "k" * (MAX_CHECKPOINT_LOCATION - 5)
    many = [
        {"step": s, "last_audit_pass": s, "last_weight_check_pass": s, "location": location}
        for s in range(1, 41)
    ]

    report = build(with_checkpoints(many))

    steps = [c["step"] for c in report.detail["checkpoints"]]
    assert steps == list(range(41 - MAX_REPORT_CHECKPOINTS, 41))
    assert any("older checkpoints left out" in error for error in report.errors)
    assert_valid(report.detail)
    body = event_detail_json(report.detail)
    assert len(body.encode()) < MAX_EVENT_BYTES // 2
    assert json.loads(body)["alarm"] is not None  # nothing had to be trimmed


@pytest.mark.parametrize(
    "checkpoints",
    [
        [{**CHECKPOINT, "step": -1}],
        [{**CHECKPOINT, "location": 20}],
        [{**CHECKPOINT, "location": ""}],
        [{**CHECKPOINT, "location": "k" * (MAX_CHECKPOINT_LOCATION + 1)}],
        [{**CHECKPOINT, "bucket": "ckpt"}],
        [{k: v for k, v in CHECKPOINT.items() if k != "location"}],
        [CHECKPOINT] * (MAX_REPORT_CHECKPOINTS + 1),
        {"step": 20},
    ],
)
def test_the_schema_refuses_malformed_checkpoints(checkpoints):
    detail = {**build(load_fixture("alarms", "replay_culprit")).detail, "checkpoints": checkpoints}

    with pytest.raises(jsonschema.ValidationError):
        assert_valid(detail)


def test_the_schema_bounds_are_the_contract_bounds():
    checkpoints = report_schema()["properties"]["checkpoints"]

    assert checkpoints["maxItems"] == MAX_REPORT_CHECKPOINTS
    assert checkpoints["items"]["properties"]["location"]["maxLength"] == MAX_CHECKPOINT_LOCATION


def test_an_event_over_the_size_limit_drops_the_raw_alarm_copy_and_still_matches_the_schema():
    alarm = load_fixture("alarms", "replay_culprit")
    alarm["padding"] = "x" * MAX_EVENT_BYTES  # the raw copy keeps whatever the loop put there
    report = build(alarm)

    body = event_detail_json(report.detail)

    assert len(body.encode()) <= MAX_EVENT_BYTES
    detail = json.loads(body)
    assert "alarm" not in detail
    assert "raw alarm copy dropped: event over 256 KB" in detail["errors"]
    assert detail["culprits"] == report.detail["culprits"]  # the parsed evidence stays
    assert_valid(detail)


def test_an_alarm_too_deep_or_with_huge_integers_is_carried_within_the_schema_bounds():
    deep: dict = {}
    for _ in range(100):
        deep = {"a": deep}
    alarm = {**load_fixture("alarms", "replay_culprit"), "trace": deep, "seed": 2**70}

    detail = build(alarm).detail

    assert detail["alarm"]["seed"] == str(2**70)
    assert_valid(detail)
    parse_report(detail)  # the pipeline's own bounds: raises where it would refuse the report


def test_tokens_per_step_given_goes_into_the_report_and_the_pipeline_reads_it():
    report = build_report(
        load_fixture("alarms", "replay_culprit"),
        rank_map(),
        cluster_name="ml-cluster-1",
        job_name="llama-pretrain",
        namespace=NAMESPACE,
        report_id="3b0f3c4e-0000-4000-8000-000000000001",
        now=NOW,
        tokens_per_step=4_194_304,
    )

    assert report.detail["tokens_per_step"] == 4_194_304
    assert_valid(report.detail)
    assert parse_report(report.detail).tokens_per_step == 4_194_304


def test_without_tokens_per_step_the_report_is_what_older_emitters_sent_and_still_reads():
    report = build(load_fixture("alarms", "replay_culprit"))

    assert "tokens_per_step" not in report.detail
    assert_valid(report.detail)
    assert parse_report(report.detail).tokens_per_step is None


@pytest.mark.parametrize("value", [0, -4096, 2.5, "4096", 2**53])
def test_the_pipeline_refuses_a_report_whose_tokens_per_step_is_no_positive_whole_number(value):
    detail = {**build(load_fixture("alarms", "replay_culprit")).detail, "tokens_per_step": value}

    with pytest.raises(MalformedEvent, match=r"detail\.tokens_per_step"):
        parse_report(detail)
