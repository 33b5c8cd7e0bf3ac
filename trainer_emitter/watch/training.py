"""`TrainingWatch`: the hang watchdog and the straggler timers behind the two calls a training
loop makes (`section` around the parts of a step, `step` after each), reporting through the
emitter like the SDC checks.

Every rank publishes its window's medians over the store (`<prefix>straggler/<window>/<rank>`);
rank 0 scores each window on its own thread once every rank's medians are there (a window some
rank never publishes is skipped once two later ones are complete), and reports a flagged rank.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import statistics
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from trainer_emitter.watch.hang import (
    DEFAULT_PREFIX,
    DEFAULT_SECTION_TIMEOUT_SECONDS,
    DEFAULT_TIMEOUT_SECONDS,
    BackwardTail,
    HangWatchdog,
    Section,
    ddp_comm_hook,
    wrap_collectives,
)
from trainer_emitter.watch.localise import HangEvidence
from trainer_emitter.watch.recorder import enable_recorder, read_recorder
from trainer_emitter.watch.store import Store, connect_store
from trainer_emitter.watch.straggler import (
    DEFAULT_THRESHOLD,
    DEFAULT_WINDOW_STEPS,
    DEFAULT_WINDOWS,
    RankTimes,
    StragglerScores,
    WindowScores,
)
from trainer_emitter.watch.timing import Timer, default_timer

log = logging.getLogger("trainer_emitter")


_Span = tuple[Any, Any, float]
"""A step or section: its timer's start and end marks, and the seconds waiting in collectives."""


class Reporter(Protocol):
    """What the watch needs of the emitter (`trainer_emitter.Emitter`)."""

    rank_map: Any

    def report(self, alarm: object) -> Any: ...


