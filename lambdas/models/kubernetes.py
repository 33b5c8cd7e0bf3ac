"""What the pipeline knows about a HyperPod EKS cluster's Kubernetes nodes: enough to cordon
the suspect node and taint it with the incident, and to undo exactly that.

A HyperPod EKS node's `spec.providerID` ends in its EC2 instance id
(`aws:///usw2-az2/sagemaker/cluster/hyperpod-<cluster id>-i-0123456789abcdef0`); node names are
not derived from instance ids, so nodes are found by providerID only.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Final

from sdc_remediation.lambdas.models._record import record_of

NODE_HEALTH_LABEL: Final = "sagemaker.amazonaws.com/node-health-status"
"""HyperPod's node health label on EKS: with NodeRecovery Automatic, HyperPod reboots a node set
to `UnschedulablePendingReboot` and replaces one set to `UnschedulablePendingReplacement`."""
HYPERPOD_LABELS: Final = (
    NODE_HEALTH_LABEL,
    "sagemaker.amazonaws.com/deep-health-check-status",
    "sagemaker.amazonaws.com/fault-type",
    "sagemaker.amazonaws.com/fault-reason",
)
"""The labels HyperPod keeps on an EKS node about its health, in the order the card shows them."""
PENDING_REBOOT: Final = "UnschedulablePendingReboot"
PENDING_REPLACEMENT: Final = "UnschedulablePendingReplacement"

TAINT_KEY: Final = "sdc.remediation/incident"
"""The key of the NoSchedule taint that names the incident a node is isolated for."""
TAINT_EFFECT: Final = "NoSchedule"
LABEL_VALUE_LIMIT: Final = 63

LABEL_KEY_RE: Final = re.compile(
    r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
"""A Kubernetes label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63."""
LABEL_VALUE_RE: Final = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
"""A non-empty Kubernetes label value."""

_INSTANCE_ID_RE: Final = re.compile(r"^i-[0-9a-f]{8,17}$")
_LABEL_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str = TAINT_EFFECT

    def to_json(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "effect": self.effect}

    def matches(self, raw: Any) -> bool:
        """Whether a taint of a node's `spec.taints` is this one (key, value and effect)."""
        return (
            isinstance(raw, dict)
            and raw.get("key") == self.key
            and raw.get("value") == self.value
            and raw.get("effect", TAINT_EFFECT) == self.effect
        )

    def same_slot(self, raw: Any) -> bool:
        """Kubernetes allows one taint per (key, effect): whether `raw` occupies ours."""
        return (
            isinstance(raw, dict)
            and raw.get("key") == self.key
            and raw.get("effect", TAINT_EFFECT) == self.effect
        )

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}"


def incident_taint(incident_id: str) -> Taint:
    return Taint(TAINT_KEY, label_value(incident_id))


def label_value(text: str) -> str:
    """`text` as a Kubernetes label value (taint values follow the same rule): at most 63 of
    `[A-Za-z0-9_.-]`, starting and ending alphanumeric. A longer id keeps its start and gets a
    hash of the whole, so two ids never share a value."""
    safe = _LABEL_UNSAFE.sub("-", text)
    if len(safe) > LABEL_VALUE_LIMIT:
        digest = hashlib.sha256(text.encode()).hexdigest()[:10]
        safe = f"{safe[: LABEL_VALUE_LIMIT - len(digest) - 1]}-{digest}"
    safe = safe.strip("-_.")
    if not safe:
        raise ValueError(f"no label-safe characters in {text!r}")
    return safe


def instance_of_provider_id(provider_id: str | None) -> str | None:
    """The EC2 instance id a providerID ends in, or None when it names none.

    The id is the text after the last `/`, or after its last `-i-` (HyperPod's
    `hyperpod-<cluster id>-i-…`); it must look like an instance id as a whole, so `i-0abc`
    never matches a node whose providerID ends in `i-0abcd`."""
    if not provider_id:
        return None
    last = provider_id.rstrip("/").rsplit("/", 1)[-1]
    if not _INSTANCE_ID_RE.match(last):
        _, sep, tail = last.rpartition("-i-")
        last = f"i-{tail}" if sep else ""
    return last if _INSTANCE_ID_RE.match(last) else None


MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"
"""A static pod's mirror in the API (the kubelet's own, as a DaemonSet's pods are the node's)."""
ENDED_PHASES: Final = frozenset({"Succeeded", "Failed"})


def is_workload_pod(raw: Any) -> bool:
    """A pod that keeps its node busy: not ended, and not one every node runs (a DaemonSet's
    pod, a static pod's mirror: agents, HyperPod's own health monitor among them)."""
    if not isinstance(raw, dict):
        return False
    metadata = raw.get("metadata") or {}
    if (raw.get("status") or {}).get("phase") in ENDED_PHASES:
        return False
    if MIRROR_ANNOTATION in (metadata.get("annotations") or {}):
        return False
    owners = metadata.get("ownerReferences") or []
    return not any(isinstance(o, dict) and o.get("kind") == "DaemonSet" for o in owners)


@dataclass(frozen=True, slots=True)
class KubeNode:
    """A Kubernetes node, as far as isolation reads it."""

    name: str
    provider_id: str
    unschedulable: bool
    taints: tuple[dict[str, Any], ...]
    resource_version: str
    labels: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> KubeNode:
        metadata = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        return cls(
            name=str(metadata.get("name", "")),
            provider_id=str(spec.get("providerID", "")),
            unschedulable=bool(spec.get("unschedulable", False)),
            taints=tuple(t for t in spec.get("taints") or [] if isinstance(t, dict)),
            resource_version=str(metadata.get("resourceVersion", "")),
            labels=tuple((str(k), str(v)) for k, v in (metadata.get("labels") or {}).items()),
        )

    @property
    def hyperpod_labels(self) -> tuple[tuple[str, str], ...]:
        """HyperPod's health labels the node has (`HYPERPOD_LABELS`), in that order."""
        found = dict(self.labels)
        return tuple((key, found[key]) for key in HYPERPOD_LABELS if key in found)

    @property
    def instance_id(self) -> str | None:
        return instance_of_provider_id(self.provider_id)


@dataclass(frozen=True, slots=True)
class NodeChange:
    """What one cordon or uncordon did to a node (the audit log keeps it)."""

    node_name: str
    resource_version: str
    """The node's resourceVersion after the change (before it, when nothing changed)."""
    unschedulable_changed: bool
    """Cordon: we set spec.unschedulable (it was false). Uncordon: we cleared it."""
    taint_changed: bool
    """Cordon: we added our taint. Uncordon: we removed it."""
    found_taint: str | None = None
    """Cordon: a taint with our key for another incident already held the slot (its value)."""
    attempts: int = 1
    """PATCH attempts (a 409 Conflict re-reads the node and tries again)."""

    def to_record(self) -> dict[str, Any]:
        return record_of(self)
