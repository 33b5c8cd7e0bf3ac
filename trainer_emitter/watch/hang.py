"""The hang watchdog: progress marks on the training thread, a monitor thread that notices none
for `timeout` seconds, and evidence gathered over the rendezvous store before anything kills
the job.

Progress is a step (`progress`), a section entered or left (`section`), or a collective
completed (`CollectiveCounter`). Some sections may outlast the timeout and are no hang while
they run (`Section.exempt`): loading data, saving or loading a checkpoint, the first step's
compile. A rank in one of them makes the whole job's silence legitimate, for at most
`section_timeout` seconds; forward/backward is not exempt (DDP's all-reduce runs inside it).

When a rank has seen no progress for `timeout` it asks every rank for its state over the store
(`<prefix>requests` counts the requests, each rank answers under `<prefix><n>/<rank>`); each
rank's monitor thread answers within a poll, even while its training thread is stuck in a
collective. The asking rank waits `gather_seconds`, reads what came (a rank that gave nothing is
silent), and `localise` judges it. The first hang judged in the job is handed to `on_hang`, once
(`<prefix>reported`); the job's own timeout still ends it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from trainer_emitter.watch.localise import HangEvidence, RankState, localise
from trainer_emitter.watch.store import Store

log = logging.getLogger("trainer_emitter")

DEFAULT_TIMEOUT_SECONDS = 300.0
"""Five minutes: well under a process group's timeout (NCCL's default is ten)."""
DEFAULT_SECTION_TIMEOUT_SECONDS = 1800.0
DEFAULT_PREFIX = "sdc-watch/"


class Section(StrEnum):
    """The named parts of a step; the exempt ones may outlast the watchdog's timeout."""

    DATA_LOADING = "data_loading"
    FORWARD_BACKWARD = "forward_backward"
    CHECKPOINT_SAVE = "checkpoint_save"
    CHECKPOINT_LOAD = "checkpoint_load"
    COMPILE = "compile"
    """The first step's compile (torch.compile, CUDA graphs, autotuning)."""

    @property
    def exempt(self) -> bool:
        return self is not Section.FORWARD_BACKWARD


class CollectiveCounter:
    """This rank's count of collectives entered and completed (the same sequence on every rank
    of a data-parallel job), kept by the project itself so that gloo on CPU has it too."""

    def __init__(
        self,
        on_complete: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.entered = 0
        self.completed = 0
        self.name: str | None = None
        self.seconds = 0.0
        """Time spent inside collectives (the outermost, when one calls another): what the
        straggler scores leave out, since a fast rank waits there for a slow one."""
        self._on_complete = on_complete
        self._clock = clock
        self._depth = 0

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        self.entered += 1
        self.name = name
        self._depth += 1
        started = self._clock() if self._depth == 1 else None
        try:
            yield
        finally:
            self._depth -= 1
            if started is not None:
                self.seconds += self._clock() - started
            self.completed += 1
            self._on_complete()


_COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "broadcast",
    "gather",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
)


