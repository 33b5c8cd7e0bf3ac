"""Straggler scores (as NVIDIA's resiliency extension defines them): score = reference median
time / this rank's median time, in 0..1.

- relative: the reference is the fastest rank's median in the same window;
- individual: the reference is this rank's own best (lowest) median of any window so far.

A rank's time per step is its busy time: the step's wall time less its time inside collectives,
where a fast rank waits for a slow one (on GPUs the NCCL kernels are left out for the same
reason). A rank is below the threshold when its relative score is: a slowdown of the whole job
lowers every individual score and is no straggler. A rank below the threshold for
`windows` consecutive windows is flagged, once, until it recovers.

Pure: the windows' medians come in, the scores go out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainer_emitter.contract import Check

DEFAULT_THRESHOLD = 0.7
DEFAULT_WINDOWS = 3
DEFAULT_WINDOW_STEPS = 100
MAX_SCORES_SHOWN = 256
MAX_SECTIONS_SHOWN = 16


@dataclass(frozen=True)
class RankTimes:
    """One rank's medians over one window, in seconds."""

    step: float
    sections: Mapping[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "sections": dict(self.sections)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RankTimes:
        return cls(
            step=float(data["step"]),
            sections={str(k): float(v) for k, v in (data.get("sections") or {}).items()},
        )


@dataclass(frozen=True)
class WindowScores:
    window: int
    times: Mapping[int, RankTimes]
    relative: Mapping[int, float]
    individual: Mapping[int, float]
    section_scores: Mapping[int, Mapping[str, tuple[float, float]]]
    """rank → section → (relative, individual)."""
    consecutive: Mapping[int, int]
    """rank → windows in a row below the threshold, this one included."""
    flagged: tuple[int, ...]
    """Ranks that reached `windows` consecutive windows below the threshold in this window."""

    def alarm(
        self,
        *,
        step: int | None,
        window_steps: int,
        threshold: float,
        windows: int,
        instance_of: Mapping[int, str | None],
    ) -> dict[str, Any]:
        """The alarm dict `report()` takes (check `straggler`): the flagged ranks first, then
        the slowest others."""
        order = sorted(self.times, key=lambda r: (r not in self.flagged, self.relative[r], r))
        shown = order[:MAX_SCORES_SHOWN]
        named = sorted({i for r in self.flagged if (i := instance_of.get(r)) is not None})
        return {
            "check": Check.STRAGGLER.value,
            "step": step,
            "suspect_window": None,
            "straggler": {
                "window": self.window,
                "window_steps": window_steps,
                "threshold": threshold,
                "windows_required": windows,
                "flagged": list(self.flagged),
                "named_instances": named,
                "scores": [self._entry(rank) for rank in shown],
                "ranks_left_out": len(order) - len(shown),
            },
        }

    def _entry(self, rank: int) -> dict[str, Any]:
        sections = self.times[rank].sections
        return {
            "rank": rank,
            "step_seconds": _round(self.times[rank].step),
            "relative": _round(self.relative[rank]),
            "individual": _round(self.individual[rank]),
            "consecutive": self.consecutive.get(rank, 0),
            "sections": [
                {
                    "name": name,
                    "seconds": _round(sections[name]),
                    "relative": _round(self.section_scores[rank][name][0]),
                    "individual": _round(self.section_scores[rank][name][1]),
                }
                for name in sorted(sections)[:MAX_SECTIONS_SHOWN]
            ],
        }


class StragglerScores:
    """Scores windows one after another, remembering each rank's best and its streak."""

    def __init__(
        self, threshold: float = DEFAULT_THRESHOLD, windows: int = DEFAULT_WINDOWS
    ) -> None:
        if not 0 < threshold <= 1:
            raise ValueError(f"straggler threshold {threshold!r} must be in (0, 1]")
        if windows < 1:
            raise ValueError(f"straggler windows {windows!r} must be at least 1")
        self.threshold, self.windows = threshold, windows
        self._best: dict[int, float] = {}
        self._best_section: dict[tuple[int, str], float] = {}
        self._streak: dict[int, int] = {}

    def score(self, window: int, times: Mapping[int, RankTimes]) -> WindowScores:
        fastest = min((t.step for t in times.values()), default=0.0)
        fastest_section: dict[str, float] = {}
        for t in times.values():
            for name, seconds in t.sections.items():
                fastest_section[name] = min(fastest_section.get(name, seconds), seconds)
        relative: dict[int, float] = {}
        individual: dict[int, float] = {}
        sections: dict[int, dict[str, tuple[float, float]]] = {}
        flagged: list[int] = []
        for rank, t in times.items():
            self._best[rank] = min(self._best.get(rank, t.step), t.step)
            relative[rank] = _score(fastest, t.step)
            individual[rank] = _score(self._best[rank], t.step)
            sections[rank] = {}
            for name, seconds in t.sections.items():
                key = (rank, name)
                self._best_section[key] = min(self._best_section.get(key, seconds), seconds)
                sections[rank][name] = (
                    _score(fastest_section[name], seconds),
                    _score(self._best_section[key], seconds),
                )
            if relative[rank] < self.threshold:
                self._streak[rank] = self._streak.get(rank, 0) + 1
                if self._streak[rank] == self.windows:
                    flagged.append(rank)
            else:
                self._streak[rank] = 0
        return WindowScores(
            window=window,
            times=dict(times),
            relative=relative,
            individual=individual,
            section_scores=sections,
            consecutive={rank: self._streak.get(rank, 0) for rank in times},
            flagged=tuple(sorted(flagged)),
        )


def _score(reference: float, seconds: float) -> float:
    if seconds <= 0:
        return 1.0
    return min(max(reference / seconds, 0.0), 1.0)


def _round(value: float) -> float:
    return round(value, 6)
