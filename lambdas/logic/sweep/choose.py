"""Which idle nodes a sweep checks: pure, so every bound is tested on its own.

The bounds, all at once (the tightest names the reason for the idle nodes left out):
- the floor: at least `min_idle_nodes` idle nodes stay free of checks;
- the share: the nodes under a sweep's check (the ones still running included) are at most
  `max_share_percent` of the idle ones (rounded down: a cluster with few idle nodes may have
  none to spare);
- the guard: open incidents and running checks together stay within the blast-radius guard;
- the batch: at most `batch_size` per run.
Idle nodes are taken in instance id order, starting after the last one the previous run chose
(`cursor`), so that over runs every idle node gets its turn.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from sdc_remediation.lambdas.models.sweep import NodeLook, SkipReason, SweepRequest


@dataclass(frozen=True, slots=True)
class Choice:
    chosen: tuple[NodeLook, ...]
    skipped: dict[str, SkipReason] = field(default_factory=dict)
    idle: int = 0
    limit: int = 0


def choose(
    looks: Iterable[NodeLook],
    request: SweepRequest,
    *,
    in_incident: Collection[str],
    pending: Collection[str],
    guard_room: int,
    cursor: str | None = None,
) -> Choice:
    """The nodes to check now, and why each other node is not checked. `in_incident`: the
    instances an open incident speaks for; `pending`: those under a check an earlier run
    started; `guard_room`: the nodes the blast-radius guard has room for."""
    skipped: dict[str, SkipReason] = {}
    idle: list[NodeLook] = []
    for look in sorted(looks, key=lambda n: n.instance_id):
        if look.instance_id in pending:
            skipped[look.instance_id] = SkipReason.CHECK_RUNNING
        elif look.instance_id in in_incident:
            skipped[look.instance_id] = SkipReason.IN_INCIDENT
        elif not look.idle:
            skipped[look.instance_id] = look.why_not or SkipReason.BUSY
        else:
            idle.append(look)
    under_check = len(pending)
    bounds = (
        (len(idle) - request.min_idle_nodes, SkipReason.FLOOR),
        (
            (len(idle) + under_check) * request.max_share_percent // 100 - under_check,
            SkipReason.SHARE,
        ),
        (guard_room, SkipReason.GUARD),
        (request.batch_size, SkipReason.BATCH),
    )
    limit, reason = min(bounds, key=lambda bound: bound[0])
    limit = max(0, limit)
    turn = [n for n in idle if cursor is None or n.instance_id > cursor]
    ordered = turn + idle[: len(idle) - len(turn)]
    chosen = tuple(ordered[:limit])
    for look in ordered[limit:]:
        skipped[look.instance_id] = reason
    return Choice(chosen, skipped, len(idle), limit)
