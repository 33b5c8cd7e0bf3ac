"""What a hardware alert from a cluster's Prometheus workspace says: the alerting rules the stack
deploys there (`infra.stack.alert_rules`) and the intake that reads their alerts agree on these
names, so neither retypes the other's.

Every alert of those rules carries the labels of `AlertLabel`: which cluster's rules fired
(`cluster`, a static label of the cluster's own rule namespace), the node as the series name it
(`node`: a claim, checked against Kubernetes and HyperPod like a report's node name), the GPU
(`gpu`, `gpu_uuid`; a network link's alert names its `device` and `port` instead), which rule
(`rule`) and how strongly it points at the hardware (`severity`).
"""

from __future__ import annotations

from enum import StrEnum


class HardwareRule(StrEnum):
    """The alerting rules over the GPU's own counters, one family of fault each."""

    THROTTLING = "hardware_throttling"
    """The clocks held down by the hardware (HW slowdown, HW thermal slowdown, HW power brake)
    for longer than a load spike explains."""
    XID = "critical_xid"
    """The driver logged an XID from the critical list (a hardware cause in NVIDIA's catalog)."""
    ROW_REMAP_FAILURE = "row_remap_failure"
    """HBM has no spare row left to repair a faulty one."""
    UNCORRECTABLE_ECC = "uncorrectable_ecc"
    """Double-bit (uncorrectable) ECC errors rose."""
    NVLINK_ERRORS = "nvlink_errors"
    """NVLink CRC, replay or recovery counters rose faster than a healthy link's."""
    PCIE_REPLAYS = "pcie_replays"
    """PCIe replays at a rate that means a marginal link."""
    LINK_DOWNTIME = "link_downtime"
    """A network (RDMA) port was down for longer, in total over a window, than retraining takes."""


class AlertSeverity(StrEnum):
    """How strongly a rule points at the hardware: what the decision table proposes for it."""

    CRITICAL = "critical"
    """The memory cannot repair itself (row remap failure, uncorrectable ECC): replace after
    review."""
    WARNING = "warning"
    """A fault a reboot may clear (throttling, link errors, XIDs): reboot first, replace on a
    repeat."""


class AlertLabel(StrEnum):
    """The labels every alert of the rules carries (a link's alert: `device` and `port` instead
    of the GPU's)."""

    CLUSTER = "cluster"
    NODE = "node"
    GPU = "gpu"
    GPU_UUID = "gpu_uuid"
    RULE = "rule"
    SEVERITY = "severity"
    XID = "xid"
    """Only on the XID rule: the XID's number."""
    COUNTER = "counter"
    """Only on the NVLink rule: which counter rose."""
