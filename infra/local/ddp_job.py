"""A real, tiny DDP job on CPU whose SDC checks raise the alarm the drill's `ddp-replay` scenario
publishes.

One process per rank joins a gloo group; rank r runs on "node" `nodes[r // ranks_per_node]` of
the drill's fake cluster (`NODE_NAME=hyperpod-<instance id>`), so the rank map that
`trainer_emitter.checks.SdcChecks` all-gathers maps every rank to one of the cluster's instances.
From `fault_step` on, every forward on `fault_rank` multiplies one output element by `factor`: a
finite wrong value, so check 1 (non-finite gradients) passes and the next ring-replay audit
names that rank, which is wrong both on its own micro-batch and on the one it replays.

The job stops at its first alarm (or after two audit periods) and hands back the alarm and the
rank map, exactly what `report()` takes; the drill publishes them through its usual emitter path.
torch is imported only in the ranks' processes; without it, `run_job` raises `TorchMissing`.

With a checkpoint directory the job saves every `ckpt_every` steps with torch's distributed
checkpoint (`<directory>/step-<N>`), and rank 0 writes the manifests and the alarm marker beside
them (`trainer_emitter.checkpoints.CheckpointLedger`). A `weights` fault adds to one weight of
`fault_rank` right after step `fault_step` (after that step's checks). With `resume`, the job
first loads the checkpoint `dcp_step` names, compares the replicas (`find_divergent_ranks`) and
trains on from the next step, alarm or not.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sdc_remediation.infra.local.ranks import run_ranks

FAULT_RANK = 2
FAULT_STEP = 7
AUDIT_EVERY = 5
FACTOR = 1000.0


class Fault(StrEnum):
    FORWARD = "forward"
    """From `fault_step` on, one forward output element of the faulty rank times `factor`."""
    WEIGHTS = "weights"
    """Right after step `fault_step`, `factor` added to one weight of the faulty rank."""


class TorchMissing(RuntimeError):
    """The job needs PyTorch, which is an optional extra of this project."""


class JobError(RuntimeError):
    """The job failed, timed out, or ended without the one alarm every rank agrees on."""


@dataclass(frozen=True)
class Plan:
    nodes: tuple[str, ...]
    """Instance ids of the cluster's nodes, in rank order."""
    ranks_per_node: int = 1
    fault_rank: int = FAULT_RANK
    fault_step: int = FAULT_STEP
    audit_every: int = AUDIT_EVERY
    factor: float = FACTOR
    fault: Fault | None = Fault.FORWARD
    check_every: int = 0
    ckpt_every: int = 0
    checkpoint_dir: str | None = None
    """Where the DCP saves, the manifests and the alarm markers go (needed by `ckpt_every`)."""
    check_on_checkpoint: bool = True
    confirm_checkpoints: bool = False
    last_step: int | None = None
    """The last step to run; None: two audit periods after the fault step."""
    resume: bool = False
    """Load the safe checkpoint of `checkpoint_dir` first and train on from the step after it."""

    @property
    def world(self) -> int:
        return len(self.nodes) * self.ranks_per_node

    def node_name(self, rank: int) -> str:
        return f"hyperpod-{self.nodes[rank // self.ranks_per_node]}"


