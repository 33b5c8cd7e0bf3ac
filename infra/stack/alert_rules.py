"""Prometheus alerting rules over the GPU's own counters, as code: the rule groups the stack puts
in each telemetry cluster's Amazon Managed Service for Prometheus workspace
(`AWS::APS::RuleGroupsNamespace`, YAML in Prometheus' rule file format).

    rules_yaml("ml-cluster-1", node_label=None, thresholds=Thresholds())

The series are read as the HyperPod observability add-on stores dcgm-exporter's: counter-type
families under their name with `_total` (`sdc_remediation.lambdas.logic.evidence.dcgm.Family.stored_names` asks
for both forms, and for the names dcgm-exporter 4.9 took from DCGM 4.7), gauges as exported,
the node in `Hostname` (`hostname` since exporter 4.8.3) unless the cluster's `nodeLabel` names
another label. Every alert carries `sdc_remediation.lambdas.models.hardware_alert.AlertLabel`'s labels; the
annotations are plain text, fixed per rule (the numbers in them are the thresholds), so an alert
says nothing its labels do not.

Thresholds and windows are `Thresholds` (`sdc:hardwareAlerts`), each with its default and the
reason for it in `THRESHOLD_KEYS` (docs/deploy.md, "Hardware alerts", shows that table).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import yaml

from sdc_remediation.lambdas.logic.evidence.dcgm import FAMILIES, Family
from sdc_remediation.lambdas.logic.evidence.xids import CATALOG, XidCause
from sdc_remediation.lambdas.models.hardware_alert import AlertLabel, AlertSeverity, HardwareRule
from sdc_remediation.lambdas.models.quantity import count

GROUP: Final = "sdc-gpu-hardware"
EVALUATION_INTERVAL: Final = "1m"
NODE_LABELS: Final = ("Hostname", "hostname")
"""dcgm-exporter's node label: `Hostname` up to 4.8.2, `hostname` since 4.8.3."""
GPU_UUID_LABELS: Final = ("UUID", "uuid")
"""dcgm-exporter's GPU UUID label (`uuid` with its `--use-old-namespace` option)."""
BLANK_BELOW: Final = "9e18"
"""DCGM's blank values (2^63 - 16 and above) mean "no reading": a gauge is read only below."""

THROTTLE_BITS: Final[Mapping[int, str]] = {
    0x08: "HW slowdown",
    0x40: "HW thermal slowdown",
    0x80: "HW power brake",
}
"""The bits of `DCGM_FI_DEV_CLOCK_THROTTLE_REASONS` (`..._CLOCKS_EVENT_REASONS` in newer
exporters) that mean the hardware protected itself. SW power cap (0x4) is normal under load;
SW thermal slowdown (0x20) is the driver's, not a hardware alarm."""
LINK_SERIES: Final = "node_infiniband_state_id"
"""node_exporter's infiniband collector: the port's logical state (EFA devices are infiniband
devices to it); 4 is ACTIVE."""
LINK_ACTIVE: Final = 4
LINK_STEP_SECONDS: Final = 15
"""The resolution the downtime is summed at (the add-on's scrape interval): the downtime is the
number of 15-second steps in the window at which the port was not ACTIVE, times 15."""
NVLINK_COUNTERS: Final = ("nvlink_crc_flit", "nvlink_crc_data", "nvlink_replay", "nvlink_recovery")
"""dcgm-exporter's NVLink error totals (`sdc_remediation.lambdas.logic.evidence.dcgm` family keys)."""


@dataclass(frozen=True)
class Thresholds:
    """The rules' thresholds and windows (`sdc:hardwareAlerts`); `THRESHOLD_KEYS` gives each
    one's reason."""

    throttle_minutes: int = 5
    nvlink_errors: int = 10
    nvlink_window_minutes: int = 15
    ecc_window_minutes: int = 10
    pcie_replays: int = 100
    pcie_window_minutes: int = 10
    link_downtime_seconds: int = 120
    link_window_minutes: int = 60
    critical_xids: tuple[int, ...] = tuple(
        code for code, xid in sorted(CATALOG.items()) if xid.cause is XidCause.HARDWARE
    )


@dataclass(frozen=True)
class ThresholdKey:
    """One key of `sdc:hardwareAlerts`: the `Thresholds` field it sets, its bounds and why its
    default is what it is."""

    attr: str
    low: int
    high: int
    unit: str
    reason: str


