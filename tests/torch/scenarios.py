"""Training scenarios that run inside a gloo process group (one process per rank, each rank on its
own "node"): a tiny model, per-rank micro-batches, and faults injected through a forward hook or
a parameter edit. Each scenario returns plain data for the tests to assert on.

Imported by the spawned worker processes; the tests import only the names and the model helpers.
"""

from __future__ import annotations

import os
import queue
import shutil
import tempfile
import traceback
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from trainer_emitter import MemorySink
from trainer_emitter.checkpoints import CheckpointLedger, read_directory, safe_checkpoint
from trainer_emitter.checks import Schedule, SdcChecks, find_divergent_ranks
from trainer_emitter.checks.fingerprint import fingerprints
from trainer_emitter.checks.ring import ReplicaVerdict

WORLD = 4
"""Four ranks, one per node: with peer offset 1, replayer, target and third are on three nodes."""


def instance_id(rank: int) -> str:
    return f"i-{rank + 1:017x}"


def node_name(rank: int) -> str:
    return f"hyperpod-{instance_id(rank)}"


class TinyNet(nn.Module):
    """Linear, batch norm (buffers that DDP broadcasts), dropout (RNG), linear."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.norm = nn.BatchNorm1d(16)
        self.drop = nn.Dropout(0.1)
        self.out = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.drop(torch.relu(self.norm(self.inp(x)))))


def batch_for(rank: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(100_003 * step + rank)
    return torch.randn(8, 8, generator=generator), torch.randn(8, 4, generator=generator)


def loss_fn(module: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    x, y = batch
    return F.mse_loss(module(x), y)


def weights_fingerprint(module: nn.Module) -> list[int]:
    return [int(v) for v in fingerprints(module.parameters()).reshape(-1).tolist()]


CKPT_STEP = 1000
CKPT_TAGS: dict[str, int | None] = {"last_audit_pass": 1000, "last_weight_check_pass": 1000}
CKPT = {"step": CKPT_STEP, **CKPT_TAGS, "location": "mem://ckpt/step-1000"}
"""The checkpoint a resumed job loads: saved at step 1000 after its checks passed."""


def checkpoint_state() -> dict[str, torch.Tensor]:
    """The weights saved at CKPT_STEP (others than those a fresh TinyNet starts from)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        return TinyNet().state_dict()


def flip_a_weight_bit(module: nn.Module) -> None:
    """The lowest bit of one weight of the output layer, in place."""
    with torch.no_grad():
        module.out.weight.view(-1).view(torch.int32)[5] ^= 1  # type: ignore[union-attr]


@dataclass
class Fault:
    """Corrupts the model's output on `rank` whenever `when(step, is_own_batch, call)` holds;
    `call` counts the forwards of the current step on this rank (0: the training forward)."""

    rank: int
    when: Callable[[int, bool, int], bool]
    corrupt: Callable[[torch.Tensor], torch.Tensor]
    step: int = -1
    calls: int = 0
    fired: list[int] = field(default_factory=list)

    def attach(self, module: nn.Module, rank: int) -> None:
        if rank != self.rank:
            return

        def hook(_: nn.Module, args: tuple[Any, ...], output: torch.Tensor) -> torch.Tensor | None:
            call, self.calls = self.calls, self.calls + 1
            own = torch.equal(args[0], batch_for(rank, self.step)[0])
            if not self.when(self.step, own, call):
                return None
            self.fired.append(self.step)
            return self.corrupt(output)

        module.register_forward_hook(hook)

    def at(self, step: int) -> None:
        self.step, self.calls = step, 0


def _scale_first(factor: float) -> Callable[[torch.Tensor], torch.Tensor]:
    def corrupt(output: torch.Tensor) -> torch.Tensor:
        output = output.clone()
        output[0, 0] = output[0, 0] * factor
        return output

    return corrupt


