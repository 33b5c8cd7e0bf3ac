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
silent), and `localise` judges it. The first hang judged in the job that names a rank is handed
to `on_hang`, once (`<prefix>reported`); a hang that names none is handed on once too, under a
token of its own (`<prefix>reported-unnamed`), so that it never stands in the way of a later
localised one. The job's own timeout still ends it.

No false start: until this rank's first step is done (`progress(step)`), it judges nothing
before `first_step_timeout` (imports, building the model, the first compile), and a rank still in
its first step within that time makes the job's silence legitimate to the others.

Collective progress comes from torch's flight recorder where the build has one (`recorder`,
one path for gloo and NCCL, per process group), else from the watch's own `CollectiveCounter`.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import json
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from enum import StrEnum
from pathlib import Path
from types import FrameType
from typing import Any

from trainer_emitter.watch.localise import HangEvidence, RankState, localise
from trainer_emitter.watch.recorder import DEFAULT_GROUP, GroupProgress
from trainer_emitter.watch.store import Store

log = logging.getLogger("trainer_emitter")

DEFAULT_TIMEOUT_SECONDS = 300.0
"""Five minutes: well under a process group's timeout (NCCL's default is ten)."""
DEFAULT_SECTION_TIMEOUT_SECONDS = 1800.0
DEFAULT_FIRST_STEP_TIMEOUT_SECONDS = 1800.0
"""Thirty minutes for imports, building the model and the first compile."""
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
    """This rank's count of collectives entered and completed, per process group (the same
    sequence on every rank of a group), kept by the project itself: the fallback where the
    flight recorder is missing, and the watch's measure of time spent waiting in collectives.

    A collective is entered when it is issued and completed when its work completes: an
    asynchronous one (`issue`) completes when its future does (on gloo that is the work done; on
    NCCL the future completes at enqueue, which is why the recorder is preferred there).
    Thread-safe: completions arrive on the backend's threads."""

    def __init__(
        self,
        on_complete: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.entered = 0
        self.completed = 0
        self.name: str | None = None
        self.groups: dict[str, list[int]] = {}
        """group name → [entered, completed]."""
        self._on_complete = on_complete
        self._clock = clock
        self._lock = threading.Lock()
        self._in_flight = 0
        self._since = 0.0
        self._waited = 0.0
        self._local = threading.local()

    @property
    def seconds(self) -> float:
        """Time with at least one collective in flight (issued, not completed), this moment
        included: what the straggler scores leave out of busy time, since a fast rank waits
        there for a slow one."""
        with self._lock:
            if self._in_flight:
                return self._waited + self._clock() - self._since
            return self._waited

    def issue(self, name: str, group: str | None = None) -> Callable[..., None]:
        """A collective issued; returns the call that marks it completed (once, from any
        thread)."""
        group = group or DEFAULT_GROUP
        with self._lock:
            self.entered += 1
            self.name = name
            counts = self.groups.setdefault(group, [0, 0])
            counts[0] += 1
            if self._in_flight == 0:
                self._since = self._clock()
            self._in_flight += 1
        done = [False]

        def complete(*_: Any) -> None:
            with self._lock:
                if done[0]:
                    return
                done[0] = True
                self.completed += 1
                counts[1] += 1
                self._in_flight -= 1
                if self._in_flight == 0:
                    self._waited += self._clock() - self._since
            self._on_complete()

        return complete

    @contextlib.contextmanager
    def __call__(self, name: str, group: str | None = None) -> Iterator[None]:
        """Count a synchronous collective: completed when the block ends."""
        complete = self.issue(name, group)
        try:
            with self.outermost():
                yield
        finally:
            complete()

    @contextlib.contextmanager
    def outermost(self) -> Iterator[bool]:
        """True when no counted collective is already running on this thread (one collective
        calling another, or a DDP hook calling `all_reduce`, counts once)."""
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        try:
            yield depth == 0
        finally:
            self._local.depth = depth

    def add_wait(self, seconds: float) -> None:
        """Time spent waiting on collectives measured elsewhere (`BackwardTail`)."""
        with self._lock:
            self._waited += max(seconds, 0.0)

    def counts(self) -> dict[str, tuple[int, int]]:
        with self._lock:
            return {group: (c[0], c[1]) for group, c in self.groups.items()}

    def progress(self) -> dict[str, GroupProgress]:
        """Progress per process group (the default group alone before any collective); a group
        still waiting carries the name of the collective entered last."""
        with self._lock:
            name = self.name
            groups = {group: (c[0], c[1]) for group, c in self.groups.items()}
        return {
            group: GroupProgress(entered, completed, name if entered > completed else None)
            for group, (entered, completed) in (groups or {DEFAULT_GROUP: (0, 0)}).items()
        }


_COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_single",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "broadcast",
    "gather",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "reduce_scatter_single",
    "scatter",
)


