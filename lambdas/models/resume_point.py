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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard


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
    def of(cls, reports: Iterable[Mapping[str, Any]]) -> ResumePoint | None:
        """The resume point of these stored report summaries; None when none carries one."""
        found = [r for r in reports if isinstance(r.get("resume"), Mapping)]
        if not found:
            return None
        if any(not _is_step(r["resume"].get("before_step")) for r in found):
            return cls(None, None, None, None)
        report = min(found, key=lambda r: r["resume"]["before_step"])
        checkpoint = report["resume"].get("checkpoint")
        checkpoint = checkpoint if isinstance(checkpoint, Mapping) else {}
        window = report.get("suspect_window")
        location = checkpoint.get("location")
        return cls(
            checkpoint_step=s if _is_step(s := checkpoint.get("step")) else None,
            location=location if isinstance(location, str) else None,
            window=(
                (window[0], window[1])
                if isinstance(window, list | tuple)
                and len(window) == 2
                and all(_is_step(v) for v in window)
                else None
            ),
            detected_step=s if _is_step(s := report.get("step")) else None,
            tokens_per_step=t if _is_step(t := report.get("tokens_per_step")) and t > 0 else None,
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
