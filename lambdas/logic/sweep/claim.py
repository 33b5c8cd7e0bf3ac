"""A failed sweep check as a trigger: the one seam between the sweep and the intake.

`open_failed_check` is the whole of it: it builds the trigger (kind `sweep`, the check's result
as its evidence) and hands it to the intake's opening, exactly as a firing hardware alert does
(`lambdas.logic.intake.hardware_alerts`): HyperPod confirms the node, the guards, the storm
flags and the pause switch apply, the incident is created with its lock and guard slot, and its
remediation asks for approval like any other. Nothing here decides what to do about the node:
the decision table's sweep row does (`lambdas.logic.evidence.recommendation.assess_sweep`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from lambdas.logic.core.steps import Step
from lambdas.logic.evidence.summaries import MAX_TEXT
from lambdas.logic.opening import incidents
from lambdas.logic.opening.arrivals import Trigger
from lambdas.models.incident import TriggerSource
from lambdas.models.payloads import OpenIncidentResult
from lambdas.models.reporter_text import clean_or_none
from lambdas.models.sweep import CheckResult


def sweep_evidence(cluster_name: str, result: CheckResult, received_at: str) -> dict[str, Any]:
    """The failed check as the incident keeps it: one item per node and check start."""
    return {
        "kind": TriggerSource.SWEEP,
        "key": f"sweep:{result.instance_id}:{result.started_at}",
        "cluster_name": cluster_name,
        "checks": list(result.checks),
        "status": result.status,
        "message": clean_or_none(result.message, MAX_TEXT),
        "started_at": result.started_at,
        "received_at": received_at,
        "idle": True,
    }


def sweep_event_id(cluster_name: str, result: CheckResult) -> str:
    """The same check always gives the same event (a run read again after a crash dedupes)."""
    return f"sweep-{cluster_name}-{result.instance_id}-{result.started_at}"


def open_failed_check(step: Step, cluster_name: str, result: CheckResult) -> OpenIncidentResult:
    """The failed check of `result` into the intake: the node's incident is opened, or the
    failed check attaches to the one open for it (one per cluster and instance)."""
    step.deps.settings.require_state_machine_arn()
    trigger = Trigger(
        cluster_name=cluster_name,
        instance_id=result.instance_id,
        at=datetime.fromisoformat(result.started_at),
        event_id=sweep_event_id(cluster_name, result),
        source=TriggerSource.SWEEP,
        item=sweep_evidence(cluster_name, result, step.now()),
    )
    return incidents.open_node(step, trigger)