@dataclass
class JobResult:
    plan: Plan
    alarm: dict[str, Any] | None
    """The alarm every rank returned (they agree, or the job fails); None only for a resumed
    job that ran to its last step."""
    rank_map: list[dict[str, Any]]
    """The rank map the checks all-gathered at start."""
    steps: list[dict[str, Any]]
    """Rank 0's steps: `{step, applied, audited}`, up to the alarm's."""
    fired: list[int] = field(default_factory=list)
    """The steps at which the fault corrupted a forward on the faulty rank."""
    seconds: float = 0.0
    resumed_from: int | None = None
    """The step of the checkpoint a resumed job loaded."""
    replicas_agree: bool | None = None
    """`find_divergent_ranks` right after the load: the copies agree."""
    loaded_fingerprint: str | None = None
    """Rank 0's weights' fingerprint right after the load."""

    def lines(self) -> list[tuple[str, dict[str, str]]]:
        """What the job did, as a few timeline lines with their identifiers."""
        plan, alarm = self.plan, self.alarm
        nodes = len(plan.nodes)
        lines = [
            (
                f"{plan.world} ranks on {nodes} nodes (gloo, CPU) in {self.seconds:.1f} s; "
                f"fault injected on rank {plan.fault_rank} at step {plan.fault_step} "
                f"(one forward output x{plan.factor:g}, finite)",
                {"fault_rank": str(plan.fault_rank), "fault_step": str(plan.fault_step)},
            )
        ]
        applied = [s["step"] for s in self.steps if s["applied"]]
        passed = [s["step"] for s in self.steps if s["audited"] and s["applied"]]
        if applied:
            lines.append(
                (
                    f"steps {applied[0]}-{applied[-1]} applied"
                    + (f"; audit at step {', '.join(map(str, passed))} passed" if passed else "")
                    + "; check 1 (non-finite gradients) passed every step",
                    {},
                )
            )
        if alarm is None:
            return lines
        culprits = ", ".join(map(str, alarm.get("culprits") or [])) or "none"
        pairs = ", ".join(str(pair) for pair in alarm.get("mismatched_pairs") or [])
        lines.append(
            (
                f"audit at step {alarm['step']} named rank {culprits} "
                f"(mismatched pairs {pairs or 'none'}); step {alarm['step']} not applied",
                {"step": str(alarm["step"]), "culprits": culprits},
            )
        )
        return lines


def require_torch() -> None:
    if importlib.util.find_spec("torch") is None:
        raise TorchMissing(
            "this scenario runs a real DDP job and needs PyTorch: install the CPU build of "
            "torch, then the torch extra (pip install -e '.[torch]'), or '.[dev]', which pins both"
        )


def run_job(nodes: Sequence[str], *, timeout: float = 180.0, **settings: Any) -> JobResult:
    """Spawn the ranks once, run until the first alarm, and return it with the rank map.
    `settings`: the other fields of `Plan`. Ends the processes it started on error or timeout."""
    require_torch()
    plan = Plan(tuple(nodes), **settings)
    if not 0 <= plan.fault_rank < plan.world:
        raise ValueError(f"fault rank {plan.fault_rank} is not one of the {plan.world} ranks")
    started = time.monotonic()
    by_rank: dict[int, dict[str, Any]] = {}

    def collect(message: tuple[int, Any, str | None]) -> bool:
        rank, result, error = message
        if error:
            raise JobError(f"rank {rank} of the DDP job failed:\n{error}")
        by_rank[rank] = result
        return len(by_rank) == plan.world

    run_ranks(
        _rank,
        plan.world,
        (plan,),
        collect,
        timeout=timeout,
        timed_out=lambda: JobError(f"the DDP job did not finish in {timeout:g} s"),
    )

    alarms = [by_rank[rank]["alarm"] for rank in range(plan.world)]
    if alarms[0] is None and not plan.resume:
        raise JobError(
            f"the DDP job ran {len(by_rank[0]['steps'])} steps and raised no alarm "
            f"(fault fired at steps {by_rank[plan.fault_rank]['fired']})"
        )
    if any(alarm != alarms[0] for alarm in alarms):
        raise JobError(f"the ranks disagree about the alarm: {alarms}")
    return JobResult(
        plan=plan,
        alarm=alarms[0],
        rank_map=by_rank[0]["rank_map"],
        steps=by_rank[0]["steps"],
        fired=by_rank[plan.fault_rank]["fired"],
        seconds=time.monotonic() - started,
        resumed_from=by_rank[0].get("resumed_from"),
        replicas_agree=by_rank[0].get("replicas_agree"),
        loaded_fingerprint=by_rank[0].get("loaded_fingerprint"),
    )


def _rank(rank: int, port: int, plan: Plan, results: Any) -> None:
    """One rank: join the group, train with the checks until the first alarm, put the result."""
    os.environ.update(
        {"NODE_NAME": plan.node_name(rank), "RANK": str(rank), "WORLD_SIZE": str(plan.world)}
    )
    # The checks log the alarm on every rank; the parent shows it once.
    logging.getLogger("trainer_emitter").addHandler(logging.NullHandler())
    try:
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=plan.world
        )
        result = _train(rank, plan)
        dist.barrier()  # gloo can hang in destroy_process_group without it
        dist.destroy_process_group()
        results.put((rank, result, None))
    except BaseException:
        results.put((rank, None, traceback.format_exc()))


