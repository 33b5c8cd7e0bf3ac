"""A failed sweep check as a trigger: the one seam between the sweep and the intake.

`open_failed_check` is the whole of it: the check's result becomes a claim of kind `sweep`
(`of_sweep`) and takes the intake's one path as every trigger
does (`sdc_remediation.lambdas.logic.intake.take`): HyperPod and the orchestrator confirm the node, the guards,
the storm flags and the pause switch apply, the incident is created with its lock and guard slot, and its
remediation asks for approval like any other. Nothing here decides what to do about the node:
the decision table's sweep row does (`sdc_remediation.lambdas.logic.evidence.recommendation.assess_sweep`).
"""

from __future__ import annotations

from datetime import datetime

from sdc_remediation.lambdas.logic import intake
from sdc_remediation.lambdas.logic.core.steps import Step
from sdc_remediation.lambdas.logic.evidence.summaries import MAX_TEXT
from sdc_remediation.lambdas.models.claim import Claim, NodeClaim
from sdc_remediation.lambdas.models.evidence import SweepEvidence, TriggerSource
from sdc_remediation.lambdas.models.payloads import OpenAction, OpenIncidentResult
from sdc_remediation.lambdas.models.reporter_text import clean_or_none
from sdc_remediation.lambdas.models.sweep import CheckResult


def sweep_evidence(cluster_name: str, result: CheckResult, received_at: str) -> SweepEvidence:
    """The failed check as the incident keeps it: one item per node and check start."""
    return SweepEvidence(
        key=f"sweep:{result.instance_id}:{result.started_at}",
        cluster_name=cluster_name,
        checks=tuple(result.checks),
        status=result.status,
        message=clean_or_none(result.message, MAX_TEXT),
        started_at=result.started_at,
        received_at=received_at,
    )


def sweep_event_id(cluster_name: str, result: CheckResult) -> str:
    """The same check always gives the same event (a run read again after a crash dedupes)."""
    return f"sweep-{cluster_name}-{result.instance_id}-{result.started_at}"


def of_sweep(cluster_name: str, instance_id: str, item: SweepEvidence, event_id: str) -> Claim:
    """A failed check of an idle sweep: `item` is the check's result as the incident keeps it
    (`sweep_evidence`). About the node itself: no job is named."""
    return Claim(
        source=TriggerSource.SWEEP,
        cluster_name=cluster_name,
        event_id=event_id,
        at=datetime.fromisoformat(item.received_at),
        nodes=(NodeClaim(item, instance_id, metric=None),),
    )


def open_failed_check(step: Step, cluster_name: str, result: CheckResult) -> OpenIncidentResult:
    """The failed check of `result` into the intake's one path (`intake.take`): the node is
    confirmed, the storm flag spent, the course judged, and its incident opened, joined or
    held."""
    item = sweep_evidence(cluster_name, result, step.now())
    claim = of_sweep(cluster_name, result.instance_id, item, sweep_event_id(cluster_name, result))
    results = intake.take(step, claim)
    if results:
        return results[0]
    return {"incident_id": None, "action": OpenAction.IGNORED}
