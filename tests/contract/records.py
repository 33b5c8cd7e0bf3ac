"""What the contract cases store: small builders with the fields that matter to the port."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from sdc_remediation.lambdas.logic.core.audit import GENESIS, seal
from sdc_remediation.lambdas.models.audit import AuditEntry
from sdc_remediation.lambdas.models.guard import ClusterHold, PastIncident
from sdc_remediation.lambdas.models.incident import Incident, IncidentState, Scope
from sdc_remediation.lambdas.models.report import SdcReport, parse_report
from tests.conftest import load_fixture

CLUSTER = "ml-cluster-1"
OTHER_CLUSTER = "ml-cluster-2"
NOW = 1_764_490_504
"""Epoch seconds of 2026-11-30T08:15:04Z: held-lock windows are relative to it."""


def instance(n: int) -> str:
    return f"i-0e{n:015x}"


def incident(n: int, **changes: Any) -> Incident:
    """Open incident `sdc-<cluster>-<n>` of node `instance(n)`, with evidence worth a round trip
    (floats, nested lists, unicode)."""
    values: dict[str, Any] = {
        "incident_id": f"sdc-{CLUSTER}-{n}",
        "cluster_name": CLUSTER,
        "instance_id": instance(n),
        "state": IncidentState.OPENED,
        "created_at": "2026-11-30T08:15:04+00:00",
        "updated_at": "2026-11-30T08:15:04+00:00",
        "evidence": [
            {"kind": "alarm", "key": "alarm:e1", "step": 30, "window": [21, 30], "loss": 2.5},
            {"kind": "note", "text": "ünïcode", "ranks": [13, 5], "nothing": None},
        ],
    }
    values.update(changes)
    return Incident(**values)


def held(n: int, **changes: Any) -> Incident:
    return incident(n, state=IncidentState.HELD, **changes)


def skipped(n: int, **changes: Any) -> Incident:
    return incident(n, state=IncidentState.SKIPPED, **changes)


def job(n: int, instance_ids: list[str], **changes: Any) -> Incident:
    return incident(n, instance_id="", scope=Scope.JOB.value, instance_ids=instance_ids, **changes)


def hold(n: int = 1, *, cluster_name: str = CLUSTER) -> ClusterHold:
    return ClusterHold(
        hold_id=f"hold-{cluster_name}-storm-{n}",
        cluster_name=cluster_name,
        reason="4 distinct instances flagged within 600 s",
        created_at="2026-11-30T08:15:04+00:00",
        instances=[instance(1), instance(2), instance(3), instance(4)],
        threshold=4,
        window_seconds=600,
    )


def past(
    n: int, *, closed_at: str, instance_id: str = "i-01", gpus: tuple[str, ...] = ()
) -> PastIncident:
    return PastIncident(
        incident_id=f"sdc-{CLUSTER}-{n}",
        cluster_name=CLUSTER,
        instance_id=instance_id,
        state=IncidentState.REJECTED,
        created_at="2026-11-30T08:15:04+00:00",
        closed_at=closed_at,
        gpu_uuids=gpus,
    )


def report(received_at: str = "2026-11-30T08:14:32+00:00", **changes: Any) -> SdcReport:
    """The fixture report (cluster ml-cluster-1, node i-0abc1234def567890) with `changes` to
    its detail, as the pipeline received it at `received_at`."""
    detail = copy.deepcopy(load_fixture("events", "sdc_report")["detail"])
    detail.update(changes)
    return dataclasses.replace(parse_report(detail), received_at=received_at)


REPORTED_INSTANCE = "i-0abc1234def567890"


def entry(
    seq: int, *, incident_id: str = "sdc-1", prev_hash: str = GENESIS, **details: Any
) -> AuditEntry:
    return seal(
        incident_id=incident_id,
        seq=seq,
        at=f"2026-11-30T08:15:{seq:02d}+00:00",
        actor="contract",
        action=f"step_{seq}",
        details=details,
        request_ids=[f"req-{seq}"],
        prev_hash=prev_hash,
    )
