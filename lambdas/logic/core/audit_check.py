"""The scheduled audit check: every chain of the audit log against the audit anchor, the count
of broken ones as a metric (alarmed above 0), and each broken chain logged with its first bad
entry. It reads only; it writes no audit entry of its own."""

from __future__ import annotations

from sdc_remediation.lambdas.logic.core.audit import verify_subjects
from sdc_remediation.lambdas.logic.ports import Deps
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.payloads import AuditCheckResult, BrokenChain
from sdc_remediation.lambdas.observability import gauge, logger


def check_audit(deps: Deps) -> AuditCheckResult:
    """Verify every subject of the audit table and of the anchor (a closed incident must hold
    its closing entry). Without an anchor configured only the chains' order is checked."""
    chains = deps.audit.all_chains()
    anchored = deps.anchor.records() if deps.anchor.enabled else None
    closed = {
        incident.incident_id
        for state in IncidentState
        if state.terminal
        for incident in deps.incidents.in_state(state)
        if incident.closed_at is not None
    }
    verdicts = verify_subjects(chains, anchored, closed=closed, now=deps.clock.now())
    broken: list[BrokenChain] = [
        {"subject": subject, "broken_seq": verdict.broken_seq, "reason": verdict.reason}
        for subject, verdict in verdicts.items()
        if not verdict.ok
    ]
    for found in broken:
        logger.error(
            "audit chain broken",
            subject=found["subject"],
            broken_seq=found["broken_seq"],
            reason=found["reason"],
        )
    gauge(M.AUDIT_CHAINS_BROKEN, len(broken))
    logger.info("audit checked", chains=len(verdicts), broken=len(broken))
    return {"checked": len(verdicts), "anchored": anchored is not None, "broken": broken}
