"""Comparing the replicas on demand: after a job loads a checkpoint, before its first step.

The scenarios (`tests/torch/scenarios.py`) load the checkpoint of step 1000 after the setup, as a
resuming job does, with one bit of one weight flipped on some ranks' copies; the first step the
driver is given is 1001. Groups other than the default one are made inside the 4-rank job.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import jsonschema
import pytest

from tests.torch.scenarios import (
    CKPT,
    CKPT_STEP,
    WORLD,
    TinyNet,
    checkpoint_state,
    instance_id,
    weights_fingerprint,
)
from trainer_emitter.checks import Agreement
from trainer_emitter.contract import NAMESPACE, Check, Metric, Role, report_schema
from trainer_emitter.mapping import Report, build_report
from trainer_emitter.rankmap import RankMap

pytestmark = pytest.mark.torch

FIRST = CKPT_STEP + 1
NOW = datetime(2026, 12, 3, tzinfo=UTC)


def step_of(result: dict[str, Any], step: int) -> dict[str, Any]:
    return next(s for s in result["steps"] if s["step"] == step)


def checkpoint_fingerprint() -> list[int]:
    net = TinyNet()
    net.load_state_dict(checkpoint_state())
    return weights_fingerprint(net)


def report_of(alarm: dict[str, Any], rank_map: list[dict[str, Any]]) -> Report:
    report = build_report(
        alarm,
        RankMap(rank_map),
        cluster_name="ml-cluster-1",
        job_name="tiny-ddp",
        namespace=NAMESPACE,
        report_id="00000000-0000-4000-8000-000000000007",
        now=NOW,
        reporting_rank=0,
    )
    jsonschema.Draft202012Validator(
        report_schema(), format_checker=jsonschema.FormatChecker()
    ).validate(report.detail)
    return report


def named(report: Report) -> list[tuple[int, str, str]]:
    return [(s["rank"], s["role"], s["instance_id"]) for s in report.detail["suspects"]]


# ---- through the driver: the first step compares the replicas before it runs -----------------


def test_a_copy_that_differs_after_a_load_is_named_before_the_first_step(runs):
    alarms = [r["alarms"] for r in runs["diverged_on_load"]]

    assert (
        alarms
        == [
            [
                {
                    "step": FIRST,
                    "check": Check.WEIGHTS.value,
                    "suspects": [2],
                    "suspect_window": [FIRST, FIRST],  # no training step is in question
                    "last_audit_pass": CKPT_STEP,
                    "last_weight_check_pass": CKPT_STEP,  # the loaded checkpoint's tag
                    "checkpoints": [CKPT],
                }
            ]
        ]
        * WORLD
    )


def test_the_first_step_after_a_divergent_load_is_not_taken_on_any_rank(runs):
    steps = [step_of(r, FIRST) for r in runs["diverged_on_load"]]

    assert [
        (s["replicas_verified"], s["forwards"], s["applied"], s["weights_changed"]) for s in steps
    ] == [(True, 0, False, False)] * WORLD
    assert all(math.isnan(s["loss"]) for s in steps)


def test_after_a_divergent_load_the_healthy_ranks_still_hold_the_checkpoint_weights(runs):
    weights = [r["weights"] for r in runs["diverged_on_load"]]
    loaded = checkpoint_fingerprint()

    assert [weights[rank] == loaded for rank in range(WORLD)] == [True, True, False, True]


def test_the_load_time_alarm_makes_a_schema_valid_report_naming_the_instance(runs):
    run = runs["diverged_on_load"][0]

    report = report_of(run["alarms"][0], run["rank_map"])

    assert report.errors == []
    assert named(report) == [(2, Role.CULPRIT.value, instance_id(2))]
    assert [(d.metric, d.instance_id) for d in report.datapoints] == [
        (Metric.DIVERGENT_TENSORS, instance_id(2))
    ]
    assert report.detail["ambiguous"] is False


def test_the_reporter_rank_alone_reports_the_load_time_alarm(runs):
    reported = [r["reported"] for r in runs["diverged_on_load"]]

    assert reported == [[{"delivered": True, "instances": [instance_id(2)]}]] + [[None]] * 3


def test_clean_replicas_pass_and_the_first_step_then_runs(runs):
    first = [step_of(r, FIRST) for r in runs["clean_load"]]

    assert [(s["replicas_verified"], s["alarm"], s["applied"], s["forwards"]) for s in first] == [
        (True, None, True, 1)
    ] * WORLD
    assert all(s["weights_changed"] for s in first)


def test_only_the_first_step_compares_the_replicas(runs):
    run = runs["clean_load"][0]

    assert [(s["step"], s["replicas_verified"]) for s in run["steps"]] == [
        (FIRST, True),
        (FIRST + 1, False),
        (FIRST + 2, False),
    ]
    assert all(s["applied"] for s in run["steps"])


def test_a_passing_load_check_is_the_weight_check_pass_of_the_loaded_step(runs):
    # the job resumed without the checkpoint's tags: the check vouches for step 1000's weights
    assert [r["tags"] for r in runs["clean_load"]] == [
        {"last_audit_pass": None, "last_weight_check_pass": CKPT_STEP}
    ] * WORLD


def test_with_verify_on_start_off_a_divergent_load_is_learned_after_an_update(runs):
    run = runs["load_unverified"][0]

    first, second = step_of(run, FIRST), step_of(run, FIRST + 1)

    assert (first["replicas_verified"], first["alarm"], first["applied"]) == (False, None, True)
    assert second["alarm"]["suspects"] == [2]  # the scheduled check, after two updates
    assert second["alarm"]["suspect_window"] == [FIRST, FIRST + 1]
    assert second["applied"]


def test_two_against_two_after_a_load_names_nobody_and_the_step_is_not_taken(runs):
    for run in runs["split_on_load"]:
        step = step_of(run, FIRST)

        assert step["alarm"]["suspects"] is None
        assert (step["applied"], step["forwards"]) == (False, 0)


def test_two_against_two_is_no_strict_majority_in_the_function_form(runs):
    verdicts = [r["verdict"] for r in runs["split_on_load"]]

    assert verdicts[0]["agreement"] == Agreement.NO_MAJORITY.value
    assert (verdicts[0]["ranks"], verdicts[0]["suspects"]) == ([0, 1, 2, 3], None)
    assert verdicts[0]["differing"] == ["out.weight"]
    assert verdicts[0]["alarm"] == step_of(runs["split_on_load"][0], FIRST)["alarm"]
    assert all(v == verdicts[0] for v in verdicts)


def test_a_report_of_no_strict_majority_puts_every_rank_in_question(runs):
    run = runs["split_on_load"][0]

    report = report_of(step_of(run, FIRST)["alarm"], run["rank_map"])

    assert report.detail["ambiguous"] is True
    assert named(report) == [(r, Role.INVOLVED.value, instance_id(r)) for r in range(WORLD)]


# ---- the function form, with a group the loop passes ------------------------------------------


def group_verdicts(runs: dict[str, list[Any]], group: str) -> list[dict[str, Any]]:
    return [r["verdicts"][group] for r in runs["groups_on_load"] if group in r["verdicts"]]


def test_two_copies_that_disagree_cannot_be_attributed(runs):
    verdicts = group_verdicts(runs, "1,3")

    assert len(verdicts) == 2
    assert all(v == verdicts[0] for v in verdicts)
    assert verdicts[0]["agreement"] == Agreement.TWO_DISAGREE.value
    assert (verdicts[0]["ranks"], verdicts[0]["suspects"]) == ([1, 3], None)
    assert verdicts[0]["alarm"] == {
        "step": FIRST,
        "check": Check.WEIGHTS.value,
        "suspects": None,
        "replicas": [1, 3],
        "suspect_window": [FIRST, FIRST],
        "last_audit_pass": None,
        "last_weight_check_pass": None,
    }


def test_a_report_of_two_disagreeing_copies_questions_those_two_ranks_only(runs):
    alarm = group_verdicts(runs, "1,3")[0]["alarm"]

    report = report_of(alarm, runs["groups_on_load"][0]["rank_map"])

    assert report.errors == []
    assert report.detail["ambiguous"] is True
    assert named(report) == [(r, Role.INVOLVED.value, instance_id(r)) for r in (1, 3)]


def test_the_seed_call_without_a_step_returns_the_same_verdict(runs):
    # find_divergent_ranks(params, group): parameters named by position, no step
    seed = group_verdicts(runs, "seed 1,2,3")
    named_call = group_verdicts(runs, "1,2,3")

    assert [(v["agreement"], v["suspects"]) for v in seed] == [
        (v["agreement"], v["suspects"]) for v in named_call
    ]
    assert seed[0]["differing"] == ["[4]"]  # out.weight, by position: the fifth parameter


def test_the_alarm_of_a_call_without_a_step_says_the_step_is_unknown(runs):
    alarm = group_verdicts(runs, "seed 1,2,3")[0]["alarm"]

    report = report_of(alarm, runs["groups_on_load"][0]["rank_map"])

    assert (alarm["step"], alarm["suspect_window"], alarm["suspects"]) == (None, None, [1])
    assert (report.detail["step"], report.detail["suspect_window"]) == (None, None)
    assert [e for e in report.errors if "step" in e or "window" in e] == [
        "'step' is None, not a step number; left out",
        "'suspect_window' is None, not [first, last] steps",
    ]
    assert named(report) == [(1, Role.CULPRIT.value, instance_id(1))]


def test_a_suspect_in_a_passed_group_is_named_by_its_global_rank(runs):
    verdicts = group_verdicts(runs, "1,2,3")

    # rank 1 is the group's first member (group rank 0): the alarm names global rank 1
    assert [(v["agreement"], v["suspects"]) for v in verdicts] == [
        (Agreement.MINORITY.value, [1])
    ] * 3
    assert verdicts[0]["alarm"]["suspects"] == [1]
    assert verdicts[0]["alarm"]["replicas"] == [1, 2, 3]


def test_two_copies_that_agree_pass_without_an_alarm(runs):
    verdicts = group_verdicts(runs, "0,2")

    assert [(v["agreement"], v["suspects"], v["alarm"]) for v in verdicts] == [
        (Agreement.AGREE.value, [], None)
    ] * 2


def test_a_rank_outside_the_group_is_refused_instead_of_waiting(runs):
    refused = [sorted(r["refused"]) for r in runs["groups_on_load"]]

    assert refused == [["1,2,3", "1,3"], ["0,2"], ["1,3"], ["0,2"]]
    assert "not in the group" in runs["groups_on_load"][0]["refused"]["1,3"]


def test_after_the_groups_the_drivers_first_step_compares_the_whole_job(runs):
    alarms = [r["alarms"] for r in runs["groups_on_load"]]

    assert [[a["suspects"] for a in ranks] for ranks in alarms] == [[[1]]] * WORLD
    assert "replicas" not in alarms[0][0]  # every rank of the job was compared
