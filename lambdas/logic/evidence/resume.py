"""Which checkpoint a training job resumes from after an SDC alarm. Pure: one rule, no I/O.

The rule: resume from the newest checkpoint whose step is before the first step of the alarm's
suspect window and whose tags (with the alarm's own last passes) show its state was verified.
A checkpoint at step s holds the weights after step s's update; the driver writes it only after
step s's checks, tagged with the last audit pass and the last weight-check pass at that time
(with `check_on_checkpoint`, the default, `last_weight_check_pass == s`).

Two things can be wrong with a checkpoint, and each check covers one:

- Its weights are not what the majority of replicas held (one replica's optimizer step or memory
  went wrong). A weight check that passed at step t >= s vouches for them: under DDP each replica
  keeps its own weights and only gradients are exchanged, so once replicas differ they keep
  differing; agreement at t means agreement at s. Verified when the checkpoint's own
  `last_weight_check_pass`, or the alarm's, is at or after s.
- Its weights are the same everywhere but wrong, because a finite wrong gradient was all-reduced
  into every replica. Only the ring replay audit covers that, and only as far as the suspect
  windows say: a finite wrong value can have entered any step after the last audit that passed.
  Verified when the checkpoint's own `last_audit_pass`, or the alarm's, is at or after s.

Per check kind of the alarm (window [a, b], b the alarm's step):

- compute (non-finite local gradient or ring replay mismatch; step b was not applied): the
  window starts after the last audit pass, a = last_audit_pass + 1, so every checkpoint before a
  is audited through (s <= last_audit_pass); a checkpoint's own older `last_audit_pass` does not
  matter. Its weights must be verified. With no audit pass in the alarm (the window starts at the
  first step the checks saw), the checkpoint's own tag must show an audit at or after its step.
- reduced gradient (the all-reduced gradient of step b is non-finite, step b was not applied):
  the window is step b alone; every earlier step's reduced gradient was finite. Any checkpoint
  before b whose weights are verified; audits say nothing about the reduction.
- weights (a replica's weights differ after step b's update): the window starts after the last
  weight check pass, a = last_weight_check_pass + 1, so every checkpoint before a is vouched for
  by that pass. With no weight check pass in the alarm, its own tag must show one at or after
  its step.
- unknown check (a malformed report): both conditions, as for compute.

No candidate: the report says which step the resume point must precede and that none is known
(checkpoints before it whose tags do not show them verified are counted, never proposed). No
suspect window: nothing can be placed before it, so nothing is proposed.
"""

from __future__ import annotations

from collections.abc import Sequence

from sdc_remediation.lambdas.models.evidence import Resume
from sdc_remediation.lambdas.models.report import ReportCheckpoint, SdcReport
from trainer_emitter.contract import Check


def choose_resume(
    check: Check | None,
    window: tuple[int, int] | None,
    last_audit_pass: int | None,
    last_weight_check_pass: int | None,
    checkpoints: Sequence[ReportCheckpoint],
) -> Resume:
    """The checkpoint to resume from after an alarm of kind `check` with suspect window `window`
    and the alarm's last passes (see the module docstring for the rule and why)."""
    if window is None:
        return Resume(None, None, known=len(checkpoints))
    first = window[0]
    before = [c for c in checkpoints if c.step < first]
    verified = [c for c in before if _verified(c, check, last_audit_pass, last_weight_check_pass)]
    unverified = tuple(sorted({c.step for c in before if c not in verified}))
    if not verified:
        return Resume(None, first, unverified, len(checkpoints))
    newest = max(verified, key=lambda c: (c.step, c.location is not None))
    return Resume(newest, first, unverified, len(checkpoints))


def resume_of(report: SdcReport) -> Resume:
    return choose_resume(
        report.check,
        report.suspect_window,
        report.last_audit_pass,
        report.last_weight_check_pass,
        report.checkpoints,
    )


def _verified(
    checkpoint: ReportCheckpoint,
    check: Check | None,
    last_audit_pass: int | None,
    last_weight_check_pass: int | None,
) -> bool:
    if not _weights_verified(checkpoint, last_weight_check_pass):
        return False
    if check in (Check.REDUCED_GRADIENT, Check.WEIGHTS):
        return True
    return _audited(checkpoint, last_audit_pass)  # compute, or a check the report did not name


def _weights_verified(checkpoint: ReportCheckpoint, alarm_pass: int | None) -> bool:
    return _through(checkpoint.last_weight_check_pass, alarm_pass) >= checkpoint.step


def _audited(checkpoint: ReportCheckpoint, alarm_pass: int | None) -> bool:
    return _through(checkpoint.last_audit_pass, alarm_pass) >= checkpoint.step


def _through(own: int | None, alarm: int | None) -> int:
    """The latest step a passing check vouches for; -1 when none passed."""
    return max((p for p in (own, alarm) if p is not None), default=-1)