class TrainingWatch:
    """Watches one rank. Build it on every rank after `init_process_group`, with the emitter.

    `store`: the side channel (default: a client of the job's rendezvous store at MASTER_ADDR,
    MASTER_PORT). `timeout`: seconds without progress before evidence is gathered (default 300);
    `first_step_timeout`: the same before this rank's first step is done (default 30 minutes, at
    least `timeout`). `window_steps`, `threshold`, `windows`: the straggler scoring.
    `count_collectives`: count the collectives of torch.distributed called through Python (when
    it is importable), the time waiting in them left out of busy time. `use_recorder`: read
    collective progress from torch's flight recorder where the build has one (the counter
    otherwise). `timer`: how steps and sections are timed (default: CUDA events where torch has a
    CUDA device, the host's clock otherwise). `on_hang`, `on_straggler`: called with the alarm
    after it is reported (on the rank that reports it).

    Under DDP, `watch_ddp(model)` leaves the time DDP waits for its all-reduces out of busy
    time; FSDP2's gathers and reductions are counted from issue to completion without it."""

    def __init__(
        self,
        emitter: Reporter,
        *,
        store: Store | None = None,
        rank: int | None = None,
        world: int | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        section_timeout: float = DEFAULT_SECTION_TIMEOUT_SECONDS,
        first_step_timeout: float | None = None,
        poll: float | None = None,
        window_steps: int = DEFAULT_WINDOW_STEPS,
        threshold: float = DEFAULT_THRESHOLD,
        windows: int = DEFAULT_WINDOWS,
        count_collectives: bool = True,
        use_recorder: bool = True,
        timer: Timer | None = None,
        on_hang: Callable[[dict[str, Any]], None] | None = None,
        on_straggler: Callable[[dict[str, Any]], None] | None = None,
        prefix: str = DEFAULT_PREFIX,
    ) -> None:
        if window_steps < 1:
            raise ValueError(f"window_steps {window_steps!r} must be at least 1")
        self.emitter = emitter
        self.rank, self.world = _rank_and_world(rank, world)
        self.instance_of = {
            r: emitter.rank_map.get(r).instance_id if emitter.rank_map.get(r) else None
            for r in range(self.world)
        }
        self.store = store if store is not None else connect_store()
        self.prefix = prefix
        self.window_steps = window_steps
        self.scores = StragglerScores(threshold, windows)
        self._on_hang, self._on_straggler = on_hang, on_straggler
        recorded = use_recorder and _distributed()
        if recorded:
            enable_recorder()
        self.hang = HangWatchdog(
            self.store,
            rank=self.rank,
            world=self.world,
            instance_of=self.instance_of,
            on_hang=self._report_hang,
            timeout=timeout,
            section_timeout=section_timeout,
            first_step_timeout=first_step_timeout,
            poll=poll,
            prefix=prefix,
            recorder=read_recorder if recorded else None,
        )
        self._restore: Callable[[], None] | None = None
        self._tails: list[BackwardTail] = []
        if count_collectives:
            with contextlib.suppress(ImportError):
                self._restore = wrap_collectives(self.hang.collective)
        self._timer = timer if timer is not None else default_timer()
        self._step_started = self._timer.mark()
        self._collective_at_step = self.hang.collective.seconds
        self._steps: list[_Span] = []
        self._sections: dict[str, list[_Span]] = {}
        self._window = 0
        self._stop = threading.Event()
        self._scorer: threading.Thread | None = None
        self.hang.start()
        if self.rank == 0:
            self._scorer = threading.Thread(
                target=self._score_windows, name="sdc-straggler", daemon=True
            )
            self._scorer.start()

    # the two calls of the training loop

    @contextlib.contextmanager
    def section(self, name: Section | str) -> Iterator[None]:
        """Time a named part of the step; an exempt one (data loading, checkpoint save or load,
        the first step's compile) may outlast the watchdog's timeout."""
        collective = self.hang.collective
        outer = self.hang.enter(name)
        started, waited = self._timer.mark(), collective.seconds
        try:
            yield
        finally:
            self.hang.leave(outer)
        span = (started, self._timer.mark(), collective.seconds - waited)
        times = self._sections.get(name)
        if times is None:
            times = self._sections.setdefault(Section(name).value, [])
        times.append(span)

    def step(self, step: int) -> None:
        """A step is done: progress for the watchdog, a busy time for the scores."""
        self.hang.progress(step)
        now, waited = self._timer.mark(), self.hang.collective.seconds
        self._steps.append((self._step_started, now, waited - self._collective_at_step))
        self._step_started, self._collective_at_step = now, waited
        if len(self._steps) >= self.window_steps:
            self._publish_window()

    def watch_ddp(
        self, model: Any, hook: Callable[[Any, Any], Any] | None = None, state: Any = None
    ) -> Any:
        """Watch a `DistributedDataParallel` model (once, before the first backward) so that a
        fast rank's wait for a slow one in DDP's all-reduces is not its busy time. Returns the
        model.

        Where the flight recorder sees DDP's collectives, the tail of each backward pass is
        timed (`BackwardTail`) and DDP keeps its own C++ path. With `hook` (a communication hook
        the job registers, and its `state`), or without a recorder, the watch registers the
        hook itself (default: torch's `allreduce_hook`, what DDP does without one) wrapped so
        that each bucket's all-reduce is counted from issue to completion; a Python hook costs
        a pass of its own over each bucket, which DDP's C++ path folds into its copy."""
        if hook is None and self.hang.recorder is not None and self.hang.recorder():
            self._tails.append(BackwardTail(self.hang.collective).attach(model))
        else:
            model.register_comm_hook(state, ddp_comm_hook(self.hang.collective, hook))
        return model

    def collective(self, name: str) -> contextlib.AbstractContextManager[None]:
        """Count a collective the watch cannot see by itself (one not called through
        torch.distributed's Python functions)."""
        return self.hang.collective(name)

    def close(self) -> None:
        self._stop.set()
        if self._scorer is not None:
            self._scorer.join(timeout=5)
        self.hang.close()
        for tail in self._tails:
            tail.detach()
        if self._restore is not None:
            self._restore()
            self._restore = None

    def __enter__(self) -> TrainingWatch:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # reporting

    def _report_hang(self, evidence: HangEvidence) -> None:
        alarm = evidence.alarm(step=self.hang.last_step, timeout=self.hang.timeout)
        log.error("training hang: %s; reporting it", evidence.why)
        self.emitter.report(alarm)
        if self._on_hang is not None:
            self._on_hang(alarm)

    def _report_straggler(self, scores: WindowScores) -> None:
        alarm = scores.alarm(
            step=self.hang.last_step,
            window_steps=self.window_steps,
            threshold=self.scores.threshold,
            windows=self.scores.windows,
            instance_of=self.instance_of,
        )
        log.error("straggler: rank %s below %.2f", list(scores.flagged), self.scores.threshold)
        self.emitter.report(alarm)
        if self._on_straggler is not None:
            self._on_straggler(alarm)

    # the windows

    def _publish_window(self) -> None:
        times = RankTimes(
            step=statistics.median(self._busy(span) for span in self._steps),
            sections={
                name: statistics.median(self._busy(span) for span in spans)
                for name, spans in self._sections.items()
                if spans
            },
        )
        self.store.set(
            f"{self.prefix}straggler/{self._window}/{self.rank}", json.dumps(times.to_json())
        )
        self._window += 1
        self._steps, self._sections = [], {}

    def _busy(self, span: _Span) -> float:
        """A step's or section's busy time: its time less the time waiting in collectives."""
        start, end, waited = span
        busy = self._timer.seconds(start, end) - waited
        return busy if busy > 0 else 0.0

    def _window_keys(self, window: int) -> list[str]:
        return [f"{self.prefix}straggler/{window}/{rank}" for rank in range(self.world)]

    def _score_windows(self) -> None:
        window = 0
        poll = self.hang.poll
        while not self._stop.wait(poll):
            try:
                while True:
                    keys = self._window_keys(window)
                    if self.store.check(keys):
                        times = {
                            rank: RankTimes.from_json(json.loads(self.store.get(key)))
                            for rank, key in enumerate(keys)
                        }
                        scores = self.scores.score(window, times)
                        if scores.flagged:
                            self._report_straggler(scores)
                    elif not self.store.check(self._window_keys(window + 2)):
                        break
                    window += 1
            except Exception:
                log.exception("straggler scores: a window failed; scoring goes on")


def _distributed() -> bool:
    """torch.distributed is importable and initialised."""
    try:
        import torch.distributed as dist
    except ImportError:
        return False
    return dist.is_available() and dist.is_initialized()


def _rank_and_world(rank: int | None, world: int | None) -> tuple[int, int]:
    if rank is None or world is None:
        try:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                rank = dist.get_rank() if rank is None else rank
                world = dist.get_world_size() if world is None else world
        except ImportError:
            pass
    rank = rank if rank is not None else int(os.environ.get("RANK", "0"))
    world = world if world is not None else int(os.environ.get("WORLD_SIZE", "1"))
    return rank, world


__all__ = ["TrainingWatch"]
