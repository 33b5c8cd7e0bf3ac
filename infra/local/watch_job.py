"""A real, tiny gloo job on CPU with the training watch on every rank: the hangs and the
stragglers the drill's `hang-one-rank`, `hang-ambiguous`, `straggler` and
`straggler-corroborated` scenarios publish, and the long pauses that must raise nothing.

One process per rank (`infra.local.ranks`), rank r on node `nodes[r // ranks_per_node]` of the
drill's cluster. Each step: a data-loading section, a forward/backward section, an all-reduce
through `torch.distributed` (counted by the watch), then `watch.step`. What a `Plan` injects:
- `stall`: these ranks stop (sleep past the job's end) at `stall_step`, before the all-reduce;
- `compile_seconds`: every rank's first step spends this long in the compile section;
- `loader_seconds`: every rank's data loading at step 2 takes this long;
- `checkpoint_seconds`: at step 3 rank 0 saves a checkpoint this long, the others wait in a barrier;
- `straggler`, `straggler_seconds`: that rank's forward/backward takes this much longer.

The ranks hand back the alarms their watch reported, exactly what `report()` takes; the drill
publishes them through its usual emitter path. torch is imported only in the ranks' processes.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from infra.local.ddp_job import JobError, require_torch
from infra.local.ranks import run_ranks
from trainer_emitter.contract import Check

WATCH_TIMEOUT = 1.5
"""The watchdog's timeout in the local job: seconds, so a hang shows within the test."""
STALL_SECONDS = 600.0


