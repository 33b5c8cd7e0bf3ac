"""Identifiers: incident ids (= remediation execution names) and audit subjects."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime

MAX_LENGTH = 80
"""Step Functions' execution name limit: the incident id is the execution name."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def incident_id(cluster_name: str, instance_id: str, at: datetime, *, prefix: str = "sdc") -> str:
    """`sdc-<cluster>-<instance>-<yyyymmddThhmmss>`, at most 80 characters of [A-Za-z0-9-_].

    The same alarm state change always gives the same id (redeliveries dedupe on it). A cluster
    name too long to fit is cut and suffixed with a short hash of the full name, so two long
    names that share a prefix still give different ids.
    """
    stamp = at.astimezone(UTC).strftime("%Y%m%dT%H%M%S")
    suffix = f"-{_safe(instance_id)}-{stamp}"
    budget = MAX_LENGTH - len(prefix) - 1 - len(suffix)
    cluster = _safe(cluster_name)
    if len(cluster) > budget:
        digest = hashlib.sha256(cluster_name.encode()).hexdigest()[:6]
        cluster = f"{cluster[: budget - len(digest) - 1]}-{digest}"
    return f"{prefix}-{cluster}{suffix}"[:MAX_LENGTH]


def keyed_incident_id(cluster_name: str, instance_id: str, at: datetime, key: str) -> str:
    """`sdc-<cluster>-<instance>-<digest of key>-<yyyymmddThhmmss>`: the incident of a trigger
    bringing the evidence `key` when another incident already took `incident_id`'s id for its
    node and second (`sdc_remediation.lambdas.logic.opening.incidents.node_incident_id`)."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:8]
    return incident_id(cluster_name, f"{instance_id}-{digest}", at)


def job_incident_id(cluster_name: str, report_id: str, at: datetime) -> str:
    """The job-level incident of an ambiguous report: `sdc-<cluster>-job-<report id>-<stamp>`
    (the same report always gives the same id), at most 80 characters."""
    return incident_id(cluster_name, f"job-{_safe(report_id)[:20]}", at)


def hold_id(cluster_name: str, at: datetime) -> str:
    """A storm hold: `hold-<cluster>-<yyyymmddThhmmss>`, the `incident_id` a reset names."""
    return incident_id(cluster_name, "storm", at, prefix="hold")


def event_subject(event_id: str) -> str:
    """The audit subject of an event that cannot be tied to an incident."""
    return f"event#{event_id}"


def decision_subject(approval_execution_arn: str) -> str:
    """The audit subject of a decision that names no existing incident."""
    return f"decision#{approval_execution_arn}"


def _safe(value: str) -> str:
    return _UNSAFE.sub("-", value).strip("-") or "x"
