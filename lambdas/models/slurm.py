"""What the pipeline knows about a Slurm controller's nodes: the drain reason that names an
incident, a node as `scontrol -o show node` shows it, and what a drain or a resume did.

A drain is ours only when its reason (the `Reason` field as `reason_field` reads it) is exactly
`drain_reason(incident_id)`: one that extends ours is not. Any other reason belongs to whoever set it (an operator, HyperPod's `Action:Replace`, Slurm's own "Not
responding"): reported, never overwritten, never resumed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

DRAIN_REASON_PREFIX: Final = "sdc-remediation incident "
RUN_SHELL_SCRIPT: Final = "AWS-RunShellScript"
"""The SSM document the commands on a controller are sent as (AWS-owned: none of ours to deploy;
the functions' roles may send it to the configured controllers only)."""
REASON_KEY: Final = " Reason="
STAMP_TIME: Final = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
"""The time in the ` [user@time]` Slurm appends to a reason (its standard format; the controller
scripts set `SLURM_TIME_FORMAT=standard`, so an operator's own `[...@...]` is no stamp)."""
FREE_TEXT_KEYS: Final = (" Comment=", " Extra=")
"""Fields an administrator fills with free text, which Slurm writes after the reason: a
` Reason=` found after one of them is their text, not the node's reason."""


def reason_field(line: str) -> tuple[str, str] | None:
    """The node's reason and who set it, from one line of `scontrol -o show node`; None when the
    node carries none. The reason is the `Reason` field (the first ` Reason=` key, before any
    free-text field), and runs to the first ` [user@time]` Slurm writes after it (a later
    `[...]` of an operator's own is part of the reason). The controller scripts
    (`adapters/slurm.REASON_OF`) read it the same way, step for step. The stamp is the first
    `[...]` that ends with `@` and a time in Slurm's standard format."""
    key = line.find(REASON_KEY)
    if key < 0 or any(line.find(free, 0, key) >= 0 for free in FREE_TEXT_KEYS):
        return None
    rest, reason = line[key + len(REASON_KEY) :], ""
    while (cut := rest.find(" [")) >= 0:
        after = rest[cut + 2 :]
        stamp, closed, _ = after.partition("]")
        user, at, time = stamp.rpartition("@")
        if closed and at and STAMP_TIME.fullmatch(time):
            return reason + rest[:cut], user
        reason, rest = reason + rest[: cut + 2], after
    return None


_STATE = re.compile(r" State=(?P<state>\S+)")
_NAME = re.compile(r"NodeName=(?P<name>\S+)")


def drain_reason(incident_id: str) -> str:
    """The reason our drain carries: the incident that set it (what the release looks for)."""
    return f"{DRAIN_REASON_PREFIX}{incident_id}"


def slurm_node_name(private_dns_hostname: str) -> str:
    """HyperPod names a Slurm node after its host: `ip-10-1-69-242` for
    `ip-10-1-69-242.us-west-2.compute.internal` (DescribeClusterNode's PrivateDnsHostname)."""
    return private_dns_hostname.split(".", 1)[0]


KEPT_OUT: Final = frozenset({"DRAIN", "DRAINED", "DRAINING", "DOWN", "FAIL", "FAILING"})
"""The state words of a node the scheduler places no job on (`scontrol` writes `IDLE+DRAIN`,
`DOWN+FAIL`; `DRAINED` and `DRAINING` are how `sinfo` words a drain)."""


@dataclass(frozen=True, slots=True)
class SlurmNodeState:
    """One node as `scontrol -o show node <name>` shows it."""

    name: str
    state: str
    """The state and its flags as Slurm writes them: `IDLE+DRAIN`, `MIXED+DRAIN`, `DOWN+FAIL`."""
    reason: str | None
    reason_user: str | None

    @property
    def flags(self) -> frozenset[str]:
        return frozenset(self.state.split("+"))

    @property
    def drained(self) -> bool:
        """Drained or draining: new jobs stay off it (running ones finish)."""
        return "DRAIN" in self.flags

    @property
    def in_service(self) -> bool:
        """Neither drained, down nor failed: the scheduler may place jobs on it."""
        return not self.flags & KEPT_OUT

    @classmethod
    def parse(cls, line: str) -> SlurmNodeState:
        """From one line of `scontrol -o show node <name>`; ValueError for anything else."""
        name = _NAME.match(line)
        state = _STATE.search(line)
        if name is None or state is None:
            raise ValueError(f"not a line of `scontrol -o show node`: {line[:200]!r}")
        reason = reason_field(line)
        return cls(
            name=name.group("name"),
            state=state.group("state"),
            reason=reason[0] if reason else None,
            reason_user=reason[1] if reason else None,
        )


class DrainOutcome(StrEnum):
    """What a drain or a resume command found and did on the controller."""

    DRAINED = "drained"
    """We drained it now, with our reason."""
    ALREADY_OURS = "already_ours"
    """It carried our reason already (a retried step)."""
    FOREIGN = "foreign"
    """It carried someone else's reason: left as it was."""
    RESUMED = "resumed"
    """Our drain was lifted (`state=resume`)."""
    NOT_DRAINED = "not_drained"
    """Nothing to lift: no reason on it any more."""


@dataclass(frozen=True, slots=True)
class DrainChange:
    """A drain or resume command's result: the node before and after, and what it did."""

    node_name: str
    outcome: DrainOutcome
    before: SlurmNodeState
    after: SlurmNodeState
    command_id: str | None = None

    @property
    def found_reason(self) -> str | None:
        """Someone else's reason, found on the node (FOREIGN)."""
        return self.before.reason if self.outcome is DrainOutcome.FOREIGN else None

    def to_record(self) -> dict[str, Any]:
        return {
            "node_name": self.node_name,
            "outcome": str(self.outcome),
            "state_before": self.before.state,
            "state_after": self.after.state,
            "found_reason": self.found_reason,
            "command_id": self.command_id,
        }
