"""A real, tiny training job on CPU (gloo) with the training watch on every rank: the hangs and
the stragglers the drill's `hang-one-rank`, `hang-ambiguous`, `hang-fsdp`, `hang-two-groups`,
`straggler` and `straggler-corroborated` scenarios publish, and the long pauses that must raise
nothing.

One process per rank (`sdc_remediation.infra.local.ranks`), rank r on node
`nodes[r // ranks_per_node]` of the drill's cluster. The job calls no collective itself, as real training scripts do not: the
framework (`Plan.kind`, a `JobKind`) does. Each step: a data-loading section, a forward/backward
section (forward, loss, backward, optimizer step), then `watch.step`. What a `Plan` injects:
- `stall`: these ranks stop (sleep past the job's end) at `stall_step`, before the forward (in
  the two-group job: after the step, before the loss all-reduce);
- `first_step_seconds`: every rank's first step spends this long before its first collective,
  outside any section (its imports);
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
from enum import StrEnum
from typing import Any

from sdc_remediation.infra.local.ddp_job import JobError, require_torch
from sdc_remediation.infra.local.ranks import run_ranks
from trainer_emitter.contract import Check

WATCH_TIMEOUT = 1.5
"""The watchdog's timeout in the local job: seconds, so a hang shows within the test."""
STALL_SECONDS = 600.0


class JobKind(StrEnum):
    DDP = "ddp"
    """DistributedDataParallel over every rank: the bucketed all-reduces run in C++ in backward."""
    FSDP = "fsdp"
    """FSDP2 (`fully_shard` per layer and at the root): asynchronous gathers and reductions."""
    TWO_GROUPS = "two-groups"
    """DDP over every rank, and the loss averaged for the log in a second process group, issued
    asynchronously after each step and waited for after the next: a rank that stops before its
    loss all-reduce lags in both groups."""


@dataclass(frozen=True)
class Plan:
    nodes: tuple[str, ...]
    ranks_per_node: int = 1
    kind: JobKind = JobKind.DDP
    steps: int = 6
    stall: tuple[int, ...] = ()
    stall_step: int = 3
    first_step_seconds: float = 0.0
    first_step_timeout: float | None = None
    use_recorder: bool = True
    """False: the watch's own counter, as where torch has no flight recorder."""
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
                f"{plan.world} ranks on {len(plan.nodes)} nodes ({plan.kind}, gloo, CPU), "
                f"training watch timeout {plan.timeout:g} s, in {self.seconds:.1f} s",
                {},
            )
        ]
        if plan.stall:
            stalled = ", ".join(map(str, plan.stall))
            lines.append(
                (
                    f"rank {stalled} stopped in step {plan.stall_step}",
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


def _names_a_rank(alarm: dict[str, Any]) -> bool:
    hang = alarm["hang"]
    return bool(hang["missing_ranks"] or hang["silent_ranks"] or hang["odd_stack_ranks"])


def run_watch_job(nodes: Sequence[str], *, timeout: float = 120.0, **settings: Any) -> WatchResult:
    """Run the job until a hang that names a rank is reported (a plan with `stall`) or every
    rank is done."""
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
            if alarm.get("check") == Check.HANG and _names_a_rank(alarm):
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
            first_step_timeout=plan.first_step_timeout,
            use_recorder=plan.use_recorder,
            window_steps=plan.window_steps,
            windows=plan.windows,
        )
        _train(rank, plan, watch, results)
        # let rank 0 score the last window (it polls every tenth of the timeout), well within
        # half the timeout: the idle wait itself must not look like a hang
        time.sleep(plan.timeout / 3)
        watch.close()
        dist.barrier()
        dist.destroy_process_group()
        results.put((rank, "done", [(v.hung, v.why) for v in watch.hang.verdicts]))
    except BaseException:
        results.put((rank, "error", traceback.format_exc()))


def _model(plan: Plan, watch: Any) -> Any:
    """The job's model as its framework wraps it (the same initial weights on every rank)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    if plan.kind is JobKind.FSDP:
        from torch.distributed.fsdp import fully_shard

        for layer in module:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        return fully_shard(module)
    from torch.nn.parallel import DistributedDataParallel

    return watch.watch_ddp(DistributedDataParallel(module))


def _first_step_imports(plan: Plan) -> None:
    """What a first step spends before its first collective: imports, building, tracing."""
    time.sleep(plan.first_step_seconds)


def _stop_at(step: int, rank: int, plan: Plan, results: Any) -> None:
    if step == plan.stall_step and rank in plan.stall:
        results.put((rank, "onset", time.time()))
        time.sleep(STALL_SECONDS)


def _train(rank: int, plan: Plan, watch: Any, results: Any) -> None:
    import torch
    import torch.distributed as dist

    from trainer_emitter.watch import Section

    model = _model(plan, watch)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    logged = dist.new_group(list(range(plan.world))) if plan.kind is JobKind.TWO_GROUPS else None
    pending = None
    for step in range(1, plan.steps + 1):
        if step == 1 and plan.first_step_seconds:
            _first_step_imports(plan)
        if step == 1 and plan.compile_seconds:
            with watch.section(Section.COMPILE):
                time.sleep(plan.compile_seconds)
        with watch.section(Section.DATA_LOADING):
            if step == 2 and plan.loader_seconds:
                time.sleep(plan.loader_seconds)
            generator = torch.Generator().manual_seed(1000 * step + rank)
            batch = torch.randn(8, 16, generator=generator)
        with watch.section(Section.FORWARD_BACKWARD):
            time.sleep(plan.step_seconds)
            if rank == plan.straggler:
                time.sleep(plan.straggler_seconds)
            if plan.kind is not JobKind.TWO_GROUPS:
                _stop_at(step, rank, plan, results)  # before the forward the others go on with
            loss = model(batch).square().mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        if logged is not None:
            _stop_at(step, rank, plan, results)  # before the loss all-reduce: behind in both
            if pending is not None:
                pending.wait()
            pending = dist.all_reduce(loss.detach(), group=logged, async_op=True)
        if step == 3 and plan.checkpoint_seconds:
            if rank == 0:
                with watch.section(Section.CHECKPOINT_SAVE):
                    time.sleep(plan.checkpoint_seconds)
            dist.barrier()
        watch.step(step)
    if pending is not None:
        pending.wait()