def _train(rank: int, plan: Plan) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel

    from trainer_emitter.checks import Schedule, SdcChecks

    torch.manual_seed(0)  # the same initial weights everywhere
    module = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    ddp = DistributedDataParallel(module)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.01)

    def loss_fn(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return F.mse_loss(model(x), y)

    loaded = _load(module, plan) if plan.resume else {}
    start = loaded.get("resumed_from", 0) + 1
    # peer offset None: ranks per node, so each rank's replayer and third sit on other nodes
    checks = SdcChecks(
        ddp,
        optimizer,
        loss_fn,
        Schedule(
            audit_every=plan.audit_every,
            check_every=plan.check_every,
            ckpt_every=plan.ckpt_every,
            check_on_checkpoint=plan.check_on_checkpoint,
            confirm_checkpoints=plan.confirm_checkpoints,
        ),
        max_grad_norm=1.0,  # the corrupted steps before the audit stay finite
        **_checkpointing(module, plan, loaded),
    )
    now = {"step": 0}
    fired: list[int] = []

    def fault(_: nn.Module, __: Any, output: torch.Tensor) -> torch.Tensor | None:
        if now["step"] < plan.fault_step:
            return None
        fired.append(now["step"])
        output = output.clone()
        output[0, 0] = output[0, 0] * plan.factor
        return output

    if rank == plan.fault_rank and plan.fault is Fault.FORWARD:
        module.register_forward_hook(fault)

    steps: list[dict[str, Any]] = []
    alarm = None
    last = plan.last_step or max(plan.fault_step, 0) + 2 * plan.audit_every
    for step in range(start, last + 1):
        now["step"] = step
        generator = torch.Generator().manual_seed(100_003 * step + rank)
        batch = (torch.randn(8, 8, generator=generator), torch.randn(8, 4, generator=generator))
        result = checks.step(step, batch)
        steps.append({"step": step, "applied": result.applied, "audited": result.audited})
        if result.alarm:
            alarm = result.alarm
            break
        if rank == plan.fault_rank and plan.fault is Fault.WEIGHTS and step == plan.fault_step:
            with torch.no_grad():
                next(module.parameters()).view(-1)[0] += plan.factor
            fired.append(step)
    checks.close()
    return {
        "alarm": alarm,
        "rank_map": checks.rank_map.to_list(),
        "steps": steps,
        "fired": sorted(set(fired)),
        **loaded,
    }


def _checkpointing(module: Any, plan: Plan, loaded: dict[str, Any]) -> dict[str, Any]:
    """The checks' save function, ledger and resume arguments for a job with a directory."""
    if plan.checkpoint_dir is None:
        return {}
    import torch.distributed.checkpoint as dcp

    from trainer_emitter.checkpoints import CheckpointLedger

    directory = plan.checkpoint_dir

    def save(step: int, tags: dict[str, int | None]) -> str:
        path = os.path.join(directory, f"step-{step}")
        dcp.save({"model": module.state_dict()}, checkpoint_id=path)
        return path

    return {
        "save": save,
        "ledger": CheckpointLedger(directory),
        "resumed_from": loaded.get("resumed_from"),
        "resume_tags": loaded.get("tags"),
        "checkpoints": loaded.get("checkpoints"),
    }


def _load(module: Any, plan: Plan) -> dict[str, Any]:
    """Load the checkpoint `dcp_step` names into `module`, then compare the replicas."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    from trainer_emitter.checkpoints import dcp_step, safe_checkpoint
    from trainer_emitter.checks import find_divergent_ranks, weights_fingerprint

    if plan.checkpoint_dir is None:
        raise ValueError("a resumed job needs the checkpoint directory to resume from")
    step = dcp_step(plan.checkpoint_dir)
    manifest = safe_checkpoint(plan.checkpoint_dir).require()
    dist.barrier()  # every rank has read the directory before rank 0 rewrites it
    dcp.load(
        {"model": module.state_dict()},
        checkpoint_id=os.path.join(plan.checkpoint_dir, f"step-{step}"),
    )
    verdict = find_divergent_ranks(
        module, step=step + 1, tags=manifest.tags(), checkpoints=[manifest.entry()]
    )
    return {
        "resumed_from": step,
        "tags": manifest.tags(),
        "checkpoints": [manifest.entry()],
        "replicas_agree": verdict.agree,
        "loaded_fingerprint": weights_fingerprint(module.parameters()),
    }