THRESHOLD_KEYS: Final[Mapping[str, ThresholdKey]] = {
    "throttleMinutes": ThresholdKey(
        "throttle_minutes",
        1,
        1440,
        "minutes",
        "a power or thermal spike throttles a healthy GPU for seconds; the hardware holding the "
        "clocks down for minutes is a cooling, power or board fault",
    ),
    "nvlinkErrors": ThresholdKey(
        "nvlink_errors",
        0,
        1_000_000,
        "errors per window",
        "a CRC error now and then is repaired by a replay; a steady stream is a degrading lane",
    ),
    "nvlinkWindowMinutes": ThresholdKey(
        "nvlink_window_minutes",
        1,
        1440,
        "minutes",
        "long enough to tell a stream from a burst, short enough to act within the job",
    ),
    "eccWindowMinutes": ThresholdKey(
        "ecc_window_minutes",
        1,
        1440,
        "minutes",
        "any uncorrectable error counts; the window only has to span a few scrapes",
    ),
    "pcieReplays": ThresholdKey(
        "pcie_replays",
        0,
        1_000_000,
        "replays per window",
        "a healthy link replays rarely; hundreds in minutes is a marginal link or riser",
    ),
    "pcieWindowMinutes": ThresholdKey(
        "pcie_window_minutes",
        1,
        1440,
        "minutes",
        "spans a few scrapes, so a counter reset or one slow scrape does not decide",
    ),
    "linkDowntimeSeconds": ThresholdKey(
        "link_downtime_seconds",
        15,
        86_400,
        "seconds down per window",
        "a port retrains in seconds; minutes down in total break the job's collectives, "
        "whether in one outage or in many flaps (judged by total downtime, not by flap count)",
    ),
    "linkWindowMinutes": ThresholdKey(
        "link_window_minutes",
        5,
        1440,
        "minutes",
        "an hour: flaps minutes apart add up, one flap a day does not",
    ),
}
"""`sdc:hardwareAlerts` keys → what each sets (the integers; `criticalXids` is a list)."""
CRITICAL_XIDS_KEY: Final = "criticalXids"
CRITICAL_XIDS_REASON: Final = (
    "the XIDs NVIDIA's catalog puts down to the hardware (`sdc_remediation.lambdas.logic.evidence.xids`): "
    "application XIDs (13, 31, 43) say little about the GPU"
)


@dataclass(frozen=True)
class Rule:
    """One alerting rule: its alert name, expression, how long it must hold, and what it says."""

    alert: str
    rule: HardwareRule
    severity: AlertSeverity
    expr: str
    summary: str
    hold: str | None = None
    """Prometheus' `for`: how long the expression must hold before the alert fires."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Labels of this rule beyond the common ones (the XID, the NVLink counter)."""
    annotations: Mapping[str, str] = field(default_factory=dict)
    per_gpu: bool = True
    """False: a network port's rule (no GPU labels)."""


def label_ref(name: str) -> str:
    """A label of the alerting series, as a rule label's template names it."""
    return "{{ $labels." + name + " }}"


def node_template(node_label: str | None) -> str:
    """The `node` label's template: the cluster's `nodeLabel`, else dcgm-exporter's."""
    names = (node_label,) if node_label else NODE_LABELS
    return "".join(label_ref(name) for name in names)


def _selector(names: Sequence[str]) -> str:
    return '{__name__=~"' + "|".join(names) + '"}'


def _family(key: str) -> Family:
    return next(family for family in FAMILIES if family.key == key)


def _stored(key: str) -> str:
    """A family's selector over every name its series can have in the workspace."""
    return _selector(_family(key).stored_names)


def _minutes(value: int) -> str:
    return f"{value}m"


