"""A failure history by root cause, and what would signal each cause to whom, after what delay.

The default history is Llama 3 405B's pre-training: 419 unexpected interruptions in 54 days on
16,384 H100 GPUs, by root cause as the paper's table gives them (Llama Team, AI @ Meta, "The
Llama 3 Herd of Models", arXiv 2407.21783, section 3.3.4, Table 5). The signal, its delay,
whether HyperPod's own health agent sees the cause and whether a deep health check fails on the
node are this project's reading of each cause, not the paper's: a team that knows better passes
its own history (`read_history`).

A team's history is a CSV file with a header and one row per cause: `cause`, `count`, `signal`
(a `Signal` value), `delay_seconds` (from the fault to the signal reaching the pipeline),
`hyperpod_sees` and `node_fault` (`true` / `false`), and optionally `rule` (the hardware alert
rule, for `hardware alert`).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final

from sdc_remediation.lambdas.models.hardware_alert import HardwareRule

PAPER: Final = "Llama 3 405B pre-training, arXiv 2407.21783 (Table 5): 419 unexpected interruptions"
DAYS: Final = 54
"""The days the default history spans."""
NODES: Final = 2048
"""Instances of the default cluster: 16,384 GPUs, 8 per instance."""


class Signal(StrEnum):
    """What tells someone that a cause struck."""

    HYPERPOD_AGENT = "hyperpod agent"
    """HyperPod's own health agent (XIDs, host checks): with automatic node recovery it reboots
    or replaces the node itself; this pipeline is not asked."""
    HARDWARE_ALERT = "hardware alert"
    """The GPU's own counters, through the workspace's alerting rules (`sdc:hardwareAlerts`)."""
    SDC_CHECK = "sdc check"
    """The emitter's replay audit names the culprit rank (an SDC report)."""
    HANG_WATCHDOG = "hang watchdog"
    """The training watch's hang alarm: it names no culprit on its own."""
    STRAGGLER = "straggler score"
    """The training watch's straggler alarm: a notice without hardware corroboration."""
    JOB_RESTART = "job restart"
    """Nothing points at a node: the training operator restarts the job."""


@dataclass(frozen=True, slots=True)
class Cause:
    name: str
    count: int
    signal: Signal
    delay_seconds: float
    hyperpod_sees: bool
    """HyperPod's own agent detects it (and, with automatic recovery, replaces the node)."""
    node_fault: bool
    """The node is bad: its deep health check fails."""
    rule: HardwareRule | None = None


def _cause(
    name: str,
    count: int,
    signal: Signal,
    delay: float,
    *,
    hyperpod: bool,
    fault: bool,
    rule: HardwareRule | None = None,
) -> Cause:
    return Cause(name, count, signal, delay, hyperpod, fault, rule)


S = Signal
R = HardwareRule
LLAMA3_405B: Final = (
    _cause("faulty GPU", 148, S.HARDWARE_ALERT, 60, hyperpod=True, fault=True, rule=R.XID),
    _cause(
        "GPU HBM3 memory",
        72,
        S.HARDWARE_ALERT,
        60,
        hyperpod=True,
        fault=True,
        rule=R.UNCORRECTABLE_ECC,
    ),
    _cause("software bug", 54, S.JOB_RESTART, 0, hyperpod=False, fault=False),
    _cause("network switch/cable", 35, S.HANG_WATCHDOG, 600, hyperpod=False, fault=False),
    _cause("host maintenance", 32, S.HYPERPOD_AGENT, 60, hyperpod=True, fault=True),
    _cause(
        "GPU SRAM memory",
        19,
        S.HARDWARE_ALERT,
        60,
        hyperpod=True,
        fault=True,
        rule=R.UNCORRECTABLE_ECC,
    ),
    _cause("GPU system processor", 17, S.HARDWARE_ALERT, 60, hyperpod=True, fault=True, rule=R.XID),
    _cause("NIC", 7, S.HARDWARE_ALERT, 300, hyperpod=False, fault=True, rule=R.LINK_DOWNTIME),
    _cause("NCCL watchdog timeouts", 7, S.HANG_WATCHDOG, 600, hyperpod=False, fault=False),
    _cause("silent data corruption", 6, S.SDC_CHECK, 1800, hyperpod=False, fault=False),
    _cause(
        "GPU thermal interface + sensor",
        6,
        S.HARDWARE_ALERT,
        300,
        hyperpod=False,
        fault=True,
        rule=R.THROTTLING,
    ),
    _cause("SSD", 3, S.HYPERPOD_AGENT, 60, hyperpod=True, fault=True),
    _cause("power supply", 3, S.HYPERPOD_AGENT, 60, hyperpod=True, fault=True),
    _cause("server chassis", 2, S.HYPERPOD_AGENT, 60, hyperpod=True, fault=True),
    _cause("IO network", 2, S.HANG_WATCHDOG, 600, hyperpod=False, fault=False),
    _cause("dependency", 2, S.JOB_RESTART, 0, hyperpod=False, fault=False),
    _cause("CPU", 2, S.HYPERPOD_AGENT, 60, hyperpod=True, fault=True),
    _cause("system memory", 2, S.HYPERPOD_AGENT, 60, hyperpod=True, fault=True),
)
"""The paper's table, cause by cause (the counts add up to its 419)."""