def wrap_collectives(counter: CollectiveCounter, module: Any = None) -> Callable[[], None]:
    """Count every collective of `torch.distributed` (or `module`) called through Python;
    returns the call that puts the originals back. An `async_op=True` call counts as completed
    when it returns its work handle. DDP's bucketed all-reduce runs in C++ and is not counted:
    its progress shows as steps and sections."""
    if module is None:
        import torch.distributed as module
    originals = {name: getattr(module, name) for name in _COLLECTIVES if hasattr(module, name)}

    def counted(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            with counter(name):
                return original(*args, **kwargs)

        call.__wrapped__ = original  # type: ignore[attr-defined]
        return call

    for name, original in originals.items():
        setattr(module, name, counted(name, original))

    def restore() -> None:
        for name, original in originals.items():
            setattr(module, name, original)

    return restore


class HangWatchdog:
    def __init__(
        self,
        store: Store,
        *,
        rank: int,
        world: int,
        instance_of: Mapping[int, str | None],
        on_hang: Callable[[HangEvidence], None],
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        section_timeout: float = DEFAULT_SECTION_TIMEOUT_SECONDS,
        poll: float | None = None,
        gather_seconds: float | None = None,
        prefix: str = DEFAULT_PREFIX,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not (timeout > 0 and section_timeout > 0):
            raise ValueError(
                f"watchdog timeouts must be positive (timeout {timeout!r}, "
                f"section_timeout {section_timeout!r})"
            )
        if not 0 <= rank < world:
            raise ValueError(f"rank {rank} is not one of the job's {world} ranks")
        self.store, self.rank, self.world = store, rank, world
        self.instance_of = dict(instance_of)
        self.timeout, self.section_timeout = float(timeout), float(section_timeout)
        self.poll = poll if poll is not None else min(max(timeout / 10, 0.05), 5.0)
        self.gather_seconds = gather_seconds if gather_seconds is not None else 3 * self.poll + 0.5
        self.prefix = prefix
        self.on_hang = on_hang
        self.clock = clock
        self.collective = CollectiveCounter(on_complete=self.progress)
        self.last_step: int | None = None
        self._last_progress = clock()
        self._section: tuple[Section, float] | None = None
        self._thread_id = threading.get_ident()
        self.verdicts: list[HangEvidence] = []
        """Every verdict this rank judged, hang or not (the newest 16)."""
        self._answered = 0
        self._asked_at: float | None = None
        self._stop = threading.Event()
        self._monitor: threading.Thread | None = None

    # the training thread

    def progress(self, step: int | None = None) -> None:
        """A progress mark: a step done (`step`), or any other sign the rank moves."""
        if step is not None:
            self.last_step = step
        self._last_progress = self.clock()

    @contextlib.contextmanager
    def section(self, name: Section | str) -> Iterator[None]:
        outer = self.enter(name)
        try:
            yield
        finally:
            self.leave(outer)

    def enter(self, name: Section | str) -> tuple[Section, float] | None:
        """Enter a section (progress); returns what `leave` restores (`section` does both)."""
        section = name if isinstance(name, Section) else Section(name)
        outer, now = self._section, self.clock()
        self._section = (section, now)
        self._last_progress = now
        return outer

    def leave(self, outer: tuple[Section, float] | None) -> None:
        self._section = outer
        self._last_progress = self.clock()

    # the monitor thread

    def start(self) -> HangWatchdog:
        if self._monitor is None:
            self._monitor = threading.Thread(
                target=self._run, name="sdc-hang-watchdog", daemon=True
            )
            self._monitor.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._monitor is not None:
            self._monitor.join(timeout=max(self.gather_seconds, self.poll) + 5)
            self._monitor = None

    def _run(self) -> None:
        while not self._stop.wait(self.poll):
            try:
                self.tick()
            except Exception:  # the watchdog must never take the job down
                log.exception("hang watchdog: a check failed; it goes on at the next poll")

    def tick(self) -> HangEvidence | None:
        """One poll: answer other ranks' requests, and ask for evidence when this rank has seen
        no progress for the timeout (at most once per timeout). Returns the verdict it judged."""
        self._answer()
        now = self.clock()
        if not self._stalled(now):
            return None
        if self._asked_at is not None and now - self._asked_at < self.timeout:
            return None
        self._asked_at = now
        return self._gather()

    def state(self) -> RankState:
        """This rank's state now, as it answers a request."""
        now = self.clock()
        section = self._section
        exempt = bool(section and section[0].exempt and now - section[1] < self.section_timeout)
        return RankState(
            rank=self.rank,
            entered=self.collective.entered,
            completed=self.collective.completed,
            collective=self.collective.name
            if self.collective.entered > self.collective.completed
            else None,
            section=section[0].value if section else None,
            seconds_since_progress=max(now - self._last_progress, 0.0),
            exempt=exempt,
            stack=self._stack(),
        )

    def _stalled(self, now: float) -> bool:
        state_section = self._section
        if state_section and state_section[0].exempt:
            return now - state_section[1] >= self.section_timeout
        return now - self._last_progress >= self.timeout

    def _stack(self) -> tuple[str, ...]:
        frame = sys._current_frames().get(self._thread_id)
        if frame is None:
            return ()
        return tuple(
            f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in traceback.extract_stack(frame)
        )

    def _answer(self) -> None:
        latest = self.store.add(f"{self.prefix}requests", 0)
        if latest <= self._answered:
            return
        answer = json.dumps(self.state().to_json())
        for request in range(max(self._answered + 1, latest - 3), latest + 1):
            self.store.set(f"{self.prefix}{request}/{self.rank}", answer)
        self._answered = latest

    def _gather(self) -> HangEvidence:
        request = self.store.add(f"{self.prefix}requests", 1)
        keys = {rank: f"{self.prefix}{request}/{rank}" for rank in range(self.world)}
        deadline = self.clock() + self.gather_seconds
        while True:
            self._answer()
            if self.store.check(list(keys.values())) or self.clock() >= deadline:
                break
            if self._stop.wait(min(self.poll, 0.1)):
                break
        states: dict[int, RankState] = {}
        for rank, key in keys.items():
            if self.store.check([key]):
                states[rank] = RankState.from_json(json.loads(self.store.get(key)))
        verdict = localise(states, self.world, self.instance_of, timeout=self.timeout)
        self.verdicts = [*self.verdicts[-15:], verdict]
        log.info(
            "hang watchdog: request %d on rank %d: %s (%s)",
            request,
            self.rank,
            "hang" if verdict.hung else "no hang",
            verdict.why,
        )
        if verdict.hung and self.store.add(f"{self.prefix}reported", 1) == 1:
            self.on_hang(verdict)
        return verdict
