"""Collective progress from the flight recorder, torch's own record of every collective each
process group ran (gloo and NCCL alike, DDP's C++ all-reduces included), read on demand when a
rank answers a request for evidence.

`read_recorder()` gives, per process group (torch's group name: "0" is the default group), the
sequence number of the last collective enqueued and of the last one completed, and the name of
the oldest one still running: from the dump's `pg_status` where the build writes it, else from
its `entries` (`collective_seq_id`; an entry is completed once `retired`, or in state
`completed`). None where the build has no recorder or it recorded nothing: the project's own
counter (`CollectiveCounter`) stands in.

The recorder keeps the last `TORCH_FR_BUFFER_SIZE` collectives (the older name
`TORCH_NCCL_TRACE_BUFFER_SIZE` still works); `enable_recorder()` sets it where the job left it
unset, before the first collective is recorded.
"""

from __future__ import annotations

import logging
import os
import pickle
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("trainer_emitter")

DEFAULT_GROUP = "0"
"""The name torch gives the default process group (`group_name`), and the group of a collective
counted without one."""
BUFFER_SIZE = 2000
"""Collectives the recorder keeps when the job sets no size of its own."""
_SIZE_SETTINGS = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")


@dataclass(frozen=True)
class GroupProgress:
    """One process group's progress on this rank."""

    entered: int
    """The sequence number of the last collective enqueued (0: none yet)."""
    completed: int
    """The sequence number of the last collective completed."""
    name: str | None = None
    """The oldest collective still running (`profiling_name`, e.g. `gloo:all_reduce`)."""

    @property
    def waiting(self) -> bool:
        return self.entered > self.completed

    def to_json(self) -> list[Any]:
        return [self.entered, self.completed, self.name]

    @classmethod
    def from_json(cls, data: Any) -> GroupProgress:
        entered, completed, name = data
        return cls(int(entered), int(completed), None if name is None else str(name))


def enable_recorder(environ: MutableMapping[str, str] | None = None) -> None:
    """Ask torch to keep a flight record (`TORCH_FR_BUFFER_SIZE`) unless the job set a size."""
    settings: MutableMapping[str, str] = os.environ if environ is None else environ
    if not any(settings.get(name) for name in _SIZE_SETTINGS):
        settings[_SIZE_SETTINGS[0]] = str(BUFFER_SIZE)


def read_recorder() -> dict[str, GroupProgress] | None:
    """This rank's progress per process group, or None where the recorder is missing or empty."""
    try:
        from torch._C import _distributed_c10d as c10d

        raw = c10d._dump_fr_trace(includeStackTraces=False)  # type: ignore[attr-defined]
    except Exception:  # no recorder in this build, or none enabled
        return None
    try:
        return progress_of(pickle.loads(raw))
    except Exception:
        log.exception("flight recorder: a dump could not be read; the watch's counter stands in")
        return None


def progress_of(dump: Mapping[str, Any]) -> dict[str, GroupProgress] | None:
    """Per-group progress from a flight recorder dump (pure: the dump comes in)."""
    entries = [e for e in dump.get("entries") or () if not e.get("is_p2p")]
    running: dict[str, tuple[int, str | None]] = {}
    from_entries: dict[str, list[int]] = {}
    for entry in entries:
        group = _group(entry)
        seq = int(entry.get("collective_seq_id") or 0)
        counts = from_entries.setdefault(group, [0, 0, 0])
        counts[0] = max(counts[0], seq)
        if entry.get("retired") or entry.get("state") == "completed":
            counts[1] = max(counts[1], seq)
        elif group not in running or seq < running[group][0]:
            running[group] = (seq, entry.get("profiling_name"))
    status = dump.get("pg_status") or {}
    progress: dict[str, GroupProgress] = {}
    for group in sorted(set(status) | set(from_entries)):
        name = running.get(group, (0, None))[1]
        if group in status:
            entered = max(int(status[group].get("last_enqueued_collective", 0)), 0)
            completed = max(int(status[group].get("last_completed_collective", 0)), 0)
        else:
            entered, completed, _ = from_entries[group]
            oldest = running.get(group)
            # the buffer may have dropped older entries: every one before the oldest running
            # entry is done
            completed = entered if oldest is None else oldest[0] - 1
        progress[str(group)] = GroupProgress(entered, min(completed, entered), name)
    return progress or None


def _group(entry: Mapping[str, Any]) -> str:
    group = entry.get("process_group")
    if isinstance(group, list | tuple) and group:
        return str(group[0])
    return str(entry.get("pg_id", 0))
