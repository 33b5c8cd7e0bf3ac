"""What a hardware alert from a cluster's Prometheus workspace says: the alerting rules the stack
deploys there (`sdc_remediation.infra.stack.alert_rules`) and the intake that reads their alerts agree on these
names, so neither retypes the other's.

Every alert of those rules carries the labels of `AlertLabel`: which cluster's rules fired
(`cluster`, a static label of the cluster's own rule namespace), the node as the series name it
(`node`: a claim, checked against Kubernetes and HyperPod like a report's node name), the GPU
(`gpu`, `gpu_uuid`; a network link's alert names its `device` and `port` instead), which rule
(`rule`) and how strongly it points at the hardware (`severity`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, TypeVar

from sdc_remediation.lambdas.models import _fields as fields
from sdc_remediation.lambdas.models.errors import MalformedEvent


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


class AlertStatus(StrEnum):
    """An alert's status in the alert manager's notification."""

    FIRING = "firing"
    RESOLVED = "resolved"


MESSAGE_VERSION: Final = "sdc-hardware-alert/1"
"""The `version` of the JSON message the alert manager definition's template writes."""
CLUSTER_ATTRIBUTE: Final = "cluster"
"""The SNS message attribute naming the cluster: fixed per workspace in the alert manager
definition, never taken from a label."""
NODE_NAME_RE: Final = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
"""A Kubernetes node name (a DNS subdomain)."""
HYPERPOD_NODE_RE: Final = re.compile(r"^hyperpod-(i-[0-9a-f]{8,17})$")
"""A HyperPod EKS node name that holds its instance id."""
MAX_ALERTS: Final = 64
"""The most alerts one notification may carry (the alert manager groups per node and rule)."""
MAX_VALUE: Final = 253
_E = TypeVar("_E", bound=StrEnum)


@dataclass(frozen=True, slots=True)
class HardwareAlert:
    """One alert of a notification: what the rule's labels claim."""

    status: AlertStatus
    rule: HardwareRule
    severity: AlertSeverity
    cluster_name: str
    node_name: str
    starts_at: str
    fingerprint: str
    gpu: str | None = None
    gpu_uuid: str | None = None
    xid: str | None = None
    counter: str | None = None
    summary: str = ""

    @property
    def claimed_instance(self) -> str | None:
        """The instance id a `hyperpod-i-…` node name holds (a claim: HyperPod and Kubernetes
        must confirm it); None for other node names."""
        match = HYPERPOD_NODE_RE.match(self.node_name)
        return match.group(1) if match else None


@dataclass(frozen=True, slots=True)
class AlertNotification:
    """One SNS message of the hardware alert topic."""

    message_id: str
    cluster_name: str
    """The SNS attribute `cluster` (fixed per workspace by the stack)."""
    alerts: tuple[HardwareAlert, ...]


def parse_alert_notification(event: Any) -> AlertNotification:
    """The Lambda event of an SNS delivery (one record) as a notification; MalformedEvent
    naming the field otherwise."""
    records = fields.get(fields.obj(event, ""), "Records", "")
    if not isinstance(records, list) or len(records) != 1:
        raise MalformedEvent("Records", "expected exactly one SNS record")
    sns = fields.obj(fields.get(fields.obj(records[0], "Records[0]"), "Sns", "Records[0]"), "Sns")
    message_id = fields.text(sns, "MessageId", "Sns")
    attributes = fields.obj(sns.get("MessageAttributes") or {}, "Sns.MessageAttributes")
    attribute = fields.obj(
        fields.get(attributes, CLUSTER_ATTRIBUTE, "Sns.MessageAttributes"),
        f"Sns.MessageAttributes.{CLUSTER_ATTRIBUTE}",
    )
    cluster = fields.text(attribute, "Value", f"Sns.MessageAttributes.{CLUSTER_ATTRIBUTE}")
    try:
        message = json.loads(fields.text(sns, "Message", "Sns"))
    except json.JSONDecodeError as err:
        raise MalformedEvent("Sns.Message", f"not JSON: {err.msg}") from err
    message = fields.obj(message, "Sns.Message")
    if message.get("version") != MESSAGE_VERSION:
        raise MalformedEvent(
            "Sns.Message.version", f"expected {MESSAGE_VERSION!r}, got {message.get('version')!r}"
        )
    alerts = fields.get(message, "alerts", "Sns.Message")
    if not isinstance(alerts, list) or not 1 <= len(alerts) <= MAX_ALERTS:
        raise MalformedEvent("Sns.Message.alerts", f"expected 1 to {MAX_ALERTS} alerts")
    return AlertNotification(
        message_id,
        cluster,
        tuple(_alert(a, f"Sns.Message.alerts[{i}]") for i, a in enumerate(alerts)),
    )


def _alert(raw: Any, path: str) -> HardwareAlert:
    alert = fields.obj(raw, path)
    labels = fields.obj(fields.get(alert, "labels", path), f"{path}.labels")
    annotations = fields.obj(alert.get("annotations") or {}, f"{path}.annotations")
    where = f"{path}.labels"
    node = fields.text(labels, AlertLabel.NODE, where)
    if not NODE_NAME_RE.match(node):
        raise MalformedEvent(f"{where}.{AlertLabel.NODE}", "not a Kubernetes node name")
    return HardwareAlert(
        status=_member(AlertStatus, fields.text(alert, "status", path), f"{path}.status"),
        rule=_member(HardwareRule, fields.text(labels, AlertLabel.RULE, where), where),
        severity=_member(AlertSeverity, fields.text(labels, AlertLabel.SEVERITY, where), where),
        cluster_name=fields.text(labels, AlertLabel.CLUSTER, where)[:MAX_VALUE],
        node_name=node,
        starts_at=fields.text(alert, "startsAt", path)[:MAX_VALUE],
        fingerprint=fields.text(alert, "fingerprint", path)[:MAX_VALUE],
        gpu=_optional(labels, AlertLabel.GPU),
        gpu_uuid=_optional(labels, AlertLabel.GPU_UUID),
        xid=_optional(labels, AlertLabel.XID),
        counter=_optional(labels, AlertLabel.COUNTER),
        summary=str(annotations.get("summary") or "")[:MAX_VALUE],
    )


def _member(vocabulary: type[_E], value: str, path: str) -> _E:
    try:
        return vocabulary(value)
    except ValueError as err:
        known = ", ".join(m.value for m in vocabulary)
        raise MalformedEvent(path, f"{value!r} is none of {known}") from err


def _optional(labels: Mapping[str, Any], label: AlertLabel) -> str | None:
    value = labels.get(label)
    return value[:MAX_VALUE] if isinstance(value, str) and value else None


def is_sns_delivery(event: Any) -> bool:
    """Whether a Lambda event is an SNS delivery (`Records` of `aws:sns`), not an EventBridge
    event."""
    records = event.get("Records") if isinstance(event, Mapping) else None
    return (
        isinstance(records, list)
        and bool(records)
        and isinstance(records[0], Mapping)
        and records[0].get("EventSource") == "aws:sns"
    )


def sns_message_id(event: Any) -> str | None:
    """The SNS message id of a delivery, whatever else is wrong with it."""
    if not is_sns_delivery(event):
        return None
    sns = event["Records"][0].get("Sns")
    found = sns.get("MessageId") if isinstance(sns, Mapping) else None
    return found if isinstance(found, str) and found else None
