"""The pipeline's own CloudWatch metrics: one namespace, one service dimension, one list of names.

The functions emit them through `sdc_remediation.lambdas.observability` (Powertools EMF), the stack's dashboard
(`infra/stack/dashboard.py`) plots them and the drill's judge checks that what the dashboard plots is
what a run published: a metric name exists here once and nowhere else.

Deliberately not the SDC metric namespace (`trainer_emitter.contract.NAMESPACE`): Powertools
adds the `service` dimension to every metric, and the detection alarms' SCHEMA() must only
ever see the contract's two dimensions.

Importing this module loads nothing but the models (the CDK app imports it).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.payloads import RecoveryStatus

PIPELINE_NAMESPACE: Final = "SDC/Remediation"
"""`POWERTOOLS_METRICS_NAMESPACE` of every function, and the default without it."""
SERVICE_NAME: Final = "sdc-remediation"
"""`POWERTOOLS_SERVICE_NAME` of every function, and the default without it."""
SERVICE_DIMENSION: Final = "service"
"""The dimension Powertools adds to every metric it emits, valued SERVICE_NAME."""


class PipelineMetric(StrEnum):
    """Every metric a function emits. Counters (unit Count) unless said otherwise."""

    # intake: open_incident, store_report
    EVENTS_REFUSED = "EventsRefused"
    EVENTS_IGNORED = "EventsIgnored"
    INCIDENTS_OPENED = "IncidentsOpened"
    JOB_INCIDENTS_OPENED = "JobIncidentsOpened"
    INCIDENTS_SKIPPED = "IncidentsSkipped"
    INCIDENTS_HELD = "IncidentsHeld"
    """Recorded as held when they arrived: paused, muted, storm hold or guard full."""
    EVIDENCE_ATTACHED = "EvidenceAttached"
    EXECUTIONS_STARTED = "ExecutionsStarted"
    REPORTS_STORED = "ReportsStored"
    REPORTS_IGNORED = "ReportsIgnored"
    STORM_HOLDS = "StormHolds"
    STORM_HOLDS_RESET = "StormHoldsReset"
    # remediation steps
    NODES_ISOLATED = "NodesIsolated"
    NODES_NOT_ISOLATED = "NodesNotIsolated"
    ISOLATION_SKIPPED = "IsolationSkipped"
    NODES_RELEASED = "NodesReleased"
    NODE_RELEASES_FAILED = "NodeReleasesFailed"
    HEALTH_CHECKS_STARTED = "HealthChecksStarted"
    HEALTH_CHECKS_NOT_STARTED = "HealthChecksNotStarted"
    INCIDENTS_HELD_IN_FLIGHT = "IncidentsHeldInFlight"
    """Open incidents that a storm hold or the pause switch stopped before an acting step."""
    REPLACE_REQUESTED = "ReplaceRequested"
    REPLACE_IN_PROGRESS = "ReplaceInProgress"
    REPLACE_GONE = "ReplaceGone"
    REPLACE_RETRY = "ReplaceRetry"
    REPLACE_DRY_RUN = "ReplaceDryRun"
    REPLACE_HELD = "ReplaceHeld"
    REPLACEMENTS_DONE = "ReplacementsDone"
    REBOOT_REQUESTED = "RebootRequested"
    REBOOT_IN_PROGRESS = "RebootInProgress"
    REBOOT_GONE = "RebootGone"
    REBOOT_RETRY = "RebootRetry"
    REBOOT_DRY_RUN = "RebootDryRun"
    REBOOT_HELD = "RebootHeld"
    REBOOTS_DONE = "RebootsDone"
    RECOVERIES_UNKNOWN = "RecoveriesUnknown"
    """Failure closes that kept the node (isolation, lock, slot) because a reboot or replacement
    may still be running: handed to reconciliation."""
    STEP_RETRYABLE_ERRORS = "StepRetryableErrors"
    # reconciliation
    INCIDENTS_RECONCILED = "IncidentsReconciled"
    """Stuck incidents a reconciliation run settled (sdc_remediation.lambdas.logic.closing)."""
    CLOSED_UNDECIDED = "ClosedUndecided"
    """Closes with no decision on the approval request, the node kept isolated: has an alarm."""
    RECONCILE_NEEDS_PERSON = "ReconcileNeedsPerson"
    """Stuck incidents a reconciliation run could not settle, each run: has an alarm."""
    STEP_FAILURES = "StepFailures"
    AUDIT_CHAINS_BROKEN = "AuditChainsBroken"
    """A gauge, from the scheduled audit check: audit chains that do not verify against the
    audit anchor (0 when all do). Alarmed above 0."""
    # approval
    APPROVALS_REQUESTED = "ApprovalsRequested"
    NOTICES_RETRIED = "NoticesRetried"
    """A notice publish that failed and was tried again (backoff inside the function)."""
    NOTICES_UNDELIVERED = "NoticesUndelivered"
    """A notice that could not be published after its retries (any kind: card, closing, hold)."""
    CARDS_UNDELIVERED = "CardsUndelivered"
    """An approval card that could not be delivered after its retries: nobody was asked. Has an
    alarm; reconciliation sends it again."""
    APPROVALS_WAITING = "ApprovalsWaiting"
    """A gauge: incidents awaiting a decision right after a change of that number (an approval
    requested, a decision accepted, a waiting incident closed). Plot its Maximum."""
    DECISIONS_ACCEPTED = "DecisionsAccepted"
    DECISIONS_REFUSED = "DecisionsRefused"
    DECISION_LATENCY = "DecisionLatencySeconds"
    """Unit Seconds: from the incident opened to its approve/reject decision accepted."""
    RECOVERY_LATENCY = "RecoveryLatencySeconds"
    """Unit Seconds: from the incident opened to its node recovered: replaced (by this pipeline
    or by HyperPod's own recovery) or rebooted and passed its check again; not emitted for a dry
    run, where nothing recovers."""
    # closing, one per outcome (closed_metric)
    CLOSED_REPLACED = "ClosedReplaced"
    CLOSED_REPLACED_BY_HYPERPOD = "ClosedReplacedByHyperpod"
    CLOSED_REBOOTED = "ClosedRebooted"
    CLOSED_REJECTED = "ClosedRejected"
    CLOSED_EXPIRED = "ClosedExpired"
    CLOSED_CHECKED = "ClosedChecked"
    CLOSED_HELD = "ClosedHeld"
    CLOSED_FAILED = "ClosedFailed"


def _camel(value: str) -> str:
    return value.title().replace("_", "")


CLOSE_OUTCOMES: Final = (
    IncidentState.REPLACED,
    IncidentState.REPLACED_BY_HYPERPOD,
    IncidentState.REBOOTED,
    IncidentState.REJECTED,
    IncidentState.EXPIRED,
    IncidentState.CHECKED,
    IncidentState.HELD,
    IncidentState.FAILED,
)
"""The states close_incident closes an incident in (skipped and held-at-birth incidents are
created closed and never pass through it)."""


def closed_metric(state: IncidentState) -> PipelineMetric:
    """`ClosedReplaced`, ...: the counter of incidents closed in `state`."""
    return PipelineMetric(f"Closed{_camel(state.value)}")


def replace_metric(status: RecoveryStatus) -> PipelineMetric:
    """`ReplaceRequested`, ...: the counter of replace_node results."""
    return PipelineMetric(f"Replace{_camel(status.value)}")


def reboot_metric(status: RecoveryStatus) -> PipelineMetric:
    """`RebootRequested`, ...: the counter of reboot_node results."""
    return PipelineMetric(f"Reboot{_camel(status.value)}")
