"""Compare the data-parallel replicas' weights: check 3's vote, on schedule or on demand.

Every member of a group fingerprints its copy of each tensor (`fingerprints`), the fingerprints
are all-gathered, and one pure vote (`ring.weight_suspects`) names the ranks outside a strict
majority. `compare` below is that comparison; the driver's scheduled weight check (after
`optimizer.step()`), `SdcChecks.verify_replicas` and `find_divergent_ranks` all run it.

On demand: right after a job loads a checkpoint (or restores any snapshot), before its first
step, so that a copy that diverged on disk, in transit or in a GPU's memory is named before a
single update is built on it. Under DDP the copies are never compared again until the next
scheduled check, and each update is applied to every copy as it is: a wrong copy stays wrong.

The alarm of an on-demand check is a `weights` alarm like the scheduled one's:

- `step`: the step about to run, the first update that would be built on these weights (after
  loading the checkpoint of step s: s + 1). The driver does not take it when the check fires.
- `last_weight_check_pass`: the last weight check that passed before, for a resumed job the
  loaded checkpoint's tag (`SdcChecks(..., resume_tags=...)`, `tags=` here); never this check.
- `suspect_window`: `[last_weight_check_pass + 1, step]` as for every weights alarm. For a
  checkpoint saved at s behind its own passing weight check (the driver's default), that is
  `[s + 1, s + 1]`: no training step is in question, the copy went wrong between the save and
  now, and the checkpoint at s stays the one to resume from (the resume rule proposes the
  newest verified checkpoint before the window). Without tags the window is `[step, step]` (or
  starts at the first step the driver saw) and the loaded checkpoint is not verified, so the
  resume rule does not propose it.

When the copies agree, `SdcChecks.verify_replicas(step)` records a weight check pass at
`step - 1`: the weights the next update starts from are those after step - 1's.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from trainer_emitter.checks.alarms import Passes
from trainer_emitter.checks.comm import comm_device, gather
from trainer_emitter.checks.fingerprint import DEFAULT_CHUNK_ELEMENTS, fingerprints
from trainer_emitter.checks.ring import ReplicaVerdict, replica_verdict

log = logging.getLogger("trainer_emitter.checks")

Tensors = nn.Module | Mapping[str, torch.Tensor] | Iterable[torch.Tensor]


def find_divergent_ranks(
    model_or_params: Tensors,
    group: dist.ProcessGroup | None = None,
    *,
    step: int | None = None,
    tags: Mapping[str, Any] | None = None,
    checkpoints: Iterable[Mapping[str, Any]] | None = None,
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
) -> ReplicaVerdict:
    """Compare every copy of the weights in a data-parallel group; a collective of `group`.

    `model_or_params`: a module (a DDP model's parameters are its module's), a mapping of names
    to tensors, or tensors; the same tensors in the same order on every member. `group`: the
    ranks that hold full copies of the same tensors (None: every rank, as under DDP; for a
    layout that shards, the group that replicates one shard, with this rank's local shards).

    The verdict names the suspects by global rank: the ranks outside a strict majority, or None
    when there is none (`agreement` says "no strict majority", or "two copies disagree" for a
    group of two). When the copies differ, `alarm` is the `weights` alarm that `report()` takes,
    for `step`, the step about to run (the module docstring says what its window and passes
    mean); `tags` are the loaded checkpoint's (`last_audit_pass`, `last_weight_check_pass`),
    `checkpoints` the ones the job knows of (the loaded one at least), as `SdcChecks` takes
    them. A group smaller than the job's world puts its ranks in the alarm's `replicas`, so a
    report with no majority questions only them. Every member returns the same verdict: report
    it from one of them.

    `step` may be left out (`find_divergent_ranks(params, group)`): the verdict is the same, and
    an alarm is still built when the copies differ, but it names no step and no suspect window
    (the report lists both as errors, the approval card shows them unknown) and a warning says
    how to pass it. Pass `step=` whenever the step about to run is known."""
    passes = Passes.from_tags(tags)
    passes.checkpoints.extend(checkpoints or ())
    names, tensors = named_tensors(model_or_params)
    verdict = compare(tensors, names, group, chunk_elements=chunk_elements)
    return with_alarm(verdict, passes, step)


def compare(
    tensors: Sequence[torch.Tensor],
    names: Sequence[str],
    group: dist.ProcessGroup | None = None,
    *,
    device: torch.device | None = None,
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
) -> ReplicaVerdict:
    """The weight vote over `group` (a collective of it), without an alarm."""
    ranks = group_ranks(group)
    local = fingerprints(
        tensors, device=device or comm_device(group), chunk_elements=chunk_elements
    )
    rows = gather(local, group).tolist()  # [member][tensor] = [plain, weighted]
    keys = [tuple(value for pair in row for value in pair) for row in rows]
    verdict = replica_verdict(keys, ranks)
    if verdict.agree:
        return verdict
    differing = tuple(
        name for i, name in enumerate(names) if len({(row[i][0], row[i][1]) for row in rows}) > 1
    )
    log.error(
        "sdc weight fingerprints differ between ranks %s in %d tensors (%s): %s",
        list(ranks),
        len(differing),
        verdict.agreement.value,
        list(differing),
    )
    return replace(verdict, differing=differing)


def with_alarm(verdict: ReplicaVerdict, passes: Passes, step: int | None) -> ReplicaVerdict:
    """The verdict with its `weights` alarm for `step` when the copies differ (`step` None: an
    alarm that says the step is unknown, never a guessed one)."""
    if verdict.agree:
        return verdict
    if step is None:
        log.warning(
            "sdc: the weight copies differ but no step was given; the alarm names no step or "
            "suspect window: call find_divergent_ranks(..., step=<the step about to run>)"
        )
    whole = len(verdict.ranks) == dist.get_world_size()
    alarm = passes.weights(step, verdict.suspects, None if whole else verdict.ranks)
    return replace(verdict, alarm=alarm)


def group_ranks(group: dist.ProcessGroup | None) -> list[int]:
    """The global ranks of `group`'s members in group-rank order; raises ValueError when this
    rank is no member (it would wait in a collective the group never runs)."""
    if group is None:
        return list(range(dist.get_world_size()))
    if dist.get_rank(group) < 0:
        raise ValueError(
            f"rank {dist.get_rank()} is not in the group whose replicas it was asked to compare"
        )
    return list(dist.get_process_group_ranks(group))


def named_tensors(model_or_params: Tensors) -> tuple[list[str], list[torch.Tensor]]:
    """`(names, tensors)`: a module's named parameters (a DDP model's without the `module.`
    prefix), a mapping's items, or tensors named by position (`[0]`, `[1]`, …)."""
    if isinstance(model_or_params, DistributedDataParallel):
        model_or_params = model_or_params.module
    pairs: list[tuple[str, torch.Tensor]]
    if isinstance(model_or_params, nn.Module):
        pairs = list(model_or_params.named_parameters())
    elif isinstance(model_or_params, Mapping):
        pairs = [(str(name), tensor) for name, tensor in model_or_params.items()]
    else:
        pairs = [(f"[{i}]", tensor) for i, tensor in enumerate(model_or_params)]
    return [name for name, _ in pairs], [tensor for _, tensor in pairs]
