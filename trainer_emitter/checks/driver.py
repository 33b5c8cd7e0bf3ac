"""The training-step driver: the three checks in the safe order around one optimizer step.

    first step   → the replicas' weights compared before anything runs (`verify_on_start`): a
                   copy that differs after a load is named and the step is not taken
    audit step?  → forward/backward (check 1's hook sees every bucket before the all-reduce)
    check 1      → ranks whose local gradient norm is NaN/Inf
    check 2      → ring replay on audit steps, and on any step where check 1 fired
    any alarm    → zero the gradients, return: the step is not applied
    clip         → reduced-gradient check (the all-reduced, clipped gradient is finite)
    step         → check 3 (weight fingerprints) every N steps and before every checkpoint
    checkpoint   → saved only after its weight check passed, tagged with the last passes; the
                   last few saved (and any known from before a restart) ride on every alarm
    ledger       → with a `CheckpointLedger` (trainer_emitter.checkpoints), the reporter rank
                   writes a manifest beside each save (`save`'s, or the loop's own recorded with
                   `remember_checkpoint`), marks it clean once a later audit and weight check
                   passed, and writes the alarm marker before the alarm returns

Every decision is taken from all-gathered data with the same pure rules on every rank, so all
ranks return the same alarm at the same step and never disagree about applying a step.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from trainer_emitter.checkpoints.ledger import CheckpointLedger
from trainer_emitter.checks.alarms import Passes, checkpoint_entry, location_of
from trainer_emitter.checks.comm import comm_device, gather
from trainer_emitter.checks.determinism import deterministic
from trainer_emitter.checks.fingerprint import DEFAULT_CHUNK_ELEMENTS, weights_fingerprint
from trainer_emitter.checks.gradients import GradientWatch, comm_hook
from trainer_emitter.checks.replay import (
    LossFn,
    Package,
    make_record,
    recompute,
    snapshot_buffers,
    tensor_bytes,
)
from trainer_emitter.checks.replicas import compare, with_alarm
from trainer_emitter.checks.ring import (
    ReplicaVerdict,
    ambiguous,
    check_topology,
    culprits,
    mismatched_pairs,
    node_names,
    ranks_per_node,
    replayer_of,
    target_of,
    third_of,
    verdict,
)
from trainer_emitter.checks.schedule import Schedule
from trainer_emitter.emitter import Emitter, ReportResult
from trainer_emitter.rankmap import RankMap, gather_rank_map, local_rank_info

log = logging.getLogger("trainer_emitter.checks")

SaveFn = Callable[[int, dict[str, int | None]], object]
"""`save(step, tags)`: write the checkpoint; tags are the last audit and weight-check passes.
What it returns, if a string or path, is remembered as the checkpoint's location."""


@dataclass
class StepResult:
    step: int
    loss: float
    """NaN when no forward ran (the replicas disagreed before the first step)."""
    alarm: dict[str, Any] | None = None
    applied: bool = False
    """The optimizer step ran (False after a compute or reduced-gradient alarm, and after the
    replicas disagreed before the first step)."""
    replicas_verified: bool = False
    """The replicas' weights were compared before this step ran (the first step, with
    `Schedule.verify_on_start`)."""
    audited: bool = False
    """The ring replay ran (an audit step, or check 1 fired)."""
    weights_checked: bool = False
    saved: bool = False


def job_rank_map() -> RankMap:
    """Every rank's node, instance and GPU, all-gathered once (`trainer_emitter.gather_rank_map`).
    A collective: call it on every rank, after `init_process_group`."""
    rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else None
    return gather_rank_map(local_rank_info(rank))