@dataclass(frozen=True)
class Plan:
    nodes: tuple[str, ...]
    ranks_per_node: int = 1
    steps: int = 6
    stall: tuple[int, ...] = ()
    stall_step: int = 3
    compile_seconds: float = 0.0
    loader_seconds: float = 0.0
    checkpoint_seconds: float = 0.0
    straggler: int | None = None
    straggler_seconds: float = 0.0
    step_seconds: float = 0.01
    timeout: float = WATCH_TIMEOUT
    window_steps: int = 5
    windows: int = 2

    @property
    def world(self) -> int:
        return len(self.nodes) * self.ranks_per_node

    def node_name(self, rank: int) -> str:
        return f"hyperpod-{self.nodes[rank // self.ranks_per_node]}"

    def rank_map(self) -> list[dict[str, Any]]:
        return [
            {
                "rank": r,
                "node_name": self.node_name(r),
                "instance_id": self.nodes[r // self.ranks_per_node],
                "gpu_uuid": f"GPU-{r:08x}-5a1e-4c1d-9e7b-{r * 7919:012x}",
            }
            for r in range(self.world)
        ]


@dataclass
class WatchResult:
    plan: Plan
    alarms: list[dict[str, Any]]
    """What the ranks' watches reported, in the order they arrived."""
    rank_map: list[dict[str, Any]]
    onset: float | None = None
    """When the first stalled rank stopped (time.time() in its process)."""
    reported: float | None = None
    """When the hang was reported (time.time() in the reporting rank's process)."""
    finished: list[int] = field(default_factory=list)
    """The ranks that ran every step."""
    verdicts: list[tuple[bool, str]] = field(default_factory=list)
    """What the finished ranks' watchdogs judged when they gathered evidence: (hang?, why)."""
    seconds: float = 0.0

    @property
    def alarm(self) -> dict[str, Any]:
        """The first hang or straggler alarm: what the drill publishes."""
        if not self.alarms:
            raise JobError(f"the watch job ran {self.seconds:.1f} s and reported nothing")
        return self.alarms[0]

    def lines(self) -> list[tuple[str, dict[str, str]]]:
        """What the job did, as a few timeline lines with their identifiers."""
        plan = self.plan
        lines: list[tuple[str, dict[str, str]]] = [
            (
                f"{plan.world} ranks on {len(plan.nodes)} nodes (gloo, CPU), training watch "
                f"timeout {plan.timeout:g} s, in {self.seconds:.1f} s",
                {},
            )
        ]
        if plan.stall:
            stalled = ", ".join(map(str, plan.stall))
            lines.append(
                (
                    f"rank {stalled} stopped before the all-reduce of step {plan.stall_step}",
                    {"stalled": stalled},
                )
            )
        for alarm in self.alarms:
            if alarm.get("check") == Check.HANG:
                hang = alarm["hang"]
                after = (
                    f" {self.reported - self.onset:.1f} s after the stop"
                    if self.reported is not None and self.onset is not None
                    else ""
                )
                lines.append(
                    (
                        f"watchdog reported a hang{after}: missing ranks "
                        f"{hang['missing_ranks']}, odd stacks {hang['odd_stack_ranks']}, "
                        f"localised to {hang['localised_instance'] or 'no single instance'}",
                        {
                            "missing": ",".join(map(str, hang["missing_ranks"])),
                            "localised": str(hang["localised_instance"]),
                            "reported_after": (
                                f"{self.reported - self.onset:.2f}"
                                if self.reported is not None and self.onset is not None
                                else ""
                            ),
                        },
                    )
                )
            else:
                straggler = alarm["straggler"]
                lines.append(
                    (
                        f"straggler scores flagged rank {straggler['flagged']} after "
                        f"{straggler['windows_required']} windows of "
                        f"{straggler['window_steps']} steps",
                        {"flagged": ",".join(map(str, straggler["flagged"]))},
                    )
                )
        return lines

    @property
    def hangs(self) -> list[dict[str, Any]]:
        return [a for a in self.alarms if a.get("check") == Check.HANG]

    @property
    def stragglers(self) -> list[dict[str, Any]]:
        return [a for a in self.alarms if a.get("check") == Check.STRAGGLER]


def run_watch_job(nodes: Sequence[str], *, timeout: float = 120.0, **settings: Any) -> WatchResult:
    """Run the job until a hang is reported (a plan with `stall`) or every rank is done."""
    require_torch()
    plan = Plan(tuple(nodes), **settings)
    if any(not 0 <= rank < plan.world for rank in plan.stall):
        raise ValueError(f"stalled ranks {plan.stall} are not all among the {plan.world} ranks")
    started = time.monotonic()
    result = WatchResult(plan=plan, alarms=[], rank_map=plan.rank_map())

    def collect(message: tuple[int, str, Any]) -> bool:
        rank, kind, payload = message
        if kind == "error":
            raise JobError(f"rank {rank} of the watch job failed:\n{payload}")
        if kind == "onset":
            result.onset = payload if result.onset is None else min(result.onset, payload)
            return False
        if kind == "alarm":
            alarm, at = payload
            result.alarms.append(alarm)
            if alarm.get("check") == Check.HANG:
                result.reported = at
                return True
            return False
        result.finished.append(rank)
        result.verdicts.extend(tuple(verdict) for verdict in payload)
        return not plan.stall and len(result.finished) == plan.world

    run_ranks(
        _rank,
        plan.world,
        (plan,),
        collect,
        timeout=timeout,
        timed_out=lambda: JobError(f"the watch job did not finish in {timeout:g} s"),
        linger=0 if plan.stall else 30.0,
    )
    result.seconds = time.monotonic() - started
    return result


class _Captured:
    """The emitter as the watch sees it: the job's rank map, and the reports handed on to the
    parent process (which publishes them)."""

    def __init__(self, rank: int, plan: Plan, results: Any) -> None:
        from trainer_emitter.rankmap import RankMap

        self.rank_map = RankMap(plan.rank_map())
        self._rank, self._results = rank, results

    def report(self, alarm: object) -> None:
        self._results.put((self._rank, "alarm", (alarm, time.time())))


def _rank(rank: int, port: int, plan: Plan, results: Any) -> None:
    logging.getLogger("trainer_emitter").addHandler(logging.NullHandler())
    try:
        import torch
        import torch.distributed as dist

        from trainer_emitter.watch import TrainingWatch, connect_store

        torch.set_num_threads(1)
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=plan.world
        )
        watch = TrainingWatch(
            _Captured(rank, plan, results),
            store=connect_store("127.0.0.1", port),
            rank=rank,
            world=plan.world,
            timeout=plan.timeout,
            window_steps=plan.window_steps,
            windows=plan.windows,
        )
        _train(rank, plan, watch, results)
        time.sleep(plan.timeout)  # let rank 0 score the last window
        watch.close()
        dist.barrier()
        dist.destroy_process_group()
        results.put((rank, "done", [(v.hung, v.why) for v in watch.hang.verdicts]))
    except BaseException:
        results.put((rank, "error", traceback.format_exc()))


def _train(rank: int, plan: Plan, watch: Any, results: Any) -> None:
    import torch
    import torch.distributed as dist

    from trainer_emitter.watch import Section

    weights = torch.zeros(16)
    for step in range(1, plan.steps + 1):
        if step == 1 and plan.compile_seconds:
            with watch.section(Section.COMPILE):
                time.sleep(plan.compile_seconds)
        with watch.section(Section.DATA_LOADING):
            if step == 2 and plan.loader_seconds:
                time.sleep(plan.loader_seconds)
            batch = torch.full((16,), float(rank + step))
        with watch.section(Section.FORWARD_BACKWARD):
            time.sleep(plan.step_seconds)
            if rank == plan.straggler:
                time.sleep(plan.straggler_seconds)
            gradient = batch * 0.01
        if step == plan.stall_step and rank in plan.stall:
            results.put((rank, "onset", time.time()))
            time.sleep(STALL_SECONDS)  # stopped before the all-reduce the others wait in
        dist.all_reduce(gradient)
        weights -= gradient / plan.world
        if step == 3 and plan.checkpoint_seconds:
            if rank == 0:
                with watch.section(Section.CHECKPOINT_SAVE):
                    time.sleep(plan.checkpoint_seconds)
            dist.barrier()
        watch.step(step)
