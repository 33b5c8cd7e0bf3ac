"""When the checks run, and the alarm dicts they return (exactly the fixtures' shape)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import load_fixture
from trainer_emitter.checks.alarms import KEPT_CHECKPOINTS, Passes, location_of
from trainer_emitter.checks.schedule import Schedule


def test_audits_fall_every_audit_every_steps():
    schedule = Schedule(audit_every=10)

    assert [s for s in range(1, 31) if schedule.is_audit(s)] == [10, 20, 30]


def test_zero_means_never():
    schedule = Schedule(audit_every=0, check_every=0, ckpt_every=0)

    assert not any(
        schedule.is_audit(s) or schedule.is_weight_check(s) or schedule.is_checkpoint(s)
        for s in range(1, 100)
    )


def test_every_checkpoint_step_gets_a_weight_check():
    schedule = Schedule(check_every=0, ckpt_every=25)

    assert [s for s in range(1, 101) if schedule.is_weight_check(s)] == [25, 50, 75, 100]


def test_without_check_on_checkpoint_only_check_every_counts():
    schedule = Schedule(check_every=30, ckpt_every=25, check_on_checkpoint=False)

    assert [s for s in range(1, 101) if schedule.is_weight_check(s)] == [30, 60, 90]


@pytest.mark.parametrize(
    "settings",
    [
        {"audit_every": -1},
        {"check_every": 1.5},
        {"ckpt_every": True},
        {"peer_offset": 0},
        {"verify_on_start": 1},
    ],
)
def test_a_nonsense_schedule_is_refused(settings):
    with pytest.raises(ValueError, match="Schedule"):
        Schedule(**settings)


def test_the_replicas_are_compared_before_the_first_step_unless_turned_off():
    assert Schedule().verify_on_start is True
    assert Schedule(verify_on_start=False).verify_on_start is False


def passes(first: int, audit: int | None, weights: int | None) -> Passes:
    return Passes(first_step=first, last_audit_pass=audit, last_weight_check_pass=weights)


def test_a_compute_alarm_equals_the_fixture_for_the_same_evidence():
    fixture = load_fixture("alarms", "nonfinite_transient")

    alarm = passes(1, 20, 20).compute(
        25,
        nonfinite=[13],
        mismatched_pairs=[[13, 5]],
        culprits=[],
        verdicts=fixture["verdicts"],
    )

    assert alarm == fixture
    assert list(alarm) == list(fixture)


def test_a_culprit_alarm_equals_the_fixture():
    fixture = load_fixture("alarms", "replay_culprit")

    alarm = passes(1, 20, 20).compute(
        30, nonfinite=[], mismatched_pairs=[[13, 5], [21, 13]], culprits=[13], verdicts=[]
    )

    assert alarm == fixture


@pytest.mark.parametrize(
    ("fixture_name", "step", "suspects"),
    [("weights_suspect", 35, [0]), ("weights_no_majority", 40, None)],
)
def test_a_weights_alarm_equals_the_fixture(fixture_name, step, suspects):
    fixture = load_fixture("alarms", fixture_name)

    alarm = passes(1, 30, 30).weights(step, suspects)

    assert alarm == fixture
    assert list(alarm) == list(fixture)


def test_a_load_time_weights_alarm_after_a_verified_checkpoint_questions_no_training_step():
    # resumed from the checkpoint of step 1000, saved after its weight check; 1001 about to run
    tracker = Passes.from_tags({"last_audit_pass": 1000, "last_weight_check_pass": 1000})

    alarm = tracker.weights(1001, [2])

    assert alarm["suspect_window"] == [1001, 1001]
    assert (alarm["last_audit_pass"], alarm["last_weight_check_pass"]) == (1000, 1000)


def test_a_weights_alarm_of_a_group_names_the_ranks_whose_copies_were_compared():
    alarm = passes(1, 30, 30).weights(40, None, [13, 5])

    assert alarm["replicas"] == [5, 13]
    assert list(alarm) == ["step", "check", "suspects", "replicas", *WINDOW_AND_PASSES]


WINDOW_AND_PASSES = ["suspect_window", "last_audit_pass", "last_weight_check_pass"]


def test_a_reduced_gradient_alarm_equals_the_fixture():
    assert passes(1, 10, 10).reduced_gradient(12) == load_fixture("alarms", "reduced_gradient")


def test_without_a_pass_yet_the_window_starts_at_the_first_step_seen():
    tracker = Passes()
    tracker.saw(101)
    tracker.saw(102)

    assert tracker.weights(107, [2])["suspect_window"] == [101, 107]


def test_passes_resume_from_the_tags_of_a_checkpoint():
    tracker = Passes.from_tags({"last_audit_pass": 900, "last_weight_check_pass": 1000})
    tracker.saw(1001)

    alarm = tracker.compute(1005, nonfinite=[3], mismatched_pairs=[], culprits=[], verdicts=[])

    assert alarm["suspect_window"] == [901, 1005]
    assert tracker.tags() == {"last_audit_pass": 900, "last_weight_check_pass": 1000}


def test_an_alarm_carries_the_checkpoints_saved_with_the_tags_of_their_time():
    tracker = passes(1, 1000, 1000)
    tracker.saved(1000, "s3://ckpt/step-1000")
    tracker.last_audit_pass = tracker.last_weight_check_pass = 1100
    tracker.saved(1100)

    alarm = tracker.compute(1150, nonfinite=[3], mismatched_pairs=[], culprits=[], verdicts=[])

    assert alarm["checkpoints"] == [
        {
            "step": 1000,
            "last_audit_pass": 1000,
            "last_weight_check_pass": 1000,
            "location": "s3://ckpt/step-1000",
        },
        {"step": 1100, "last_audit_pass": 1100, "last_weight_check_pass": 1100, "location": None},
    ]
    assert tracker.weights(1150, [2])["checkpoints"] == alarm["checkpoints"]
    assert tracker.reduced_gradient(1150)["checkpoints"] == alarm["checkpoints"]


def test_an_alarm_keeps_only_the_newest_checkpoints():
    tracker = passes(1, None, None)
    for step in range(100, 1300, 100):
        tracker.saved(step)

    alarm = tracker.reduced_gradient(1250)

    assert [c["step"] for c in alarm["checkpoints"]] == list(range(500, 1300, 100))
    assert len(alarm["checkpoints"]) == KEPT_CHECKPOINTS


def test_checkpoints_known_from_before_a_restart_ride_with_the_new_ones():
    tracker = Passes.from_tags({"last_audit_pass": 900, "last_weight_check_pass": 1000})
    tracker.checkpoints.extend(
        [{"step": 1000, "last_audit_pass": 900, "last_weight_check_pass": 1000, "location": "a"}]
    )
    tracker.saw(1001)
    tracker.saved(1100, "b")

    alarm = tracker.weights(1105, [1])

    assert [(c["step"], c["location"]) for c in alarm["checkpoints"]] == [(1000, "a"), (1100, "b")]
    assert alarm["checkpoints"][1]["last_audit_pass"] == 900


@pytest.mark.parametrize(
    "known",
    [
        [{"last_audit_pass": 1}],
        [{"step": -1}],
        [{"step": 10, "last_weight_check_pass": "10"}],
        [{"step": 10, "location": 7}],
        ["step-10"],
    ],
)
def test_a_malformed_known_checkpoint_is_refused_early(known):
    with pytest.raises(ValueError, match="checkpoint"):
        Passes().checkpoints.extend(known)


def test_an_alarm_without_checkpoints_has_no_checkpoints_key():
    assert "checkpoints" not in passes(1, 20, 20).reduced_gradient(25)


@pytest.mark.parametrize(
    ("returned", "location"),
    [
        ("s3://ckpt/step-10", "s3://ckpt/step-10"),
        (Path("/fsx/ckpt/step-10"), "/fsx/ckpt/step-10"),
        (None, None),
        ("", None),
        ({"path": "x"}, None),
    ],
)
def test_what_save_returns_is_the_location_when_it_is_a_string_or_path(returned, location):
    assert location_of(returned) == location