@dataclass
class Run:
    """One scenario's training loop on this rank."""

    rank: int
    schedule: Schedule
    fault: Fault | None = None
    resumed: bool = False
    """Built as a job resuming from CKPT: its tags and the checkpoint itself given to the checks."""
    saves: list[dict[str, Any]] = field(default_factory=list)
    forwards: int = 0
    ledger: CheckpointLedger | None = None

    def __post_init__(self) -> None:
        torch.manual_seed(0)  # the same initial weights everywhere (DDP also broadcasts rank 0's)
        self.module = TinyNet()
        self.ddp = DistributedDataParallel(self.module)
        self.optimizer = torch.optim.SGD(self.module.parameters(), lr=0.01)
        self.checks = SdcChecks(
            self.ddp,
            self.optimizer,
            loss_fn,
            self.schedule,
            max_grad_norm=1.0,
            save=self.save,
            resume_tags=CKPT_TAGS if self.resumed else None,
            checkpoints=[CKPT] if self.resumed else None,
            ledger=self.ledger,
        )
        torch.manual_seed(1 + self.rank)  # each rank its own dropout masks
        if self.fault:
            self.fault.attach(self.module, self.rank)
        self.module.register_forward_hook(self._count_forward)

    def _count_forward(self, *_: Any) -> None:
        self.forwards += 1

    def load_checkpoint(self, corrupted: Collection[int] = ()) -> None:
        """Load CKPT's weights after the setup; on the ranks in `corrupted` the copy arrives
        with one bit flipped (the same bit on each)."""
        self.module.load_state_dict(checkpoint_state())
        if self.rank in corrupted:
            flip_a_weight_bit(self.module)

    def save(self, step: int, tags: dict[str, int | None]) -> str:
        self.saves.append({"step": step, "tags": tags})
        return f"mem://ckpt/step-{step}"

    def step(self, step: int) -> dict[str, Any]:
        if self.fault:
            self.fault.at(step)
        before = weights_fingerprint(self.module)
        forwards = self.forwards
        result = self.checks.step(step, batch_for(self.rank, step))
        grads = self.checks.watch.grad_fingerprints
        return {
            "step": step,
            "alarm": result.alarm,
            "applied": result.applied,
            "audited": result.audited,
            "weights_checked": result.weights_checked,
            "replicas_verified": result.replicas_verified,
            "saved": result.saved,
            "loss": result.loss,
            "forwards": self.forwards - forwards,
            "weights_changed": weights_fingerprint(self.module) != before,
            "grads_fingerprinted": grads is not None and bool(grads.any()),
        }

    def finish(self, steps: list[dict[str, Any]]) -> dict[str, Any]:
        self.checks.close()
        return {
            "steps": steps,
            "alarms": [s["alarm"] for s in steps if s["alarm"]],
            "saves": self.saves,
            "rank_map": self.checks.rank_map.to_list(),
            "weights": weights_fingerprint(self.module),
            "fired": self.fault.fired if self.fault else [],
        }


def clean(rank: int) -> dict[str, Any]:
    """210 steps, audits every 10 (deterministic), weight checks every 15, checkpoints every 50."""
    run = Run(rank, Schedule(audit_every=10, check_every=15, ckpt_every=50, peer_offset=1))
    return run.finish([run.step(step) for step in range(1, 211)])


def nan_once(rank: int) -> dict[str, Any]:
    """Rank 2's training forward turns one output into NaN at step 7 (no audit step); its
    recompute is fine. (Multiplied by NaN, so the NaN flows back into the gradients.)"""
    fault = Fault(2, lambda step, own, call: step == 7 and call == 0, _scale_first(float("nan")))
    run = Run(rank, Schedule(audit_every=5, check_every=0, peer_offset=1), fault)
    return run.finish([run.step(step) for step in range(1, 10)])


def scaled_from_step(rank: int) -> dict[str, Any]:
    """From step 12 on, every forward on rank 1 multiplies one output element by 1000."""
    fault = Fault(1, lambda step, own, call: step >= 12, _scale_first(1000.0))
    run = Run(rank, Schedule(audit_every=5, check_every=0, peer_offset=1), fault)
    return run.finish([run.step(step) for step in range(1, 16)])


def wrong_on_own_batch(rank: int) -> dict[str, Any]:
    """At audit step 10, rank 2 computes its own micro-batch wrong, every time (but not others')."""
    fault = Fault(2, lambda step, own, call: step == 10 and own, _scale_first(1.5))
    run = Run(rank, Schedule(audit_every=5, check_every=0, peer_offset=1), fault)
    return run.finish([run.step(step) for step in range(1, 11)])


def wrong_replay(rank: int) -> dict[str, Any]:
    """At audit step 10, rank 1 computes wrong only when it replays another rank's micro-batch."""
    fault = Fault(1, lambda step, own, call: step == 10 and not own, _scale_first(1.5))
    run = Run(rank, Schedule(audit_every=5, check_every=0, peer_offset=1), fault)
    return run.finish([run.step(step) for step in range(1, 11)])


