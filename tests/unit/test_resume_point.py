"""The resume point read from stored report summaries: the checkpoint, the rollback and the
exposure window, for records written before these were worded too."""

from __future__ import annotations

from sdc_remediation.lambdas.models.evidence import ReportEvidence, evidence_of
from sdc_remediation.lambdas.models.resume_point import ResumePoint


def record(step, window, before, checkpoint=None) -> dict:
    """A report summary as stored."""
    return {
        "kind": "report",
        "key": f"report:{step}",
        "step": step,
        "suspect_window": window,
        "resume": {"checkpoint": checkpoint, "before_step": before, "unverified": [], "known": 1},
    }


def summary(step, window, before, checkpoint=None, **more) -> ReportEvidence:
    """A report summary as stored, read back."""
    return evidence_of({**record(step, window, before, checkpoint), **more})


def test_the_earliest_window_decides_and_the_rollback_runs_from_its_alarm():
    point = ResumePoint.of(
        [
            summary(60, [51, 60], 51, {"step": 50, "location": "s3://c/50"}),
            summary(36, [32, 36], 32, {"step": 30, "location": "s3://c/30"}),
        ]
    )

    assert point is not None
    assert (point.checkpoint_step, point.location) == (30, "s3://c/30")
    assert (point.rollback_steps, point.exposure, point.exposure_steps) == (6, (32, 36), 5)


def test_a_report_without_a_window_leaves_everything_unknown():
    point = ResumePoint.of([summary(36, [32, 36], 32), summary(40, None, None)])

    assert point == ResumePoint(None, None, None, None)
    assert point.to_event() == {
        "checkpoint": None,
        "detected_step": None,
        "rollback_steps": None,
        "tokens_per_step": None,
        "rollback_tokens": None,
        "exposure": None,
    }


def test_the_rollback_in_tokens_is_its_steps_times_the_deciding_reports_tokens_per_step():
    decides = summary(36, [32, 36], 32, {"step": 30, "location": None}, tokens_per_step=8)
    later = summary(60, [51, 60], 51, {"step": 50, "location": None}, tokens_per_step=99)

    point = ResumePoint.of([later, decides])

    assert point is not None
    assert (point.rollback_steps, point.tokens_per_step, point.rollback_tokens) == (6, 8, 48)


def test_a_summary_stored_before_tokens_per_step_leaves_the_token_figure_unknown():
    point = ResumePoint.of([summary(36, [32, 36], 32, {"step": 30, "location": None})])

    assert point is not None
    assert (point.rollback_steps, point.rollback_tokens) == (6, None)


def test_without_a_checkpoint_the_rollback_in_tokens_is_unknown_too():
    point = ResumePoint.of([summary(36, [32, 36], 32, tokens_per_step=8)])

    assert point is not None
    assert (point.rollback_steps, point.rollback_tokens) == (None, None)


def test_an_old_summary_without_its_step_falls_back_to_the_window_s_end():
    old = record(None, [21, 30], 21, {"step": 20, "location": None})
    del old["step"]

    point = ResumePoint.of([evidence_of(old)])

    assert point is not None
    assert (point.rollback_steps, point.exposure) == (None, (21, 30))


def test_no_report_with_a_resume_gives_no_point():
    assert ResumePoint.of([evidence_of({"kind": "report", "key": "report:3", "step": 3})]) is None
