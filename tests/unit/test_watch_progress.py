"""The training watch's collective progress: per process group (the flight recorder's dump, or
the watch's own counter), asynchronous work completed when it completes, the time waiting in
collectives left out of busy time, a rank behind in several groups as the source; and no false
start (nothing judged before the first step, an unnamed hang never blocking a named one).
Pure: fake futures, fake clocks, a store in memory. The real jobs are tests/torch/."""

from __future__ import annotations

import gc
import json
import sys
from typing import Any, ClassVar

import pytest

from tests.unit.test_watch import ELSEWHERE, INSTANCES, WAITING, Clock, watchdog
from trainer_emitter.rankmap import RankMap
from trainer_emitter.watch import (
    HangWatchdog,
    MemoryStore,
    RankState,
    Section,
    TrainingWatch,
    localise,
)
from trainer_emitter.watch.hang import CollectiveCounter, ddp_comm_hook, wrap_collectives
from trainer_emitter.watch.recorder import GroupProgress, enable_recorder, progress_of
from trainer_emitter.watch.straggler import RankTimes
from trainer_emitter.watch.timing import CudaEventTimer, WallTimer


class Future:
    """What a torch future offers the watch: callbacks run once it completes."""

    def __init__(self) -> None:
        self.callbacks: list[Any] = []
        self.done = False

    def add_done_callback(self, callback: Any) -> None:
        if self.done:
            callback(self)
        else:
            self.callbacks.append(callback)

    def complete(self) -> None:
        self.done = True
        for callback in self.callbacks:
            callback(self)


class Work:
    def __init__(self) -> None:
        self.future = Future()

    def get_future(self) -> Future:
        return self.future


class Group:
    def __init__(self, name: str) -> None:
        self.group_name = name


class FakeDist:
    """A `torch.distributed` with two collectives: one returns its work when asked for."""

    def __init__(self) -> None:
        self.works: list[Work] = []

    def all_reduce(self, tensor: Any, op: Any = None, group: Any = None, async_op: bool = False):
        work = Work()
        self.works.append(work)
        if async_op:
            return work
        work.future.complete()
        return None

    def all_gather_single(self, output: Any, tensor: Any, group: Any = None, async_op=False):
        return self.all_reduce(tensor, group=group, async_op=async_op)


def test_an_asynchronous_collective_counts_as_completed_when_its_work_completes():
    counter, dist = CollectiveCounter(), FakeDist()
    wrap_collectives(counter, dist)

    work = dist.all_gather_single([], [], group=Group("3"), async_op=True)
    issued = counter.counts()
    work.future.complete()

    assert issued == {"3": (1, 0)}
    assert counter.counts() == {"3": (1, 1)}


def test_a_collective_is_counted_in_its_process_group_positional_or_named():
    counter, dist = CollectiveCounter(), FakeDist()
    wrap_collectives(counter, dist)

    dist.all_reduce([], None, Group("5"))
    dist.all_reduce([])

    assert counter.counts() == {"5": (1, 1), "0": (1, 1)}


def test_the_time_waiting_is_the_time_some_collective_is_in_flight_overlaps_counted_once():
    clock = Clock()
    counter = CollectiveCounter(clock=clock)
    first = counter.issue("all_gather")
    clock.now += 1
    second = counter.issue("reduce_scatter")
    clock.now += 1
    first()
    clock.now += 1
    in_flight = counter.seconds
    second()
    clock.now += 5

    assert in_flight == 3.0
    assert counter.seconds == 3.0


def test_the_ddp_hook_counts_each_bucket_once_from_issue_to_completion():
    counter, dist = CollectiveCounter(), FakeDist()
    wrap_collectives(counter, dist)

    def inner(state: Any, bucket: Any) -> Future:
        return dist.all_reduce(bucket, group=state, async_op=True).get_future()

    hook = ddp_comm_hook(counter, inner)
    future = hook(Group("0"), "bucket")
    issued = counter.counts()
    future.complete()

    assert issued == {"0": (1, 0)}
    assert counter.counts() == {"0": (1, 1)}