def wrong_gradient(rank: int) -> dict[str, Any]:
    """At audit step 10, rank 2's training backward scales one weight's gradient by 1.001; its
    forward is right, so the loss bits match: only the gradient fingerprints can tell."""
    fault = Fault(2, lambda step, own, call: False, lambda output: output)  # tracks the step
    run = Run(rank, Schedule(audit_every=5, check_every=0, peer_offset=1), fault)
    backwards: dict[int, int] = {}

    def corrupt(grad: torch.Tensor) -> torch.Tensor | None:
        backwards[fault.step] = backwards.get(fault.step, 0) + 1
        if rank != 2 or fault.step != 10 or backwards[10] != 1:
            return None
        fault.fired.append(10)  # the training backward only: the recompute is right
        return grad * 1.001

    run.module.out.weight.register_hook(corrupt)
    return run.finish([run.step(step) for step in range(1, 11)])


def bit_flip(rank: int) -> dict[str, Any]:
    """After step 13's update, rank 3 flips the lowest bit of one weight; checkpoints every 10.
    Rank 0 then reports the alarm through an in-memory emitter."""
    run = Run(rank, Schedule(audit_every=25, check_every=0, ckpt_every=10, peer_offset=1))
    run.checks.setup_emitter(cluster_name="ml-cluster-1", region="us-west-2", sink=MemorySink())
    steps = []
    for step in range(1, 21):
        steps.append(run.step(step))
        if step == 13 and rank == 3:
            flip_a_weight_bit(run.module)
    result = run.finish(steps)
    return _with_reports(run, result)


def verdict_data(verdict: ReplicaVerdict) -> dict[str, Any]:
    return {
        "ranks": list(verdict.ranks),
        "suspects": verdict.suspects,
        "agreement": verdict.agreement.value,
        "differing": list(verdict.differing),
        "alarm": verdict.alarm,
    }


def diverged_on_load(rank: int) -> dict[str, Any]:
    """A job resumes from CKPT; rank 2's copy arrives with one bit flipped. The first step it is
    given (1001) compares the replicas first. Rank 0 reports through an in-memory emitter."""
    run = Run(rank, Schedule(audit_every=0, check_every=0, peer_offset=1), resumed=True)
    run.checks.setup_emitter(cluster_name="ml-cluster-1", region="us-west-2", sink=MemorySink())
    run.load_checkpoint(corrupted={2})
    result = run.finish([run.step(CKPT_STEP + 1)])
    return _with_reports(run, result)


def clean_load(rank: int) -> dict[str, Any]:
    """Every rank loads the same CKPT weights, without its tags; steps 1001 to 1003."""
    run = Run(rank, Schedule(audit_every=0, check_every=0, peer_offset=1))
    run.load_checkpoint()
    result = run.finish([run.step(step) for step in range(CKPT_STEP + 1, CKPT_STEP + 4)])
    result["tags"] = run.checks.tags()
    return result


def load_unverified(rank: int) -> dict[str, Any]:
    """As `diverged_on_load` with `verify_on_start` off and a weight check every 2 steps."""
    schedule = Schedule(audit_every=0, check_every=2, peer_offset=1, verify_on_start=False)
    run = Run(rank, schedule, resumed=True)
    run.load_checkpoint(corrupted={2})
    return run.finish([run.step(step) for step in range(CKPT_STEP + 1, CKPT_STEP + 3)])


def split_on_load(rank: int) -> dict[str, Any]:
    """Ranks 2 and 3 both load the copy with the same flipped bit: two against two. The function
    form compares them first (it leaves the driver's state alone), then the driver's first step."""
    run = Run(rank, Schedule(audit_every=0, check_every=0, peer_offset=1), resumed=True)
    run.load_checkpoint(corrupted={2, 3})
    verdict = find_divergent_ranks(run.ddp, step=CKPT_STEP + 1, tags=CKPT_TAGS, checkpoints=[CKPT])
    result = run.finish([run.step(CKPT_STEP + 1)])
    result["verdict"] = verdict_data(verdict)
    return result


