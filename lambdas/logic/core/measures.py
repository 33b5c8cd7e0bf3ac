"""Pipeline metrics that need more than a counter: durations from an incident's opening, and
the approvals-waiting gauge (what the stack's dashboard plots besides the counters)."""

from __future__ import annotations

from datetime import UTC, datetime

from sdc_remediation.lambdas.logic.core.steps import Step
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.observability import gauge, logger

S = IncidentState


def report_waiting(step: Step, changed: Incident) -> None:
    """The ApprovalsWaiting gauge, after `changed` began or stopped waiting for a decision.

    The `by_state` index is eventually consistent, so `changed` counts as it is now, not as the
    index may still show it; any other change shows at the next emission. A failed count is
    logged, never raised: the dashboard must not cost an approval."""
    try:
        waiting = {
            i.incident_id
            for i in step.deps.incidents.in_state(S.AWAITING_APPROVAL)
            if not i.decision
        }
    except Exception as err:
        logger.warning("approvals waiting not counted", error=str(err))
        return
    if changed.state is S.AWAITING_APPROVAL and not changed.decision:
        waiting.add(changed.incident_id)
    else:
        waiting.discard(changed.incident_id)
    gauge(M.APPROVALS_WAITING, len(waiting))


def elapsed(since: str, now: datetime) -> float:
    """Seconds from the ISO time `since` (an incident's created_at) to `now`."""
    start = datetime.fromisoformat(since)
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    return (now - start).total_seconds()
