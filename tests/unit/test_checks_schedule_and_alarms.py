"""When the checks run, and the alarm dicts they return (exactly the fixtures' shape)."""

from __future__ import annotations

import pytest

from tests.conftest import load_fixture
from trainer_emitter.checks.alarms import Passes
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
    [{"audit_every": -1}, {"check_every": 1.5}, {"ckpt_every": True}, {"peer_offset": 0}],
)
def test_a_nonsense_schedule_is_refused(settings):
    with pytest.raises(ValueError, match="Schedule"):
        Schedule(**settings)


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