def groups_on_load(rank: int) -> dict[str, Any]:
    """Rank 1's copy differs; the copies are compared within groups the loop passes:
    [1, 3] (two copies), [1, 2, 3] (a majority without rank 1) and [0, 2] (two that agree).
    Ranks outside a group that call it get a ValueError. Then the driver's first step (the
    default group)."""
    run = Run(rank, Schedule(audit_every=0, check_every=0, peer_offset=1))
    run.load_checkpoint(corrupted={1})
    groups = {"1,3": [1, 3], "1,2,3": [1, 2, 3], "0,2": [0, 2]}
    made = {name: dist.new_group(ranks) for name, ranks in groups.items()}  # every rank makes each
    verdicts: dict[str, Any] = {}
    refused: dict[str, str] = {}
    for name in groups:
        try:
            verdict = find_divergent_ranks(run.module, made[name], step=CKPT_STEP + 1)
        except ValueError as error:
            refused[name] = str(error)
        else:
            verdicts[name] = verdict_data(verdict)
    # the seed's call: parameters and a group, positionally, no step
    if rank in groups["1,2,3"]:
        seed_style = find_divergent_ranks(list(run.module.parameters()), made["1,2,3"])
        verdicts["seed 1,2,3"] = verdict_data(seed_style)
    return {**run.finish([run.step(CKPT_STEP + 1)]), "verdicts": verdicts, "refused": refused}


def remembered_saves(rank: int) -> dict[str, Any]:
    """A loop that saves by itself (no `save` schedule) at steps 5 and 10 and records each save
    with `remember_checkpoint`, with a ledger on a directory rank 0 makes; audits and weight
    checks every 5 steps, 12 steps; after step 12 it remembers step 5's again (as a restarted job
    passes on the one it resumed from). Rank 0 then reads the directory and asks
    `safe_checkpoint`."""
    made = [tempfile.mkdtemp(prefix="sdc-remembered-") if rank == 0 else None]
    dist.broadcast_object_list(made, src=0)
    directory = str(made[0])
    schedule = Schedule(audit_every=5, check_every=5, peer_offset=1)
    run = Run(rank, schedule, ledger=CheckpointLedger(directory))
    steps = []
    for step in range(1, 13):
        steps.append(run.step(step))
        if step % 5 == 0:
            run.checks.remember_checkpoint(step, f"mem://ckpt/step-{step}")
    run.checks.remember_checkpoint(5, "mem://ckpt/step-5")
    result = run.finish(steps)
    dist.barrier()  # every rank done before rank 0 reads and removes the directory
    if rank == 0:
        manifests = read_directory(CheckpointLedger(directory).store).manifests
        safe = safe_checkpoint(directory)
        result["manifests"] = {
            step: {
                "location": m.location,
                "clean_through": m.clean_through,
                "fingerprinted": m.fingerprint is not None,
            }
            for step, m in manifests.items()
        }
        result["safe"] = {"step": safe.step, "location": safe.location, "reason": safe.reason}
        shutil.rmtree(directory)
    return result


SCENARIOS: dict[str, Callable[[int], dict[str, Any]]] = {
    "clean": clean,
    "nan_once": nan_once,
    "scaled_from_step": scaled_from_step,
    "wrong_on_own_batch": wrong_on_own_batch,
    "wrong_replay": wrong_replay,
    "wrong_gradient": wrong_gradient,
    "bit_flip": bit_flip,
    "diverged_on_load": diverged_on_load,
    "clean_load": clean_load,
    "load_unverified": load_unverified,
    "split_on_load": split_on_load,
    "groups_on_load": groups_on_load,
    "remembered_saves": remembered_saves,
}


def worker(rank: int, port: int, names: list[str], results: queue.Queue[Any]) -> None:
    """One rank: join the group, run the scenarios in order, put `(name, rank, result)`."""
    os.environ.update({"NODE_NAME": node_name(rank), "RANK": str(rank), "WORLD_SIZE": str(WORLD)})
    torch.set_num_threads(1)
    try:
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD
        )
        for name in names:
            results.put((name, rank, SCENARIOS[name](rank)))
        dist.barrier()  # gloo can hang in destroy_process_group without it
        dist.destroy_process_group()
        results.put(("done", rank, None))
    except BaseException:
        results.put(("error", rank, traceback.format_exc()))


def _with_reports(run: Run, result: dict[str, Any]) -> dict[str, Any]:
    """`result` with what reporting each of its alarms through the run's emitter gave."""
    reported = [run.checks.report(alarm) for alarm in result["alarms"]]
    result["reported"] = [
        None
        if r is None
        else {"delivered": r.delivered, "instances": [d.instance_id for d in r.datapoints]}
        for r in reported
    ]
    return result