def test_a_fast_rank_waiting_in_the_ddp_hook_is_not_busy():
    # Given a watch whose DDP hook's all-reduce completes 0.25 s after it is issued
    clock = Clock()
    watch = _watch(WallTimer(clock), clock)
    pending: list[Future] = []

    def inner(state: Any, bucket: Any) -> Future:
        pending.append(Future())
        return pending[-1]

    hook = ddp_comm_hook(watch.hang.collective, inner)
    try:
        # When a step computes 0.1 s, then waits 0.25 s for its bucket
        with watch.section(Section.FORWARD_BACKWARD):
            clock.now += 0.1
            hook(None, "bucket")
            clock.now += 0.25
            pending[0].complete()
        watch.step(1)
    finally:
        watch.close()

    # Then its busy time is the computing alone
    published = published_window(watch)
    assert published.step == pytest.approx(0.1)
    assert published.sections == {"forward_backward": pytest.approx(0.1)}


class Event:
    """What a CUDA event offers the timer: recorded at a device time, read once synchronized."""

    device_ms = 0.0
    recorded: ClassVar[list[Event]] = []

    def __init__(self) -> None:
        self.at: float | None = None
        self.synchronized = False

    def record(self) -> None:
        self.at = Event.device_ms
        Event.recorded.append(self)

    def synchronize(self) -> None:
        self.synchronized = True

    def elapsed_time(self, end: Event) -> float:
        assert end.synchronized and self.at is not None and end.at is not None
        return end.at - self.at


def test_on_a_gpu_sections_are_timed_by_cuda_events_read_only_when_the_window_is_published():
    # Given a watch timing with CUDA events (the device 40 ms into a section when the host
    # leaves it)
    Event.recorded, Event.device_ms = [], 0.0
    clock = Clock()
    watch = _watch(CudaEventTimer(Event), clock, window_steps=2)
    try:
        for step in (1, 2):
            with watch.section(Section.FORWARD_BACKWARD):
                Event.device_ms += 40.0
            Event.device_ms += 5.0
            if step == 1:
                synchronized_mid_window = any(e.synchronized for e in Event.recorded)
            watch.step(step)
    finally:
        watch.close()

    # Then nothing waited on the device before the window closed, and the times are the
    # device's: 40 ms a section, 45 ms a step
    published = published_window(watch)
    assert synchronized_mid_window is False
    assert published.sections == {"forward_backward": pytest.approx(0.040)}
    assert published.step == pytest.approx(0.045)


def _watch(timer: Any, clock: Clock, window_steps: int = 1) -> TrainingWatch:
    class Quiet:
        rank_map = RankMap([{"rank": 0, "instance_id": INSTANCES[0]}])

        def report(self, alarm: object) -> None:
            raise AssertionError(alarm)

    watch = TrainingWatch(
        Quiet(),
        store=MemoryStore(),
        rank=0,
        world=1,
        count_collectives=False,
        window_steps=window_steps,
        timer=timer,
    )
    watch.hang.collective._clock = clock
    return watch


def published_window(watch: TrainingWatch) -> RankTimes:
    return RankTimes.from_json(json.loads(watch.store.get("sdc-watch/straggler/0/0")))


DUMP = {
    "pg_status": {
        "0": {"last_enqueued_collective": 8, "last_completed_collective": 7},
        "1": {"last_enqueued_collective": 3, "last_completed_collective": 3},
    },
    "entries": [
        {"process_group": ("0", "default_pg"), "collective_seq_id": 7, "retired": True,
         "state": "scheduled", "profiling_name": "gloo:all_reduce"},
        {"process_group": ("0", "default_pg"), "collective_seq_id": 8, "retired": False,
         "state": "scheduled", "profiling_name": "gloo:all_reduce"},
        {"process_group": ("1", "undefined"), "collective_seq_id": 3, "retired": True,
         "state": "scheduled", "profiling_name": "gloo:broadcast"},
    ],
}  # fmt: skip


def test_the_recorder_s_group_status_gives_each_group_s_progress_and_the_running_collective():
    assert progress_of(DUMP) == {
        "0": GroupProgress(8, 7, "gloo:all_reduce"),
        "1": GroupProgress(3, 3, None),
    }


