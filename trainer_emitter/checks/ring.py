"""The decisions of the ring replay and the weight vote. Pure: no torch, no collectives.

Every rank runs these on the same all-gathered data, so every rank reaches the same verdict
without another round of messages.

Ring: rank r replays the micro-batch of its *target* t = r + offset (mod world). A pair is
`(target, replayer)`; it mismatches when the replayer's result differs from the target's own.
Every rank is in two pairs (once as target, once as replayer); a rank in two mismatched pairs is a
culprit. A mismatched pair with no culprit in it is ambiguous and is confirmed by a *third* rank,
target + offset, which replays the target's micro-batch as well, while the target recomputes it
once more:

| third agrees with   | target's recompute         | verdict                  | suspect  |
|---------------------|----------------------------|--------------------------|----------|
| the replayer        | right (= the replayer's)   | transient                | target   |
| the replayer        | still wrong                | persistent               | target   |
| the target          | (not needed)               | replayer computed wrong  | replayer |
| neither             | (not needed)               | unattributable           | none     |
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from trainer_emitter.contract import VerdictKind


class TopologyError(ValueError):
    """The ranks cannot be laid out so that replayer, target and third sit on three nodes."""


def target_of(replayer: int, offset: int, world: int) -> int:
    return (replayer + offset) % world


def replayer_of(target: int, offset: int, world: int) -> int:
    return (target - offset) % world


def third_of(target: int, offset: int, world: int) -> int:
    return (target + offset) % world


def ranks_per_node(nodes: Sequence[str | None]) -> int:
    """The largest number of ranks on one node: the default offset, which puts a rank's replayer
    on another node when ranks fill nodes in order."""
    counts = Counter(nodes)
    return max(counts.values()) if counts else 1


def check_topology(nodes: Sequence[str | None], offset: int) -> None:
    """Raise TopologyError unless, for every target, replayer, target and third run on three
    different nodes (`nodes[rank]` is the rank's node name: NODE_NAME, else SLURMD_NODENAME)."""
    world = len(nodes)
    unknown = [rank for rank, node in enumerate(nodes) if not node]
    if unknown:
        raise TopologyError(
            f"ranks {unknown} have no node name: set NODE_NAME on every rank (Kubernetes "
            "downward API, spec.nodeName), or run them under Slurm, which sets SLURMD_NODENAME, "
            "so that the ring replay can pick peers on other nodes"
        )
    if len(set(nodes)) < 3:
        raise TopologyError(
            f"the ring replay needs at least 3 nodes (replayer, target and third on three "
            f"different nodes); this job has {len(set(nodes))}"
        )
    if not 0 < offset < world:
        raise TopologyError(f"peer offset {offset} must be between 1 and {world - 1}")
    for target in range(world):
        replayer = replayer_of(target, offset, world)
        third = third_of(target, offset, world)
        placed = {nodes[replayer], nodes[target], nodes[third]}
        if len(placed) < 3:
            raise TopologyError(
                f"peer offset {offset}: replayer {replayer} ({nodes[replayer]}), target {target} "
                f"({nodes[target]}) and third {third} ({nodes[third]}) are not on three different "
                "nodes; choose an offset of ranks-per-node and at least 3 nodes"
            )


def mismatched_pairs(
    originals: Sequence[Hashable], replays: Sequence[Hashable], offset: int
) -> list[list[int]]:
    """`[target, replayer]` for every target whose replay differs from its own result.
    `originals[t]` is rank t's own result; `replays[r]` is rank r's replay of its target's."""
    world = len(originals)
    pairs: list[list[int]] = []
    for target in range(world):
        replayer = replayer_of(target, offset, world)
        if originals[target] != replays[replayer]:
            pairs.append([target, replayer])
    return pairs


def culprits(pairs: Sequence[Sequence[int]]) -> list[int]:
    """Ranks that are in two mismatched pairs."""
    counts = Counter(rank for pair in pairs for rank in set(pair))
    return sorted(rank for rank, count in counts.items() if count >= 2)


def ambiguous(pairs: Sequence[Sequence[int]], named: Sequence[int]) -> list[list[int]]:
    """Mismatched pairs that no culprit explains."""
    return [list(pair) for pair in pairs if not set(pair) & set(named)]


def verdict(
    pair: Sequence[int],
    third: int,
    *,
    original: Hashable,
    replay: Hashable,
    third_replay: Hashable,
    recompute: Hashable,
) -> dict[str, Any]:
    """The verdict on an ambiguous pair (see the table above), as the alarm dict carries it."""
    target, replayer = pair
    if third_replay == replay:
        kind = VerdictKind.TRANSIENT if recompute == replay else VerdictKind.PERSISTENT
        suspect: int | None = target
    elif third_replay == original:
        kind, suspect = VerdictKind.REPLAYER, replayer
    else:
        kind, suspect = VerdictKind.UNATTRIBUTABLE, None
    return {"pair": [target, replayer], "third": third, "suspect": suspect, "kind": kind.value}


def weight_suspects(rows: Sequence[Hashable]) -> tuple[bool, list[int] | None]:
    """`(agree, suspects)` from every rank's weight fingerprints (`rows[rank]`).

    All equal: `(True, [])`. A strict majority agrees: `(False, ranks outside it)`. No strict
    majority: `(False, None)`: the copies diverge and nobody can be named."""
    counts = Counter(rows)
    if len(counts) <= 1:
        return True, []
    value, count = counts.most_common(1)[0]
    if 2 * count <= len(rows):
        return False, None
    return False, [rank for rank, row in enumerate(rows) if row != value]


class Agreement(StrEnum):
    """What the weight vote found, in words a log line or a caller can branch on."""

    AGREE = "agree"
    MINORITY = "minority differs"
    """A strict majority agrees; the ranks outside it are named."""
    NO_MAJORITY = "no strict majority"
    """Three or more copies and no strict majority: nobody can be named."""
    TWO_DISAGREE = "two copies disagree"
    """Two copies differ: either may be wrong, nobody can be named."""


@dataclass(frozen=True, slots=True)
class ReplicaVerdict:
    """The weight vote over one data-parallel group, in global ranks.

    `suspects`: `[]` when every copy agrees, the ranks outside a strict majority, or None when
    no strict majority exists (with two copies, whenever they differ). `differing`: the names of
    the tensors whose fingerprints differ between copies. `alarm`: the `weights` alarm dict that
    `report()` takes, or None when the copies agree or the caller built none."""

    ranks: tuple[int, ...]
    """The global ranks whose copies were compared, in the group's order."""
    suspects: list[int] | None
    differing: tuple[str, ...] = ()
    alarm: dict[str, Any] | None = None

    @property
    def agree(self) -> bool:
        return self.suspects == []

    @property
    def agreement(self) -> Agreement:
        if self.agree:
            return Agreement.AGREE
        if self.suspects is not None:
            return Agreement.MINORITY
        return Agreement.TWO_DISAGREE if len(self.ranks) == 2 else Agreement.NO_MAJORITY


def replica_verdict(
    rows: Sequence[Hashable], ranks: Sequence[int], differing: Sequence[str] = ()
) -> ReplicaVerdict:
    """The vote (`weight_suspects`) on `rows[i]`, the fingerprints of the copy held by global rank
    `ranks[i]`, with the suspects named by their global ranks."""
    if len(rows) != len(ranks):
        raise ValueError(f"{len(rows)} fingerprint rows for {len(ranks)} ranks")
    _, local = weight_suspects(rows)
    suspects = None if local is None else sorted(ranks[i] for i in local)
    return ReplicaVerdict(tuple(ranks), suspects, tuple(differing))


def node_names(entries: Mapping[int, str | None], world: int) -> list[str | None]:
    """`nodes[rank]` for ranks 0 … world-1 from a rank → node mapping (missing: None)."""
    return [entries.get(rank) for rank in range(world)]
