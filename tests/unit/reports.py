"""SDC Report events built the way the emitter builds them (its pure `build_report`), from the
alarm fixtures and rank map (tests/events/alarms): 4 nodes of 8 GPUs, rank r on node r // 8."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from tests.conftest import load_fixture
from tests.unit.world import INSTANCE
from trainer_emitter.contract import NAMESPACE, REPORT_DETAIL_TYPE, REPORT_SOURCE
from trainer_emitter.mapping import build_report
from trainer_emitter.rankmap import RankMap

NODES = (
    "i-0aa00000000000001",
    "i-0bb00000000000002",
    "i-0cc00000000000003",
    "i-0dd00000000000004",
)
REPORT_TIME = datetime(2026, 11, 30, 8, 14, 31, tzinfo=UTC)


def report_event(
    alarm: str | dict[str, Any],
    *,
    cluster: str = "ml-cluster-1",
    report_id: str | None = None,
    at: datetime = REPORT_TIME,
) -> dict[str, Any]:
    """The EventBridge event of the report the emitter publishes for `alarm` (a fixture name
    under alarms/, or an alarm dict)."""
    body = load_fixture("alarms", alarm) if isinstance(alarm, str) else alarm
    report = build_report(
        body,
        RankMap(load_fixture("alarms", "rank_map")),
        cluster_name=cluster,
        job_name="llama-pretrain",
        namespace=NAMESPACE,
        report_id=report_id or f"r-{uuid.uuid4().hex[:16]}",
        now=at,
        reporting_rank=0,
    )
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": REPORT_DETAIL_TYPE,
        "source": REPORT_SOURCE,
        "account": "111122223333",
        "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": "us-west-2",
        "resources": [],
        "detail": report.detail,
    }


def forged_event(
    instance_ids: list[str],
    *,
    ambiguous: bool = True,
    role: str = "involved",
    at: datetime = REPORT_TIME,
    **detail_changes: Any,
) -> dict[str, Any]:
    """A report a training pod could send with the training policy alone: valid by the schema,
    naming `instance_ids` (each with one rank) in `role`, nothing else checked."""
    event = report_event("weights_no_majority", at=at)
    event["detail"].update(
        ambiguous=ambiguous,
        suspects=[],
        instances=[
            {"instance_id": i, "metrics": ["sdc_divergent_tensors"], "ranks": [n], "role": role}
            for n, i in enumerate(instance_ids)
        ],
    )
    event["detail"].update(detail_changes)
    return event


def suspect(**text: Any) -> dict[str, Any]:
    """One suspect entry on INSTANCE, with `text` changed."""
    return {
        "rank": 0,
        "role": "culprit",
        "mapped": True,
        "instance_id": INSTANCE,
        "node_name": "hyperpod-" + INSTANCE,
        "gpu_uuid": "GPU-00000000-5a1e-4c1d-9e7b-000000000000",
        "metrics": ["sdc_divergent_tensors"],
        "reasons": ["replica outside the strict majority"],
        **text,
    }


def large_report(report_id: str) -> dict[str, Any]:
    """About 190 KB: within the schema's bounds and under EventBridge's 256 KB."""
    suspects = [
        suspect(rank=rank, reasons=[f"{rank}:{n}:" + "x" * 470 for n in range(16)])
        for rank in range(24)
    ]
    event = forged_event(
        [INSTANCE], ambiguous=False, role="culprit", suspects=suspects, report_id=report_id
    )
    event["detail"]["instances"][0]["ranks"] = list(range(24))
    assert 180_000 < len(json.dumps(event["detail"])) < 256_000
    return event