def group_name(group: Any) -> str:
    """The name torch gives a process group (`group_name`), the default group for None."""
    if group is None:
        return DEFAULT_GROUP
    name = getattr(group, "group_name", None)
    return str(name) if name else DEFAULT_GROUP


def wrap_collectives(counter: CollectiveCounter, module: Any = None) -> Callable[[], None]:
    """Count every collective of `torch.distributed` (or `module`) called through Python, in
    its process group; returns the call that puts the originals back. An `async_op=True` call
    completes when its work's future does (FSDP2's gathers and reductions, and DDP's all-reduce
    once `ddp_comm_hook` routes it through Python); a work without a future counts as completed
    when it is returned."""
    if module is None:
        import torch.distributed as module
    originals = {name: getattr(module, name) for name in _COLLECTIVES if hasattr(module, name)}

    def counted(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        try:
            parameters = list(inspect.signature(original).parameters)
        except (TypeError, ValueError):
            parameters = []
        at = parameters.index("group") if "group" in parameters else None

        def call(*args: Any, **kwargs: Any) -> Any:
            group = kwargs.get("group", args[at] if at is not None and len(args) > at else None)
            return _count_outermost(
                counter, name, group, lambda: original(*args, **kwargs), _complete_with
            )

        call.__wrapped__ = original  # type: ignore[attr-defined]
        return call

    for name, original in originals.items():
        setattr(module, name, counted(name, original))

    def restore() -> None:
        for name, original in originals.items():
            setattr(module, name, original)

    return restore


def _count_outermost(
    counter: CollectiveCounter,
    name: str,
    group: Any,
    call: Callable[[], Any],
    complete_with: Callable[[Any, Callable[..., None]], None],
) -> Any:
    """Run `call`, a collective `name` in process group `group`, counted from issue to the
    completion `complete_with(result, complete)` arranges (completed at once if `call` raises);
    uncounted when a counted collective already runs on this thread, which counts for both."""
    with counter.outermost() as outermost:
        if not outermost:
            return call()
        complete = counter.issue(name, group_name(group))
        try:
            result = call()
        except BaseException:
            complete()
            raise
    complete_with(result, complete)
    return result


def _complete_with(work: Any, complete: Callable[..., None]) -> None:
    """Mark a collective completed when its work's future completes (now, for a synchronous
    call, or for a work without a future)."""
    get_future = getattr(work, "get_future", None)
    if get_future is None:
        complete()
        return
    try:
        get_future().add_done_callback(complete)
    except Exception:  # a backend without futures: completed as returned
        complete()


class BackwardTail:
    """The tail of each backward pass, from the last gradient accumulated to the end of the
    pass, as time waiting in collectives: DDP's reducer waits there for the all-reduces of its
    last buckets, which end when the slowest rank's arrive. DDP's own C++ path stays (no
    communication hook, no pass of a hook's own over the buckets).

    A hook on every parameter notes when its gradient is accumulated; the first of a pass queues
    an autograd callback that queues another, which runs after every callback the pass queued,
    the reducer's wait among them."""

    def __init__(self, counter: CollectiveCounter, clock: Callable[[], float] = time.perf_counter):
        from torch.autograd import Variable

        self._counter, self._clock = counter, clock
        self._engine = Variable._execution_engine
        self._last = 0.0
        self._queued = False
        self._handles: list[Any] = []

    def attach(self, module: Any) -> BackwardTail:
        for parameter in module.parameters():
            if parameter.requires_grad:
                self._handles.append(parameter.register_post_accumulate_grad_hook(self._ready))
        return self

    def detach(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _ready(self, _: Any) -> None:
        self._last = self._clock()
        if not self._queued:
            self._queued = True
            self._engine.queue_callback(self._after_the_pass_s_callbacks)

    def _after_the_pass_s_callbacks(self) -> None:
        self._engine.queue_callback(self._tail)

    def _tail(self) -> None:
        self._queued = False
        self._counter.add_wait(self._clock() - self._last)


def ddp_comm_hook(
    counter: CollectiveCounter, hook: Callable[[Any, Any], Any] | None = None
) -> Callable[[Any, Any], Any]:
    """A DDP communication hook (`model.register_comm_hook(state, hook)`) that counts every
    gradient bucket's collective from issue to completion, around `hook` (default: torch's
    `allreduce_hook`, what DDP does without one). Collectives the hook calls through
    `torch.distributed` count once."""
    if hook is None:
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        hook = allreduce_hook

    def counted(state: Any, bucket: Any) -> Any:
        return _count_outermost(
            counter,
            "ddp:all_reduce",
            state,
            lambda: hook(state, bucket),
            lambda future, complete: future.add_done_callback(complete),
        )

    counted.__wrapped__ = hook  # type: ignore[attr-defined]
    return counted


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
        first_step_timeout: float | None = None,
        poll: float | None = None,
        gather_seconds: float | None = None,
        prefix: str = DEFAULT_PREFIX,
        clock: Callable[[], float] = time.monotonic,
        recorder: Callable[[], Mapping[str, GroupProgress] | None] | None = None,
    ) -> None:
        if first_step_timeout is None:
            first_step_timeout = max(DEFAULT_FIRST_STEP_TIMEOUT_SECONDS, timeout)
        if not (timeout > 0 and section_timeout > 0):
            raise ValueError(
                f"watchdog timeouts must be positive (timeout {timeout!r}, "
                f"section_timeout {section_timeout!r})"
            )
        if not first_step_timeout >= timeout:
            raise ValueError(
                f"first_step_timeout {first_step_timeout!r} must be at least the timeout "
                f"{timeout!r}: the first step (imports, compile) is the longest"
            )
        if not 0 <= rank < world:
            raise ValueError(f"rank {rank} is not one of the job's {world} ranks")
        self.store, self.rank, self.world = store, rank, world
        self.instance_of = dict(instance_of)
        self.timeout, self.section_timeout = float(timeout), float(section_timeout)
        self.first_step_timeout = float(first_step_timeout)
        self.recorder = recorder
        self.poll = poll if poll is not None else min(max(timeout / 10, 0.05), 5.0)
        self.gather_seconds = gather_seconds if gather_seconds is not None else 3 * self.poll + 0.5
        self.prefix = prefix
        self.on_hang = on_hang
        self.clock = clock
        self.collective = CollectiveCounter(on_complete=self.progress)
        self.last_step: int | None = None
        self._started = self._last_progress = clock()
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
        groups = self.groups()
        waiting = [g for g in groups.values() if g.waiting]
        return RankState(
            rank=self.rank,
            entered=sum(g.entered for g in groups.values()),
            completed=sum(g.completed for g in groups.values()),
            collective=waiting[0].name if waiting else None,
            section=section[0].value if section else None,
            seconds_since_progress=max(now - self._last_progress, 0.0),
            exempt=exempt,
            stack=self._stack(),
            groups=groups,
            starting=self._starting(now),
        )

    def groups(self) -> dict[str, GroupProgress]:
        """This rank's progress per process group: the flight recorder's where it has one, the
        watch's own counter's otherwise."""
        recorded = self.recorder() if self.recorder is not None else None
        if recorded:
            return dict(recorded)
        return self.collective.progress()

    def _starting(self, now: float) -> bool:
        return self.last_step is None and now - self._started < self.first_step_timeout

    def _stalled(self, now: float) -> bool:
        if self.last_step is None:
            return now - self._started >= self.first_step_timeout
        state_section = self._section
        if state_section and state_section[0].exempt:
            return now - state_section[1] >= self.section_timeout
        return now - self._last_progress >= self.timeout

    def _stack(self) -> tuple[str, ...]:
        frame = thread_frame(self._thread_id)
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
            if not self.store.check([key]):
                continue
            try:
                states[rank] = RankState.from_json(json.loads(self.store.get(key)))
            except (ValueError, TypeError, KeyError, AttributeError):
                # an answer that does not read is no answer: the rank is silent
                log.warning("hang watchdog: rank %d's answer does not read; it is silent", rank)
        verdict = localise(states, self.world, self.instance_of, timeout=self.timeout)
        self.verdicts = [*self.verdicts[-15:], verdict]
        log.info(
            "hang watchdog: request %d on rank %d: %s (%s)",
            request,
            self.rank,
            "hang" if verdict.hung else "no hang",
            verdict.why,
        )
        self.hand_on(verdict)
        return verdict

    def hand_on(self, verdict: HangEvidence) -> bool:
        """Hand a hang to `on_hang` if it is the job's first that names a rank, or its first
        that names none (each once per job, over the store); True when handed on."""
        if not verdict.hung:
            return False
        token = "reported" if verdict.named else "reported-unnamed"
        if self.store.add(f"{self.prefix}{token}", 1) != 1:
            return False
        self.on_hang(verdict)
        return True


def thread_frame(thread_id: int) -> FrameType | None:
    """The innermost frame of thread `thread_id`, read from the watchdog's own thread, with the
    garbage collector paused for the read (and left as it was found). On Python 3.11, a
    collection starting inside `sys._current_frames` while another thread exits deadlocks the
    whole process (CPython issue 106883; later releases pause the collector there themselves):
    the watch that looks for hangs would make one."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        return sys._current_frames().get(thread_id)
    finally:
        if paused:
            gc.enable()
