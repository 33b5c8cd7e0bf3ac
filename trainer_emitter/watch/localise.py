"""From every rank's state at a hang to the ranks and the instance to blame. Pure: no store, no
clock, so each rule is tested on its own.

Two independent signals:
- `collective`: in each process group, the waiting collective is the highest sequence number
  some rank entered and has not completed; the group's ranks that did not enter it are missing
  there. A rank missing in more than one group is the source (the others missing somewhere wait
  on it in another group); otherwise every missing rank is named. Ranks that gave no state are
  silent. Named when every missing and silent rank is on one instance.
- `stack`: the ranks whose Python stack differs from the one all the others share (at least two
  of them). Named when those ranks are on one instance.
The hang is localised to an instance when every signal that names one names the same; otherwise
(ranks on several instances, or signals that disagree) it spans instances.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from trainer_emitter.contract import Check
from trainer_emitter.watch.recorder import DEFAULT_GROUP, GroupProgress

MAX_RANKS_SHOWN = 64
"""A report shows at most this many ranks' states: the named ones first, then one peer."""
MAX_STACKS_SHOWN = 8
"""Of the ranks shown, the first this many carry their stack (the event stays well under
EventBridge's 256 KB)."""
MAX_STACK_FRAMES = 24
"""The innermost frames of a stack that a report carries."""
MAX_FRAME_TEXT = 200
MAX_GROUPS = 64
"""The process groups of one rank's state that are read (the rest are left out)."""


class Signal(StrEnum):
    COLLECTIVE = "collective"
    STACK = "stack"


@dataclass(frozen=True)
class RankState:
    """What one rank says about itself when evidence is gathered."""

    rank: int
    entered: int
    """Collectives this rank entered (its own counter, from 1)."""
    completed: int
    collective: str | None
    """The name of the collective it is in, or None when it is in none."""
    section: str | None
    """The section it is in (`Section`), or None."""
    seconds_since_progress: float
    exempt: bool
    """It is in a section that may run longer than the watchdog's timeout, within its limit."""
    stack: tuple[str, ...]
    """The training thread's Python stack, outermost first, `file:line function` per frame."""
    groups: Mapping[str, GroupProgress] = field(default_factory=dict)
    """Progress per process group (torch's group name); empty: `entered` and `completed` are
    the default group's."""
    starting: bool = False
    """It has not finished its first step, within the first step's own timeout."""

    def progress(self) -> Mapping[str, GroupProgress]:
        """Progress per process group, the totals as the default group's where none is given."""
        if self.groups:
            return self.groups
        return {DEFAULT_GROUP: GroupProgress(self.entered, self.completed, self.collective)}

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "entered": self.entered,
            "completed": self.completed,
            "collective": self.collective,
            "section": self.section,
            "seconds_since_progress": round(self.seconds_since_progress, 3),
            "exempt": self.exempt,
            "stack": list(self.stack),
            "groups": {name: group.to_json() for name, group in self.groups.items()},
            "starting": self.starting,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RankState:
        return cls(
            rank=int(data["rank"]),
            entered=int(data["entered"]),
            completed=int(data["completed"]),
            collective=data.get("collective"),
            section=data.get("section"),
            seconds_since_progress=float(data["seconds_since_progress"]),
            exempt=bool(data.get("exempt")),
            stack=tuple(str(frame) for frame in data.get("stack") or ()),
            groups=dict(list(_groups(data.get("groups")).items())[:MAX_GROUPS]),
            starting=bool(data.get("starting")),
        )


@dataclass(frozen=True)
class HangEvidence:
    """The verdict on one gathering: is it a hang, and whom does it name."""

    hung: bool
    why: str
    waiting_seq: int | None = None
    waiting_name: str | None = None
    missing: tuple[int, ...] = ()
    silent: tuple[int, ...] = ()
    odd_stack: tuple[int, ...] = ()
    named_instances: tuple[str, ...] = ()
    localised_instance: str | None = None
    signals: tuple[Signal, ...] = ()
    states: Mapping[int, RankState] = field(default_factory=dict)

    @property
    def named(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.missing) | set(self.silent) | set(self.odd_stack)))

    def alarm(self, *, step: int | None, timeout: float) -> dict[str, Any]:
        """The alarm dict `report()` takes (check `hang`)."""
        shown = self._shown()
        return {
            "check": Check.HANG.value,
            "step": step,
            "suspect_window": None,
            "hang": {
                "timeout_s": timeout,
                "waiting_collective": (
                    None
                    if self.waiting_seq is None
                    else {"seq": self.waiting_seq, "name": self.waiting_name}
                ),
                "missing_ranks": list(self.missing),
                "silent_ranks": list(self.silent),
                "odd_stack_ranks": list(self.odd_stack),
                "named_instances": list(self.named_instances),
                "localised_instance": self.localised_instance,
                "signals": [s.value for s in self.signals],
                "ranks": [
                    self._rank_entry(rank, with_stack=i < MAX_STACKS_SHOWN)
                    for i, rank in enumerate(shown)
                ],
                "ranks_left_out": len(set(self.states) | set(self.silent)) - len(shown),
            },
        }

    def _shown(self) -> list[int]:
        named = list(self.named)
        peers = [rank for rank in sorted(self.states) if rank not in named]
        return (named + peers[:1])[:MAX_RANKS_SHOWN]

    def _rank_entry(self, rank: int, *, with_stack: bool) -> dict[str, Any]:
        state = self.states.get(rank)
        if state is None:
            return {
                "rank": rank,
                "entered": None,
                "completed": None,
                "section": None,
                "seconds_since_progress": None,
                "stack": None,
            }
        return {
            "rank": rank,
            "entered": state.entered,
            "completed": state.completed,
            "section": state.section,
            "seconds_since_progress": round(state.seconds_since_progress, 3),
            "stack": (
                [frame[:MAX_FRAME_TEXT] for frame in state.stack[-MAX_STACK_FRAMES:]]
                if with_stack
                else None
            ),
        }