COLUMNS: Final = ("cause", "count", "signal", "delay_seconds", "hyperpod_sees", "node_fault")


class HistoryError(ValueError):
    """A history file that does not read: the message names the file, line and column."""


def _flag(text: str, where: str) -> bool:
    if text.strip().lower() not in ("true", "false"):
        raise HistoryError(f"{where}: expected true or false, got {text!r}")
    return text.strip().lower() == "true"


def read_history(path: Path) -> tuple[Cause, ...]:
    """A team's history (the module's docstring says the columns)."""
    try:
        rows = list(csv.DictReader(path.read_text(encoding="utf-8-sig").splitlines()))
    except OSError as err:
        raise HistoryError(f"cannot read {path}: {err.strerror or err}") from None
    if not rows:
        raise HistoryError(f"{path}: no causes (a header and one row per cause)")
    missing = [c for c in COLUMNS if c not in rows[0]]
    if missing:
        raise HistoryError(f"{path}: missing columns {missing} (needs {', '.join(COLUMNS)})")
    causes = []
    for line, row in enumerate(rows, start=2):
        where = f"{path}:{line}"
        empty = [c for c in COLUMNS if row[c] is None]
        if empty:
            raise HistoryError(f"{where}: no value for {', '.join(empty)}")
        try:
            signal = Signal(row["signal"].strip())
        except ValueError:
            raise HistoryError(
                f"{where}: signal {row['signal']!r} is none of {', '.join(Signal)}"
            ) from None
        try:
            count, delay = int(row["count"]), float(row["delay_seconds"])
        except ValueError as err:
            raise HistoryError(f"{where}: count and delay_seconds are numbers: {err}") from None
        if count < 0 or not (math.isfinite(delay) and delay >= 0):
            raise HistoryError(f"{where}: count and delay_seconds are finite numbers, 0 or more")
        rule = (row.get("rule") or "").strip()
        try:
            parsed_rule = HardwareRule(rule) if rule else None
        except ValueError:
            raise HistoryError(f"{where}: rule {rule!r} is none of {', '.join(R)}") from None
        if signal is S.HARDWARE_ALERT and parsed_rule is None:
            raise HistoryError(f"{where}: a hardware alert names its rule")
        causes.append(
            Cause(
                name=row["cause"].strip(),
                count=count,
                signal=signal,
                delay_seconds=delay,
                hyperpod_sees=_flag(row["hyperpod_sees"], where),
                node_fault=_flag(row["node_fault"], where),
                rule=parsed_rule,
            )
        )
    return tuple(causes)


def causes_table(causes: tuple[Cause, ...] = LLAMA3_405B) -> str:
    """The Markdown table docs/fleet.md shows of a history: each cause, what signals it, after
    what delay, and whether HyperPod's agent sees it and a deep health check fails."""

    def yes(flag: bool) -> str:
        return "yes" if flag else "no"

    rows = [
        "| cause | faults | signal | delay (s) | HyperPod's agent sees it | deep health check fails |",
        "|---|---|---|---|---|---|",
        *(
            f"| {c.name} | {c.count} | {c.signal.value}"
            + (f" (`{c.rule.value}`)" if c.rule else "")
            + f" | {c.delay_seconds:g} | {yes(c.hyperpod_sees)} | {yes(c.node_fault)} |"
            for c in causes
        ),
    ]
    return "\n".join(rows)