def test_without_group_status_the_entries_give_it_completed_by_state_or_retirement():
    entries = [
        {"pg_id": 2, "collective_seq_id": 40, "state": "completed", "retired": False},
        {"pg_id": 2, "collective_seq_id": 41, "state": "started", "retired": False,
         "profiling_name": "nccl:all_reduce"},
        {"pg_id": 2, "collective_seq_id": 42, "state": "scheduled", "retired": False,
         "profiling_name": "nccl:all_reduce"},
    ]  # fmt: skip

    assert progress_of({"entries": entries}) == {"2": GroupProgress(42, 40, "nccl:all_reduce")}


def test_an_empty_record_is_no_progress_and_the_counter_stands_in():
    assert progress_of({"entries": [], "pg_status": {}}) is None


def test_the_recorder_is_asked_to_record_unless_the_job_set_a_size():
    unset: dict[str, str] = {}
    legacy = {"TORCH_NCCL_TRACE_BUFFER_SIZE": "50"}
    enable_recorder(unset)
    enable_recorder(legacy)

    assert unset == {"TORCH_FR_BUFFER_SIZE": "2000"}
    assert legacy == {"TORCH_NCCL_TRACE_BUFFER_SIZE": "50"}


def grouped(rank: int, stack=WAITING, **groups: tuple[int, int]) -> RankState:
    progress = {
        name.lstrip("g"): GroupProgress(*counts, "gloo:all_reduce")
        for name, counts in groups.items()
    }
    return RankState(
        rank=rank,
        entered=sum(p.entered for p in progress.values()),
        completed=sum(p.completed for p in progress.values()),
        collective=None,
        section=None,
        seconds_since_progress=10.0,
        exempt=False,
        stack=stack,
        groups=progress,
    )


def test_a_rank_behind_in_two_groups_is_the_source_not_the_rank_waiting_on_it():
    # Given data-parallel groups {0, 2} and {1, 3} ("1", "2") and tensor-parallel groups {0, 1}
    # and {2, 3} ("3", "4"): rank 3 stopped; rank 2 waits on it in their tensor-parallel group,
    # ranks 0 and 1 wait in their data-parallel groups on ranks 2 and 3
    states = {
        0: grouped(0, g1=(5, 4), g3=(5, 5)),
        1: grouped(1, g2=(5, 4), g3=(5, 5)),
        2: grouped(2, g1=(4, 4), g4=(6, 5)),
        3: grouped(3, stack=ELSEWHERE, g2=(4, 4), g4=(5, 5)),
    }
    instance_of = {r: INSTANCES[r % 2] if r < 2 else f"i-0dd0000000000000{r}" for r in range(4)}

    # When the hang is localised
    verdict = localise(states, 4, instance_of, timeout=5)

    # Then rank 3, missing in both of its groups, is named, not rank 2 (missing in one)
    assert verdict.missing == (3,)
    assert verdict.localised_instance == instance_of[3]
    assert [s.value for s in verdict.signals] == ["collective", "stack"]


def test_a_rank_behind_in_one_group_only_is_still_named():
    states = {r: grouped(r, g0=(9, 8), g1=(2, 2)) for r in range(4)}
    states[1] = grouped(1, stack=ELSEWHERE, g0=(8, 8), g1=(2, 2))

    verdict = localise(states, 4, {r: INSTANCES[0] for r in range(4)}, timeout=5)

    assert verdict.missing == (1,)
    assert verdict.waiting_seq == 9


def test_the_state_a_rank_gives_carries_its_groups_through_the_store():
    before = grouped(2, g0=(9, 8), g7=(3, 3))

    after = RankState.from_json(before.to_json())

    assert after.groups == before.groups


def test_nothing_is_judged_before_the_first_step_within_the_first_step_timeout():
    clock = Clock()
    dog, hangs = watchdog(clock, first_step_done=False, first_step_timeout=100)
    clock.now += 99

    assert dog.tick() is None and dog.state().starting
    assert hangs == []


def test_a_first_step_longer_than_its_own_timeout_is_judged():
    clock = Clock()
    dog, hangs = watchdog(clock, first_step_done=False, first_step_timeout=100)
    clock.now += 101

    verdict = dog.tick()

    assert verdict is not None and verdict.hung and len(hangs) == 1