def localise(
    states: Mapping[int, RankState],
    world: int,
    instance_of: Mapping[int, str | None],
    *,
    timeout: float,
) -> HangEvidence:
    """The verdict on the states the ranks gave (`states`; a rank of `world` not in it is
    silent). It is a hang only when no rank that answered made progress in the last half of
    `timeout` and none is in an exempt section (a checkpoint save, a slow loader, the first
    step's compile: the others waiting on it is no hang)."""
    silent = tuple(rank for rank in range(world) if rank not in states)
    starting = sorted(r for r, s in states.items() if s.starting)
    if starting:
        return HangEvidence(
            False,
            f"rank {_ranks(starting)} has not finished its first step",
            silent=silent,
            states=states,
        )
    busy = sorted(r for r, s in states.items() if s.exempt)
    if busy:
        return HangEvidence(
            False, f"rank {_ranks(busy)} in a long section", silent=silent, states=states
        )
    moving = sorted(r for r, s in states.items() if s.seconds_since_progress < timeout / 2)
    if moving:
        return HangEvidence(
            False, f"rank {_ranks(moving)} made progress lately", silent=silent, states=states
        )
    seq, name, missing = _missing(states)
    odd = _odd_stacks(states)
    named_by: dict[Signal, set[str | None]] = {}
    if missing or silent:
        named_by[Signal.COLLECTIVE] = {instance_of.get(r) for r in (*missing, *silent)}
    if odd:
        named_by[Signal.STACK] = {instance_of.get(r) for r in odd}
    single = {
        signal: next(iter(instances))
        for signal, instances in named_by.items()
        if len(instances) == 1 and None not in instances
    }
    agreed = set(single.values())
    localised = next(iter(agreed)) if len(agreed) == 1 and len(single) == len(named_by) else None
    named_instances = sorted(
        {i for instances in named_by.values() for i in instances if i is not None}
    )
    signals = tuple(s for s in Signal if localised is not None and single.get(s) == localised)
    why = (
        f"localised to {localised} by {' and '.join(signals)}"
        if localised
        else f"spans {len(named_instances)} instance(s)"
        if named_instances
        else "names no rank"
    )
    return HangEvidence(
        True,
        why,
        waiting_seq=seq,
        waiting_name=name,
        missing=missing,
        silent=silent,
        odd_stack=odd,
        named_instances=tuple(named_instances),
        localised_instance=localised,
        signals=signals,
        states=states,
    )


def _groups(raw: object) -> dict[str, GroupProgress]:
    """A state's groups as a rank sent them; a group that does not read is left out."""
    groups: dict[str, GroupProgress] = {}
    for name, group in raw.items() if isinstance(raw, Mapping) else ():
        try:
            groups[str(name)] = GroupProgress.from_json(group)
        except (ValueError, TypeError):
            continue
    return groups


def _missing(states: Mapping[int, RankState]) -> tuple[int | None, str | None, tuple[int, ...]]:
    """The waiting collective (sequence number, name) and the ranks missing from it: per process
    group, the ranks of the group (those that report it) behind the highest collective some rank
    of it waits in. A rank missing in more than one group is the source; if none is, every
    missing rank is named. The collective shown is the first group's that misses a named rank."""
    waits: list[tuple[str, int, str | None, tuple[int, ...]]] = []
    progress = {rank: state.progress() for rank, state in states.items()}
    for group in sorted({g for groups in progress.values() for g in groups}):
        members = {rank: groups[group] for rank, groups in progress.items() if group in groups}
        waiting = [p for p in members.values() if p.waiting]
        if not waiting:
            continue
        seq = max(p.entered for p in waiting)
        name = next(p.name for p in waiting if p.entered == seq)
        behind = tuple(sorted(rank for rank, p in members.items() if p.entered < seq))
        waits.append((group, seq, name, behind))
    groups_missing = Counter(rank for *_, behind in waits for rank in behind)
    sources = {rank for rank, count in groups_missing.items() if count > 1}
    missing = tuple(sorted(sources or groups_missing))
    shown = next((w for w in waits if set(w[3]) & set(missing)), waits[0] if waits else None)
    if shown is None:
        return None, None, missing
    return shown[1], shown[2], missing


def _odd_stacks(states: Mapping[int, RankState]) -> tuple[int, ...]:
    """Ranks whose stack differs from the one shared by all the others (two or more of them)."""
    counts = Counter(state.stack for state in states.values())
    if len(counts) < 2:
        return ()
    (common, shared), *rest = counts.most_common()
    if shared < 2 or (rest and rest[0][1] == shared):
        return ()
    return tuple(sorted(r for r, s in states.items() if s.stack != common))


def _ranks(ranks: Sequence[int]) -> str:
    shown = ", ".join(str(r) for r in ranks[:8])
    return shown + (f" and {len(ranks) - 8} more" if len(ranks) > 8 else "")
