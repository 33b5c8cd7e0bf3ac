"""Compare the data-parallel replicas' weights: check 3's vote.

Every member of a group fingerprints its copy of each tensor (`fingerprints`), the fingerprints
are all-gathered, and one pure vote (`ring.weight_suspects`) names the ranks outside a strict
majority, by global rank. `compare` below is that comparison; the driver's scheduled weight check
(after `optimizer.step()`) runs it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

import torch
import torch.distributed as dist

from trainer_emitter.checks.alarms import Passes
from trainer_emitter.checks.comm import comm_device, gather
from trainer_emitter.checks.fingerprint import DEFAULT_CHUNK_ELEMENTS, fingerprints
from trainer_emitter.checks.ring import ReplicaVerdict, replica_verdict

log = logging.getLogger("trainer_emitter.checks")


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


def with_alarm(verdict: ReplicaVerdict, passes: Passes, step: int) -> ReplicaVerdict:
    """The verdict with its `weights` alarm for `step` when the copies differ."""
    if verdict.agree:
        return verdict
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