def test_a_rank_still_in_its_first_step_means_no_hang_to_the_others():
    states = {r: grouped(r, g0=(1, 0)) for r in range(3)}
    states[1] = RankState(**{**states[1].__dict__, "starting": True})

    verdict = localise(states, 3, {r: INSTANCES[r] for r in range(3)}, timeout=5)

    assert not verdict.hung and "first step" in verdict.why


def test_a_first_step_timeout_shorter_than_the_timeout_is_refused():
    with pytest.raises(ValueError, match="first_step_timeout 5 must be at least the timeout 10"):
        watchdog(Clock(), first_step_timeout=5)


def test_a_hang_that_names_no_rank_leaves_the_job_s_report_for_a_named_one():
    # Given two ranks' watchdogs on one store, and the verdicts of two gatherings
    store = MemoryStore()
    first, first_hangs = watchdog(Clock(), store)
    second, second_hangs = watchdog(Clock(), store)
    nobody = localise({0: grouped(0, g0=(5, 4)), 1: grouped(1, g0=(5, 4))}, 2, {}, timeout=5)
    rank_1 = localise(
        {0: grouped(0, g0=(5, 4)), 1: grouped(1, stack=ELSEWHERE, g0=(4, 4))},
        2,
        {0: INSTANCES[0], 1: INSTANCES[1]},
        timeout=5,
    )

    # When the first rank judges the unnamed hang, and later both judge the named one
    handed = [first.hand_on(nobody), second.hand_on(nobody), second.hand_on(rank_1),
              first.hand_on(rank_1)]  # fmt: skip

    # Then the unnamed and the named hang are each reported once
    assert nobody.hung and nobody.named == () and rank_1.named == (1,)
    assert handed == [True, False, True, False]
    assert first_hangs == [nobody] and second_hangs == [rank_1]


def test_an_answer_that_does_not_read_makes_its_rank_silent_and_the_verdict_still_comes():
    # Given a two-rank job where rank 1's answer to a request is not a state
    store, clock = MemoryStore(), Clock()
    hangs: list = []
    dog = HangWatchdog(
        store,
        rank=0,
        world=2,
        instance_of={0: INSTANCES[0], 1: INSTANCES[1]},
        on_hang=hangs.append,
        timeout=10,
        gather_seconds=0,
        clock=clock,
    )
    dog.progress(step=1)
    store.set("sdc-watch/1/1", '{"rank": 1, "entered": "many"}')

    # When rank 0 stalls and gathers
    clock.now += 11
    verdict = dog.tick()

    # Then rank 1 is named silent
    assert verdict is not None and verdict.silent == (1,)
    assert verdict.localised_instance == INSTANCES[1]


def test_groups_that_do_not_read_are_left_out_of_a_state():
    raw = grouped(0, g0=(5, 4)).to_json()
    raw["groups"]["bad"] = ["x", 1, None]
    raw["groups"]["short"] = [1]

    assert set(RankState.from_json(raw).groups) == {"0"}


def test_a_collective_marked_completed_twice_counts_once():
    counter = CollectiveCounter()
    complete = counter.issue("all_reduce")

    complete()
    complete()

    assert counter.counts() == {"0": (1, 1)}
    assert counter.seconds >= 0.0 and counter.completed == 1


@pytest.mark.parametrize("enabled", [True, False], ids=["collector on", "collector off"])
def test_the_training_threads_stack_is_read_with_the_collector_paused_and_left_as_found(
    monkeypatch, enabled
):
    # Given a watchdog, and the garbage collector as the job left it
    clock = Clock()
    dog, _ = watchdog(clock)
    seen: list[bool] = []

    def current_frames():
        seen.append(gc.isenabled())
        return {}

    monkeypatch.setattr(sys, "_current_frames", current_frames)
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        # When the watchdog reads the training thread's stack for its state
        dog.state()
        after = gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
    # Then no collection could start inside the read (on Python 3.11 one deadlocks the process
    # when another thread exits meanwhile), and the collector is as the job left it
    assert seen == [False]
    assert after is enabled
