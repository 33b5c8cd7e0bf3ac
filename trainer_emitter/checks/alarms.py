"""The alarm dicts the checks return, in exactly the shape `report()` takes. Pure: no torch.

Suspect windows: a compute alarm reaches back to the step after the last audit that passed (a
finite wrong value can have entered any step since); a weights alarm to the step after the last
weight check that passed; a reduced-gradient alarm is about this step alone. With no pass yet the
window starts at the first step these checks saw.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainer_emitter.contract import Check

TAG_LAST_AUDIT_PASS = "last_audit_pass"
TAG_LAST_WEIGHT_CHECK_PASS = "last_weight_check_pass"


@dataclass
class Passes:
    """The last steps at which each check passed: the checkpoint tags and the suspect windows."""

    first_step: int | None = None
    last_audit_pass: int | None = None
    last_weight_check_pass: int | None = None

    @classmethod
    def from_tags(cls, tags: Mapping[str, Any] | None) -> Passes:
        """Resume from the tags of the checkpoint a job restarts from."""
        tags = tags or {}
        return cls(
            last_audit_pass=_step_or_none(tags.get(TAG_LAST_AUDIT_PASS)),
            last_weight_check_pass=_step_or_none(tags.get(TAG_LAST_WEIGHT_CHECK_PASS)),
        )

    def saw(self, step: int) -> None:
        if self.first_step is None:
            self.first_step = step

    def tags(self) -> dict[str, int | None]:
        return {
            TAG_LAST_AUDIT_PASS: self.last_audit_pass,
            TAG_LAST_WEIGHT_CHECK_PASS: self.last_weight_check_pass,
        }

    def compute(
        self,
        step: int,
        *,
        nonfinite: Sequence[int],
        mismatched_pairs: Sequence[Sequence[int]],
        culprits: Sequence[int],
        verdicts: Sequence[Mapping[str, Any]],
    ) -> dict[str, Any]:
        """Check 1 (non-finite local gradients) and check 2 (ring replay)."""
        return {
            "step": step,
            "check": Check.COMPUTE.value,
            "nonfinite": sorted(nonfinite),
            "mismatched_pairs": [list(pair) for pair in mismatched_pairs],
            "culprits": sorted(culprits),
            "verdicts": [dict(v) for v in verdicts],
            "suspect_window": self._since(self.last_audit_pass, step),
            **self.tags(),
        }

    def reduced_gradient(self, step: int) -> dict[str, Any]:
        """The reduced (all-reduced, clipped) gradient is non-finite while no rank's own was."""
        return {
            "step": step,
            "check": Check.REDUCED_GRADIENT.value,
            "suspect_window": [step, step],
            **self.tags(),
        }

    def weights(self, step: int, suspects: Sequence[int] | None) -> dict[str, Any]:
        """Check 3: `suspects` None when no strict majority of replicas agrees."""
        return {
            "step": step,
            "check": Check.WEIGHTS.value,
            "suspects": None if suspects is None else sorted(suspects),
            "suspect_window": self._since(self.last_weight_check_pass, step),
            **self.tags(),
        }

    def _since(self, last_pass: int | None, step: int) -> list[int]:
        if last_pass is not None and last_pass < step:
            return [last_pass + 1, step]
        first = self.first_step if self.first_step is not None else step
        return [min(first, step), step]


def _step_or_none(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None
