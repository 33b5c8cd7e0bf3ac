"""The alarm dicts the checks return, in exactly the shape `report()` takes. Pure: no torch.

Suspect windows: a compute alarm reaches back to the step after the last audit that passed (a
finite wrong value can have entered any step since); a weights alarm to the step after the last
weight check that passed; a reduced-gradient alarm is about this step alone. With no pass yet the
window starts at the first step these checks saw.

Checkpoints: an alarm also carries the last few checkpoints the job saved or knows of
(`checkpoints`, oldest first, each with its step, the tags saved with it and its location when
known), so the approval card can name the one to resume from. The key is left out when none is
known; a loop without the driver may pass the same key to `report()` by hand.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeGuard

from trainer_emitter.contract import Check

TAG_LAST_AUDIT_PASS = "last_audit_pass"
TAG_LAST_WEIGHT_CHECK_PASS = "last_weight_check_pass"

KEPT_CHECKPOINTS: Final = 8
"""How many checkpoints an alarm carries at most: the newest steps (the report event is small)."""


def checkpoint_entry(
    step: int, tags: Mapping[str, Any] | None = None, location: str | None = None
) -> dict[str, Any]:
    """One entry of an alarm's `checkpoints`: the step, the tags saved with it, its location.
    Raises ValueError for a step or tag that is no step number, or a location that is no string:
    checkpoints are configuration the job gives, checked early."""
    if not _is_step(step):
        raise ValueError(f"a checkpoint step must be an integer >= 0, not {step!r}")
    tags = tags or {}
    entry: dict[str, Any] = {"step": step}
    for key in (TAG_LAST_AUDIT_PASS, TAG_LAST_WEIGHT_CHECK_PASS):
        value = tags.get(key)
        if value is not None and not _is_step(value):
            raise ValueError(f"checkpoint {step}: tag {key} must be a step or None, not {value!r}")
        entry[key] = value
    if location is not None and not isinstance(location, str):
        raise ValueError(f"checkpoint {step}: location must be a string, not {location!r}")
    entry["location"] = location or None
    return entry


def location_of(saved: object) -> str | None:
    """What `save(step, tags)` returned, as a checkpoint location: a string or path, else None."""
    if isinstance(saved, str | os.PathLike):
        text = os.fspath(saved)
        return text if isinstance(text, str) and text else None
    return None


@dataclass
class Checkpoints:
    """The newest checkpoints the job saved or knows of, at most `limit`, one per step."""

    limit: int = KEPT_CHECKPOINTS
    _by_step: dict[int, dict[str, Any]] = field(default_factory=dict)

    def add(
        self, step: int, tags: Mapping[str, Any] | None = None, location: str | None = None
    ) -> dict[str, Any]:
        entry = checkpoint_entry(step, tags, location)
        self._by_step[step] = entry
        for old in sorted(self._by_step)[: max(0, len(self._by_step) - self.limit)]:
            del self._by_step[old]
        return dict(entry)

    def extend(self, entries: Iterable[Mapping[str, Any]]) -> None:
        """Checkpoints known from before (a restarted job: the one it resumed from), each a
        mapping like an alarm's entry: `{"step": 1000, "last_audit_pass": 1000, ...}`."""
        for item in entries:
            if not isinstance(item, Mapping):
                raise ValueError(f"a known checkpoint must be a mapping, not {item!r}")
            if "step" not in item:
                raise ValueError(f"a known checkpoint needs its step: {dict(item)!r}")
            self.add(item["step"], item, item.get("location"))

    def entries(self) -> list[dict[str, Any]]:
        """Oldest first, as an alarm carries them."""
        return [dict(self._by_step[step]) for step in sorted(self._by_step)]


@dataclass
class Passes:
    """The last steps at which each check passed: the checkpoint tags and the suspect windows."""

    first_step: int | None = None
    last_audit_pass: int | None = None
    last_weight_check_pass: int | None = None
    checkpoints: Checkpoints = field(default_factory=Checkpoints)

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

    def saved(self, step: int, location: str | None = None) -> dict[str, Any]:
        """Remember the checkpoint saved at `step` now, tagged with the passes as they stand."""
        return self.checkpoints.add(step, self.tags(), location)

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
            **self._known_checkpoints(),
        }

    def reduced_gradient(self, step: int) -> dict[str, Any]:
        """The reduced (all-reduced, clipped) gradient is non-finite while no rank's own was."""
        return {
            "step": step,
            "check": Check.REDUCED_GRADIENT.value,
            "suspect_window": [step, step],
            **self.tags(),
            **self._known_checkpoints(),
        }

    def weights(
        self,
        step: int | None,
        suspects: Sequence[int] | None,
        replicas: Sequence[int] | None = None,
    ) -> dict[str, Any]:
        """Check 3: `suspects` None when no strict majority of replicas agrees. `replicas`: the
        global ranks whose copies were compared when they are not every rank of the job (a
        group the caller passed); the key is left out otherwise, and a report then puts every
        rank in question when nobody is named. `step` None: a comparison whose caller named no
        step; the alarm then says the step and the window are unknown rather than guess them,
        and the report lists both as errors."""
        alarm: dict[str, Any] = {
            "step": step,
            "check": Check.WEIGHTS.value,
            "suspects": None if suspects is None else sorted(suspects),
        }
        if replicas is not None:
            alarm["replicas"] = sorted(replicas)
        return {
            **alarm,
            "suspect_window": None
            if step is None
            else self._since(self.last_weight_check_pass, step),
            **self.tags(),
            **self._known_checkpoints(),
        }

    def _known_checkpoints(self) -> dict[str, Any]:
        entries = self.checkpoints.entries()
        return {"checkpoints": entries} if entries else {}

    def _since(self, last_pass: int | None, step: int) -> list[int]:
        if last_pass is not None and last_pass < step:
            return [last_pass + 1, step]
        first = self.first_step if self.first_step is not None else step
        return [min(first, step), step]


def _step_or_none(value: object) -> int | None:
    return value if _is_step(value) else None


def _is_step(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
