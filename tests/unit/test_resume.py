"""The resume rule: the newest verified checkpoint before the suspect window, per check kind."""

from __future__ import annotations

from sdc_remediation.lambdas.logic.evidence.resume import choose_resume, resume_of
from sdc_remediation.lambdas.models.report import ReportCheckpoint, parse_report_event
from tests.unit.reports import report_event
from trainer_emitter.checks.alarms import Passes
from trainer_emitter.contract import Check


def saved(
    step: int, audit: int | None = None, weights: int | None = None, where: str | None = None
):
    """A checkpoint as the driver saves it: checked at its own step unless told otherwise."""
    return ReportCheckpoint(
        step=step,
        last_audit_pass=step if audit is None else audit,
        last_weight_check_pass=step if weights is None else weights,
        location=where if where is not None else f"s3://ckpt/step-{step}",
    )


def test_compute_resumes_from_the_newest_checkpoint_before_the_window():
    checkpoints = [saved(800), saved(900), saved(1000)]

    resume = choose_resume(Check.COMPUTE, (951, 1000), 950, 950, checkpoints)

    assert resume.checkpoint == saved(900)
    assert resume.before_step == 951


def test_compute_accepts_a_checkpoint_whose_own_audit_pass_is_older_than_its_step():
    # saved at 940 after a weight check there; the last audit before it passed at 900, and the
    # audit at 950 passed too: the window starts at 951
    checkpoint = saved(940, audit=900)

    resume = choose_resume(Check.COMPUTE, (951, 1000), 950, 940, [checkpoint])

    assert resume.checkpoint == checkpoint


def test_compute_skips_a_checkpoint_whose_weights_no_passing_check_covers():
    unchecked = saved(940, weights=900)  # saved without a weight check at its step

    resume = choose_resume(Check.COMPUTE, (951, 1000), 950, 900, [saved(900), unchecked])

    assert resume.checkpoint == saved(900)
    assert resume.unverified == (940,)


def test_a_later_passing_weight_check_vouches_for_an_earlier_checkpoint():
    unchecked = saved(940, weights=900)

    resume = choose_resume(Check.COMPUTE, (951, 1000), 950, 945, [unchecked])

    assert resume.checkpoint == unchecked


def test_compute_without_any_audit_pass_needs_the_checkpoints_own_audit_at_its_step():
    # a restarted job that knew no tags: the window starts at the first step it saw
    audited, not_audited = saved(500), saved(600, audit=500)

    resume = choose_resume(Check.COMPUTE, (601, 650), None, None, [audited, not_audited])

    assert resume.checkpoint == audited
    assert resume.unverified == (600,)


def test_reduced_gradient_resumes_from_the_newest_weight_checked_checkpoint_before_its_step():
    # audits never cover the reduction: a checkpoint long after the last audit is fine
    checkpoint = saved(1100, audit=900)

    resume = choose_resume(Check.REDUCED_GRADIENT, (1150, 1150), 900, 1100, [checkpoint])

    assert resume.checkpoint == checkpoint
    assert resume.before_step == 1150


def test_reduced_gradient_skips_a_checkpoint_without_a_weight_check_covering_it():
    unchecked = saved(1100, weights=1000)

    resume = choose_resume(
        Check.REDUCED_GRADIENT, (1150, 1150), 900, 1000, [saved(1000), unchecked]
    )

    assert resume.checkpoint == saved(1000)
    assert resume.unverified == (1100,)


def test_weights_resumes_from_the_newest_checkpoint_before_the_window():
    checkpoints = [saved(900), saved(1000), saved(1100, weights=1000)]

    resume = choose_resume(Check.WEIGHTS, (1001, 1100), 1000, 1000, checkpoints)

    assert resume.checkpoint == saved(1000)


def test_weights_ignores_audits():
    never_audited = ReportCheckpoint(10, None, 10, "s3://ckpt/step-10")

    resume = choose_resume(Check.WEIGHTS, (11, 20), None, 10, [never_audited])

    assert resume.checkpoint == never_audited


def test_weights_without_any_weight_pass_needs_the_checkpoints_own_check_at_its_step():
    resume = choose_resume(
        Check.WEIGHTS, (101, 107), None, None, [saved(90), saved(95, weights=90)]
    )

    assert resume.checkpoint == saved(90)
    assert resume.unverified == (95,)


def test_no_checkpoint_before_the_window_proposes_none_and_names_the_step():
    resume = choose_resume(Check.COMPUTE, (21, 30), 20, 20, [saved(30)])

    assert resume.checkpoint is None
    assert resume.before_step == 21
    assert resume.unverified == ()
    assert resume.known == 1


def test_without_a_suspect_window_nothing_is_proposed():
    resume = choose_resume(Check.COMPUTE, None, 20, 20, [saved(10)])

    assert (resume.checkpoint, resume.before_step) == (None, None)


def test_an_unknown_check_needs_both_audits_and_weight_checks():
    audited, not_audited = saved(10), saved(15, audit=10)

    resume = choose_resume(None, (16, 30), None, 15, [audited, not_audited])

    assert resume.checkpoint == audited


def test_of_two_checkpoints_at_one_step_the_one_with_a_location_wins():
    nowhere = ReportCheckpoint(20, 20, 20, None)

    resume = choose_resume(Check.COMPUTE, (21, 30), 20, 20, [saved(20), nowhere])

    assert resume.checkpoint == saved(20)


def test_the_rule_reads_the_checkpoints_of_a_parsed_report_and_ignores_malformed_ones():
    event = report_event("replay_culprit")  # window [21, 30], passes at 20
    event["detail"]["checkpoints"] = [
        {"step": 10, "last_audit_pass": 10, "last_weight_check_pass": 10, "location": "a"},
        {"step": "20", "last_audit_pass": 20, "last_weight_check_pass": 20, "location": "b"},
    ]

    resume = resume_of(parse_report_event(event).report)

    assert resume.checkpoint == ReportCheckpoint(10, 10, 10, "a")
    assert resume.known == 1


def test_a_load_time_weights_alarm_resumes_from_the_verified_checkpoint_it_loaded():
    # the copy went wrong after the save: the checkpoint itself stays the one to resume from
    alarm = Passes.from_tags({"last_audit_pass": 1000, "last_weight_check_pass": 1000}).weights(
        1001, [2]
    )

    resume = choose_resume(
        Check.WEIGHTS,
        tuple(alarm["suspect_window"]),
        alarm["last_audit_pass"],
        alarm["last_weight_check_pass"],
        [saved(900), saved(1000)],
    )

    assert resume.checkpoint == saved(1000)


def test_a_load_time_weights_alarm_without_tags_does_not_propose_the_unverified_checkpoint():
    alarm = Passes().weights(1001, [2])
    loaded = ReportCheckpoint(1000, None, None, "s3://ckpt/step-1000")

    resume = choose_resume(Check.WEIGHTS, tuple(alarm["suspect_window"]), None, None, [loaded])

    assert (resume.checkpoint, resume.unverified) == (None, (1000,))
