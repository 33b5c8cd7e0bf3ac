"""The checkpoint to resume from, the rollback and the exposure window, read from the incident's
stored report summaries (each holds the `resume` that `sdc_remediation.lambdas.logic.evidence.resume` chose when
the report arrived). Nothing is judged again here: the card, `sdc show` and the lifecycle event
all word this one reading of the record.

Of several reports, the one whose suspect window starts first decides: a checkpoint before it
is before every other window too.

- rollback: the steps the job trains again, from the checkpoint's step to the alarm's step
  (detection); unknown without a checkpoint. In tokens too when that report carries the job's
  tokens per step (global batch size x sequence length): steps x tokens per step; reports
  without it (older emitters, or a job that did not give it) leave the token figure unknown.
- exposure window: the steps trained between the suspect window's start and detection
  (`[window start, alarm step]`, both counted): the training a corruption may have reached.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeGuard

from sdc_remediation.lambdas.models.evidence import ReportEvidence


@dataclass(frozen=True, slots=True)
class ResumePoint:
    checkpoint_step: int | None
    """None: no verified checkpoint before the window is known (or no window)."""
    location: str | None
    window: tuple[int, int] | None
    """The suspect window of the report that decides; None: a report has none."""
    detected_step: int | None
    """The step of that report's alarm."""
    tokens_per_step: int | None = None
    """That report's tokens per step; None when it carries none."""

    @property
    def rollback_steps(self) -> int | None:
        if self.checkpoint_step is None or self.detected_step is None:
            return None
        return max(self.detected_step - self.checkpoint_step, 0)

    @property
    def rollback_tokens(self) -> int | None:
        steps = self.rollback_steps
        if steps is None or self.tokens_per_step is None:
            return None
        return steps * self.tokens_per_step

    @property
    def exposure(self) -> tuple[int, int] | None:
        """`(first, last)` steps trained between the window's start and detection."""
        if self.window is None:
            return None
        last = self.detected_step if self.detected_step is not None else self.window[1]
        return (self.window[0], max(last, self.window[0]))

    @property
    def exposure_steps(self) -> int | None:
        exposure = self.exposure
        return None if exposure is None else exposure[1] - exposure[0] + 1

    @classmethod
    def of(cls, reports: Iterable[ReportEvidence]) -> ResumePoint | None:
        """The resume point of these report summaries; None when none carries one."""
        found = [(r, r.resume) for r in reports if r.resume is not None]
        if not found:
            return None
        placed = [(resume.before_step, r, resume) for r, resume in found]
        if any(before is None for before, _, _ in placed):
            return cls(None, None, None, None)
        _, report, resume = min(placed, key=lambda p: p[0] or 0)
        checkpoint = resume.checkpoint
        tokens = report.tokens_per_step
        return cls(
            checkpoint_step=checkpoint.step if checkpoint else None,
            location=checkpoint.location if checkpoint else None,
            window=report.suspect_window,
            detected_step=report.step,
            tokens_per_step=tokens if tokens is not None and tokens > 0 else None,
        )

    def to_event(self) -> dict[str, Any]:
        """The lifecycle event's `resume`."""
        exposure = self.exposure
        return {
            "checkpoint": (
                None
                if self.checkpoint_step is None
                else {"step": self.checkpoint_step, "location": self.location}
            ),
            "detected_step": self.detected_step,
            "rollback_steps": self.rollback_steps,
            "tokens_per_step": self.tokens_per_step,
            "rollback_tokens": self.rollback_tokens,
            "exposure": (
                None
                if exposure is None
                else {"first": exposure[0], "last": exposure[1], "steps": self.exposure_steps}
            ),
        }


def _is_step(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