def rules(thresholds: Thresholds) -> list[Rule]:
    """The rules, in the order the rule file lists them."""
    t = thresholds
    clocks = f"({_stored('clocks')} < {BLANK_BELOW})"
    throttled = " or ".join(f"{clocks} % {bit * 2} >= {bit}" for bit in sorted(THROTTLE_BITS))
    found = [
        Rule(
            "GpuHardwareThrottling",
            HardwareRule.THROTTLING,
            AlertSeverity.WARNING,
            throttled,
            f"The hardware held the GPU's clocks down ({', '.join(THROTTLE_BITS.values())}) "
            f"for {count(t.throttle_minutes, 'minute')} or more.",
            hold=_minutes(t.throttle_minutes),
        ),
    ]
    xid = _stored("xid")
    for code in t.critical_xids:
        meaning = CATALOG[code]
        found.append(
            Rule(
                "GpuCriticalXid",
                HardwareRule.XID,
                AlertSeverity.WARNING,
                f"{xid} == {code}",
                f"The driver logged XID {code}: {meaning.text}.",
                labels={AlertLabel.XID: str(code)},
                annotations={"meaning": meaning.meaning},
            )
        )
    found += [
        Rule(
            "GpuRowRemapFailure",
            HardwareRule.ROW_REMAP_FAILURE,
            AlertSeverity.CRITICAL,
            f"({_stored('row_remap_failed')} > 0) < {BLANK_BELOW}",
            "Row remap failed: the GPU's memory has no spare row left to repair a faulty one.",
        ),
        Rule(
            "GpuUncorrectableEcc",
            HardwareRule.UNCORRECTABLE_ECC,
            AlertSeverity.CRITICAL,
            f"increase({_stored('ecc_dbe')}[{_minutes(t.ecc_window_minutes)}]) > 0",
            f"Uncorrectable (double-bit) ECC errors rose within {count(t.ecc_window_minutes, 'minute')}.",
        ),
    ]
    for key in NVLINK_COUNTERS:
        family = _family(key)
        found.append(
            Rule(
                "GpuNvlinkErrors",
                HardwareRule.NVLINK_ERRORS,
                AlertSeverity.WARNING,
                f"increase({_stored(key)}[{_minutes(t.nvlink_window_minutes)}]) "
                f"> {t.nvlink_errors}",
                f"{family.words} rose by more than {t.nvlink_errors} within "
                f"{count(t.nvlink_window_minutes, 'minute')}.",
                labels={AlertLabel.COUNTER: key},
            )
        )
    found += [
        Rule(
            "GpuPcieReplays",
            HardwareRule.PCIE_REPLAYS,
            AlertSeverity.WARNING,
            f"increase({_stored('pcie_replay')}[{_minutes(t.pcie_window_minutes)}]) "
            f"> {t.pcie_replays}",
            f"More than {count(t.pcie_replays, 'PCIe replay')} within "
            f"{count(t.pcie_window_minutes, 'minute')}: "
            "a marginal link.",
        ),
        Rule(
            "NetworkLinkDowntime",
            HardwareRule.LINK_DOWNTIME,
            AlertSeverity.WARNING,
            f"sum_over_time(({LINK_SERIES} != bool {LINK_ACTIVE})"
            f"[{_minutes(t.link_window_minutes)}:{LINK_STEP_SECONDS}s]) * {LINK_STEP_SECONDS} "
            f">= {t.link_downtime_seconds}",
            f"The port was down {count(t.link_downtime_seconds, 'second')} or more in total "
            f"within {count(t.link_window_minutes, 'minute')}.",
            per_gpu=False,
        ),
    ]
    return found


def rule_labels(rule: Rule, cluster: str, node_label: str | None) -> dict[str, str]:
    """The labels the rule gives its alerts (templates for the node and GPU)."""
    labels = {
        AlertLabel.CLUSTER.value: cluster,
        AlertLabel.NODE.value: node_template(node_label),
        AlertLabel.RULE.value: rule.rule.value,
        AlertLabel.SEVERITY.value: rule.severity.value,
    }
    if rule.per_gpu:
        labels[AlertLabel.GPU.value] = label_ref("gpu")
        labels[AlertLabel.GPU_UUID.value] = "".join(label_ref(n) for n in GPU_UUID_LABELS)
    labels.update({str(k): v for k, v in rule.labels.items()})
    return labels


def rule_annotations(rule: Rule) -> dict[str, str]:
    return {"summary": rule.summary, **rule.annotations}


def rule_groups(
    cluster: str, *, node_label: str | None = None, thresholds: Thresholds = Thresholds()
) -> dict[str, Any]:
    """The rule file's content for one cluster."""
    entries = []
    for rule in rules(thresholds):
        entry: dict[str, Any] = {"alert": rule.alert, "expr": rule.expr}
        if rule.hold:
            entry["for"] = rule.hold
        entry["labels"] = rule_labels(rule, cluster, node_label)
        entry["annotations"] = rule_annotations(rule)
        entries.append(entry)
    return {"groups": [{"name": GROUP, "interval": EVALUATION_INTERVAL, "rules": entries}]}


def rules_yaml(
    cluster: str, *, node_label: str | None = None, thresholds: Thresholds = Thresholds()
) -> str:
    """The rule file for one cluster, as the rule groups namespace's `Data`."""
    content = rule_groups(cluster, node_label=node_label, thresholds=thresholds)
    return yaml.safe_dump(content, sort_keys=False, width=1000)