class SdcChecks:
    """The three in-training SDC checks around a DDP model. Build it on every rank after
    `init_process_group` and before the first backward (it registers the communication hook and
    all-gathers the rank map: a collective)."""

    def __init__(
        self,
        model: DistributedDataParallel,
        optimizer: torch.optim.Optimizer,
        loss_fn: LossFn,
        schedule: Schedule | None = None,
        *,
        max_grad_norm: float | None = None,
        save: SaveFn | None = None,
        rank_map: RankMap | None = None,
        emitter: Emitter | None = None,
        reporter_rank: int = 0,
        resume_tags: Mapping[str, Any] | None = None,
        checkpoints: Iterable[Mapping[str, Any]] | None = None,
        chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
        ledger: CheckpointLedger | None = None,
        resumed_from: int | None = None,
    ) -> None:
        """`resume_tags`: the tags of the checkpoint a restarted job resumed from.
        `checkpoints`: checkpoints known from before the start, each
        `{"step", "last_audit_pass", "last_weight_check_pass", "location"}` (a restarted job: at
        least the one it resumed from); alarms carry them with the ones saved from now on.
        `ledger`: the checkpoint directory's manifests and alarm markers, written by the reporter
        rank; `resumed_from`: the step of the checkpoint this run loaded, which retires the
        manifests of later steps and resolves the alarms whose window starts after it."""
        if not isinstance(model, DistributedDataParallel):
            raise TypeError("SdcChecks needs the DistributedDataParallel-wrapped model")
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("SdcChecks needs torch.distributed initialized (init_process_group)")
        self.ddp = model
        self.module: torch.nn.Module = model.module
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.schedule = schedule or Schedule()
        self.max_grad_norm = max_grad_norm
        self.save = save
        self.reporter_rank = reporter_rank
        self.chunk_elements = chunk_elements
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.rank_map = rank_map if rank_map is not None else job_rank_map()
        missing = [r for r in range(self.world) if r not in self.rank_map]
        if missing:
            raise ValueError(f"the rank map has no entry for ranks {missing}")
        nodes = node_names(
            {r: info.node_name for r in range(self.world) if (info := self.rank_map.get(r))},
            self.world,
        )
        self.offset = self.schedule.peer_offset or ranks_per_node(nodes)
        check_topology(nodes, self.offset)
        self.names = [name for name, _ in self.module.named_parameters()]
        self.parameters = [p for _, p in self.module.named_parameters()]
        self.device = self.parameters[0].device if self.parameters else torch.device("cpu")
        self.comm_device = comm_device()
        self.watch = GradientWatch(self.parameters, chunk_elements=chunk_elements)
        model.register_comm_hook(self.watch, comm_hook)
        self._armed = False
        self._buffers: dict[str, torch.Tensor] = {}
        self._pre_hook = self.module.register_forward_pre_hook(self._snapshot_buffers)
        self._emitter = emitter
        self.passes = Passes.from_tags(resume_tags)
        self.passes.checkpoints.extend(checkpoints or ())
        self._verify_pending = self.schedule.verify_on_start
        self.ledger = ledger if self.rank == reporter_rank else None
        self._marked: dict[str, Any] | None = None
        self._last_step: int | None = None
        """The step `step()` was last given: the weights in memory are that step's."""
        if self.ledger is not None and resumed_from is not None:
            self.ledger.resumed(resumed_from)

    # ---- the step -------------------------------------------------------------------------

    def step(self, step: int, batch: Any) -> StepResult:
        """One training step on this rank's micro-batch, checked. Returns the alarm (the same dict
        on every rank) or None in `StepResult.alarm`. The first step compares the replicas first
        (`verify_replicas`, unless `Schedule.verify_on_start` is off or the loop already did)."""
        result = self._step(step, batch)
        self._record(result)
        return result

    def _step(self, step: int, batch: Any) -> StepResult:
        self.passes.saw(step)
        self._last_step = step
        verified = self._verify_pending
        if verified:
            alarm = self.verify_replicas(step).alarm
            if alarm is not None:
                log.error("sdc replicas differ before step %d, step not taken: %s", step, alarm)
                return StepResult(step=step, loss=math.nan, alarm=alarm, replicas_verified=True)
        audit = self.schedule.is_audit(step)
        exact = audit and self.schedule.deterministic_audits
        self._zero_grads()
        own = Package.capture(batch, self.device)
        self._armed = True
        self.watch.begin(fingerprint_grads=exact)
        with self._kernels(exact):
            loss = self.loss_fn(self.ddp, batch)
            loss.backward()
        self._armed = False
        own.buffers = self._buffers
        loss = loss.detach()
        result = StepResult(step=step, loss=float(loss), replicas_verified=verified)

        nonfinite = self._nonfinite_ranks()
        if audit or nonfinite:
            result.audited = True
            original = make_record(
                loss,
                self.watch.grad_fingerprints if exact else None,
                len(self.parameters),
                self.comm_device,
                chunk_elements=self.chunk_elements,
            )
            with self._kernels(exact):
                pairs, named, verdicts = self._ring_replay(own, original, exact)
            if nonfinite or pairs:
                return self._refuse(
                    result,
                    self.passes.compute(
                        step,
                        nonfinite=nonfinite,
                        mismatched_pairs=pairs,
                        culprits=named,
                        verdicts=verdicts,
                    ),
                )
            self.passes.last_audit_pass = step

        if self._any_rank_nonfinite(self._clip()):
            return self._refuse(result, self.passes.reduced_gradient(step))
        self.optimizer.step()
        result.applied = True

        if self.schedule.is_weight_check(step):
            result.weights_checked = True
            weights = with_alarm(self._compare(), self.passes, step)
            if weights.alarm is not None:
                result.alarm = weights.alarm
                log.error("sdc weight check failed at step %d: %s", step, weights.alarm)
                return result
            self.passes.last_weight_check_pass = step
        if self.save is not None and self.schedule.is_checkpoint(step):
            self.passes.saved(step, location_of(self.save(step, self.passes.tags())))
            result.saved = True
        return result

    def verify_replicas(self, step: int) -> ReplicaVerdict:
        """Compare every replica's weights now, before `step` runs: after loading a checkpoint
        (or restoring any snapshot), so that a copy that differs is named before an update is
        built on it. A collective: call it on every rank. `step()` does it once before the first
        step it is given (`Schedule.verify_on_start`); a call here before that replaces it.

        Returns the verdict, with the `weights` alarm for `step` (the step about to run: the
        loaded checkpoint's + 1) when the copies differ; `trainer_emitter.checks.replicas` says
        what its window and passes mean. When they agree, records a weight check pass at
        `step - 1`."""
        self._verify_pending = False
        verdict = with_alarm(self._compare(), self.passes, step)
        if verdict.agree and step > 0:
            self.passes.last_weight_check_pass = step - 1
        if self.ledger is not None and verdict.alarm is not None:
            self.ledger.alarm(verdict.alarm)
            self._marked = verdict.alarm
        return verdict

    def tags(self) -> dict[str, int | None]:
        """The checkpoint tags now: the last audit pass and the last weight-check pass."""
        return self.passes.tags()

    def remember_checkpoint(self, step: int, location: str | None = None) -> dict[str, Any]:
        """A checkpoint the loop saved itself at `step` (after this step's checks), tagged with
        `tags()` as they stand: later alarms carry it like the ones `save` wrote. With a
        `ledger`, a save of the step just taken gets its manifest exactly as those do (so
        `safe_checkpoint` can propose it once a later audit and weight check pass): call it
        right after the save, before the next step. A checkpoint of any other step (one known
        from before a restart) is only carried: its manifest was written when it was saved."""
        entry = self.passes.saved(step, location)
        if step == self._last_step:
            self._write_manifest(entry)
        return entry

    # ---- the checkpoint directory ----------------------------------------------------------

    def _record(self, result: StepResult) -> None:
        """The reporter rank's manifests and markers for the step just taken (no collective)."""
        if self.ledger is None:
            return
        if result.alarm is not None:
            if result.alarm is not self._marked:  # verify_replicas wrote its own
                self.ledger.alarm(result.alarm)
            return
        self.ledger.passed(self.passes.last_audit_pass, self.passes.last_weight_check_pass)
        if result.saved:
            saved = [e for e in self.passes.checkpoints.entries() if e["step"] == result.step]
            entry = saved[0] if saved else checkpoint_entry(result.step, self.passes.tags())
            self._write_manifest(entry)

    def _write_manifest(self, entry: Mapping[str, Any]) -> None:
        """The reporter rank's manifest of the checkpoint `entry` (a `Checkpoints` entry: its
        step, the tags saved with it, its location) just saved, by `save` or by the loop."""
        if self.ledger is None:
            return
        self.ledger.saved(
            entry["step"],
            entry,
            location=entry["location"],
            fingerprint=weights_fingerprint(self.parameters, chunk_elements=self.chunk_elements),
        )

    # ---- reporting ------------------------------------------------------------------------

    def setup_emitter(self, **settings: Any) -> Emitter:
        """Build the process-wide emitter (`trainer_emitter.setup`) with the rank map these checks
        already all-gathered; settings as for `setup()`."""
        from trainer_emitter.emitter import setup

        self._emitter = setup(rank_map=self.rank_map, rank=self.rank, **settings)
        return self._emitter

    def report(self, alarm: Mapping[str, Any] | None) -> ReportResult | None:
        """`report(alarm)` once per job: on the reporter rank (0 by default) only, since every
        rank holds the same alarm. None when there is no alarm or this rank does not report. The
        emitter is the one given or set up here, else one built from the environment (SDC_*)."""
        if not alarm or self.rank != self.reporter_rank:
            return None
        if self._emitter is None:
            self._emitter = Emitter(rank_map=self.rank_map, rank=self.rank)
        return self._emitter.report(dict(alarm))

    def close(self) -> None:
        """Remove the buffer-snapshot hook (the communication hook stays with the DDP model)."""
        self._pre_hook.remove()

    # ---- check 1 and the reduced gradient --------------------------------------------------

    def _nonfinite_ranks(self) -> list[int]:
        norms = self._gather(self.watch.local_norm(self.comm_device)).reshape(-1)
        return [int(r) for r in torch.nonzero(~torch.isfinite(norms)).reshape(-1).tolist()]

    def _clip(self) -> torch.Tensor:
        grads = [p.grad for p in self.parameters if p.grad is not None]
        if not grads:
            return torch.zeros((), device=self.device)
        if self.max_grad_norm is None:
            return torch.linalg.vector_norm(
                torch.stack([torch.linalg.vector_norm(g) for g in grads])
            )
        return torch.nn.utils.clip_grad_norm_(self.parameters, self.max_grad_norm)

    def _any_rank_nonfinite(self, total_norm: torch.Tensor) -> bool:
        value = total_norm.detach().float().reshape(1).to(self.comm_device)
        norms = self._gather(value)
        return not bool(torch.isfinite(norms).all())

    # ---- check 2: the ring replay ------------------------------------------------------------

    def _ring_replay(
        self, own: Package, original: torch.Tensor, exact: bool
    ) -> tuple[list[list[int]], list[int], list[dict[str, Any]]]:
        world, offset, rank = self.world, self.offset, self.rank
        own_bytes = own.to_bytes()
        target = target_of(rank, offset, world)
        received = self._exchange({replayer_of(rank, offset, world): own_bytes}, [target])
        replay = self._recompute(Package.from_bytes(received[target], self.device), exact)
        rows = self._gather(torch.stack([original, replay]))  # (world, 2, L)
        originals = [tuple(rows[r, 0].tolist()) for r in range(world)]
        replays = [tuple(rows[r, 1].tolist()) for r in range(world)]
        pairs = mismatched_pairs(originals, replays, offset)
        named = culprits(pairs)
        unresolved = ambiguous(pairs, named)
        if not unresolved:
            return pairs, named, []

        # Confirmation: the third (target + offset) replays the target's micro-batch too, and the
        # target recomputes its own once more.
        thirds = [third_of(t, offset, world) for t, _ in unresolved]
        sends = {
            third: own_bytes for (t, _), third in zip(unresolved, thirds, strict=True) if t == rank
        }
        recvs = [t for (t, _), third in zip(unresolved, thirds, strict=True) if third == rank]
        received = self._exchange(sends, recvs)
        slots = torch.zeros((len(unresolved), 2, original.numel()), dtype=torch.int64)
        slots = slots.to(self.comm_device)
        for i, ((t, _), third) in enumerate(zip(unresolved, thirds, strict=True)):
            if third == rank:
                slots[i, 0] = self._recompute(Package.from_bytes(received[t], self.device), exact)
            if t == rank:
                slots[i, 1] = self._recompute(own, exact)
        dist.all_reduce(slots, op=dist.ReduceOp.SUM)  # each slot has exactly one writer
        verdicts = [
            verdict(
                pair,
                third,
                original=originals[pair[0]],
                replay=replays[pair[1]],
                third_replay=tuple(slots[i, 0].tolist()),
                recompute=tuple(slots[i, 1].tolist()),
            )
            for i, (pair, third) in enumerate(zip(unresolved, thirds, strict=True))
        ]
        return pairs, named, verdicts

    def _recompute(self, package: Package, exact: bool) -> torch.Tensor:
        return recompute(
            self.module,
            self.loss_fn,
            package,
            parameters=self.parameters,
            with_grads=exact,
            device=self.comm_device,
            chunk_elements=self.chunk_elements,
        )

    def _exchange(self, sends: Mapping[int, bytes], recvs: Sequence[int]) -> dict[int, bytes]:
        """Point-to-point: send each payload to its peer, receive one from each of `recvs`."""
        sizes = {src: torch.zeros(1, dtype=torch.int64, device=self.comm_device) for src in recvs}
        ops = [
            dist.P2POp(
                dist.isend,
                torch.tensor([len(data)], dtype=torch.int64, device=self.comm_device),
                dst,
            )
            for dst, data in sends.items()
        ]
        ops += [dist.P2POp(dist.irecv, sizes[src], src) for src in recvs]
        _wait(ops)
        payloads = {
            src: torch.empty(int(sizes[src].item()), dtype=torch.uint8, device=self.comm_device)
            for src in recvs
        }
        ops = [
            dist.P2POp(
                dist.isend,
                torch.frombuffer(bytearray(data), dtype=torch.uint8).to(self.comm_device),
                dst,
            )
            for dst, data in sends.items()
        ]
        ops += [dist.P2POp(dist.irecv, payloads[src], src) for src in recvs]
        _wait(ops)
        return {src: tensor_bytes(payload) for src, payload in payloads.items()}

    # ---- check 3: weights ---------------------------------------------------------------------

    def _compare(self) -> ReplicaVerdict:
        return compare(
            self.parameters,
            self.names,
            device=self.comm_device,
            chunk_elements=self.chunk_elements,
        )

    # ---- plumbing -----------------------------------------------------------------------------

    def _refuse(self, result: StepResult, alarm: dict[str, Any]) -> StepResult:
        self._zero_grads()
        result.alarm = alarm
        log.error("sdc alarm at step %d, step not applied: %s", result.step, alarm)
        return result

    def _zero_grads(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        for parameter in self.parameters:
            parameter.grad = None

    def _kernels(self, exact: bool) -> AbstractContextManager[None]:
        return deterministic() if exact else nullcontext()

    def _snapshot_buffers(self, module: torch.nn.Module, args: Any) -> None:
        if self._armed:  # the first forward of the step, after DDP broadcast the buffers
            self._armed = False
            self._buffers = snapshot_buffers(module)

    def _gather(self, tensor: torch.Tensor) -> torch.Tensor:
        """All ranks' `tensor` stacked: shape (world, *tensor.shape)."""
        return gather(tensor)


def _wait(ops: list[dist.P2POp]) -> None:
    if ops:
        for request in dist.batch_isend_irecv(ops):
            request.wait()
