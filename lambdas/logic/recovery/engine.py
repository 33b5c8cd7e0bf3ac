"""The engine that sends reboots and replacements (`carry_out`): what is checked before anything
is asked, when nothing is asked (each `RecoveryKind`'s own rule), the request written ahead and
sent along the path `sdc_remediation.lambdas.logic.recovery.path` chooses, every `Failed[]` code read, and the
record kept on the incident and in the audit log. Its two kinds are run by
`sdc_remediation.lambdas.logic.recovery.reboot_node` and `sdc_remediation.lambdas.logic.recovery.replace_node`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from sdc_remediation.lambdas.logic.core import lifecycle
from sdc_remediation.lambdas.logic.core.steps import Step, node_status_of
from sdc_remediation.lambdas.logic.recovery import path as recovery_path
from sdc_remediation.lambdas.logic.safety import guard
from sdc_remediation.lambdas.metric_names import PipelineMetric, reboot_metric, replace_metric
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.errors import (
    AwsError,
    InvalidTransition,
    RebootNotApproved,
    RebootRejected,
    ReplacementNotApproved,
    ReplacementRejected,
    SdcError,
)
from sdc_remediation.lambdas.models.hyperpod import BatchErrorCode, BatchResult, NodeStatus
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.kubernetes import PENDING_REBOOT, PENDING_REPLACEMENT
from sdc_remediation.lambdas.models.payloads import Decision, RecoveryResult, RecoveryStatus
from sdc_remediation.lambdas.models.recovery import RebootRecord, ReplacementRecord
from sdc_remediation.lambdas.models.settings import RECOVERY_NODE_LABEL
from sdc_remediation.lambdas.observability import count, logger

Record = TypeVar("Record", ReplacementRecord, RebootRecord)


@dataclass(frozen=True, slots=True)
class RecoveryKind(Generic[Record]):
    """A recovery the approver can choose: how it is asked for, where the incident keeps it
    and how it is audited."""

    name: str
    """The recovery in words (`replacement`, `reboot`)."""
    operation: str
    """The HyperPod call that asks for it (named in errors)."""
    label: str
    """The node health label value that hands it to HyperPod."""
    rejected: type[AwsError]
    record: type[Record]
    """The incident's record of it: an empty one starts it."""
    record_of: Callable[[Incident], Record | None]
    """That record as the incident holds it (None before the first request)."""
    keep: Callable[[Incident, Record], None]
    """Store a new version of that record on the incident."""
    actions: Mapping[RecoveryStatus, AuditAction]
    """The audit action of each answer to the request (requested, in progress, retry, gone)."""
    decision: Decision
    """The approver's decision that asks for it."""
    state: IncidentState
    """The incident's state while it runs."""
    verb: str
    not_approved: type[SdcError]
    metric: Callable[[RecoveryStatus], PipelineMetric]
    """The pipeline counter of each result (`ReplaceRequested`, `RebootRetry`, ...)."""


def _replacement_of(incident: Incident) -> ReplacementRecord | None:
    return incident.replacement


def _keep_replacement(incident: Incident, record: ReplacementRecord) -> None:
    incident.replacement = record


def _reboot_of(incident: Incident) -> RebootRecord | None:
    return incident.reboot


def _keep_reboot(incident: Incident, record: RebootRecord) -> None:
    incident.reboot = record


REPLACEMENT: Final = RecoveryKind(
    name="replacement",
    operation="BatchReplaceClusterNodes",
    label=PENDING_REPLACEMENT,
    rejected=ReplacementRejected,
    record=ReplacementRecord,
    record_of=_replacement_of,
    keep=_keep_replacement,
    actions={
        RecoveryStatus.REQUESTED: AuditAction.REPLACEMENT_REQUESTED,
        RecoveryStatus.IN_PROGRESS: AuditAction.REPLACEMENT_IN_PROGRESS,
        RecoveryStatus.RETRY: AuditAction.REPLACEMENT_RETRY,
        RecoveryStatus.GONE: AuditAction.NODE_GONE,
    },
    metric=replace_metric,
    decision=Decision.APPROVE,
    state=IncidentState.REPLACING,
    verb="replace",
    not_approved=ReplacementNotApproved,
)
REBOOT: Final = RecoveryKind(
    name="reboot",
    operation="BatchRebootClusterNodes",
    label=PENDING_REBOOT,
    rejected=RebootRejected,
    record=RebootRecord,
    record_of=_reboot_of,
    keep=_keep_reboot,
    actions={
        RecoveryStatus.REQUESTED: AuditAction.REBOOT_REQUESTED,
        RecoveryStatus.IN_PROGRESS: AuditAction.REBOOT_IN_PROGRESS,
        RecoveryStatus.RETRY: AuditAction.REBOOT_RETRY,
        RecoveryStatus.GONE: AuditAction.NODE_GONE,
    },
    metric=reboot_metric,
    decision=Decision.REBOOT,
    state=IncidentState.REBOOTING,
    verb="reboot",
    not_approved=RebootNotApproved,
)

Request = Callable[[str, Sequence[str]], BatchResult]
"""The HyperPod port's batch call for one kind (`deps.hyperpod.replace_nodes`,
`deps.hyperpod.reboot_nodes`): cluster name, instance ids."""

FAILED_CODES: Final[dict[str, RecoveryStatus]] = {
    BatchErrorCode.INSTANCE_ID_IN_USE: RecoveryStatus.IN_PROGRESS,
    BatchErrorCode.INVALID_INSTANCE_STATUS: RecoveryStatus.RETRY,
    BatchErrorCode.INTERNAL_SERVER_ERROR: RecoveryStatus.RETRY,
    BatchErrorCode.INSTANCE_ID_NOT_FOUND: RecoveryStatus.GONE,
}
"""A `Failed[]` code of either batch call → what it means: in use (our earlier request after a
crash, or HyperPod's own recovery) → in progress; a status or server error → retry later
(bounded by the state machine); not found → the node is gone; anything else fails the step.
Each is audited as the kind's action for it (`RecoveryKind.actions`)."""


@dataclass(frozen=True, slots=True)
class Found:
    """What a reboot or replacement finds before it asks: the incident (in `kind.state`), the
    node's status now, whether an earlier attempt may have asked already, and the dry run."""

    incident: Incident
    node_status: str
    ours: bool
    dry_run: bool


@dataclass(frozen=True, slots=True)
class Unasked:
    """What is recorded instead of a request (the node is gone, a dry run, ...)."""

    status: RecoveryStatus
    action: AuditAction
    details: dict[str, Any]
    ours: bool = False
    """Recorded as asked by this pipeline (`requested_by_us`): an earlier attempt had asked."""


def carry_out(
    step: Step,
    incident: Incident,
    kind: RecoveryKind[Record],
    request: Request,
    unasked: Callable[[Found], Unasked | None],
    *,
    ours: bool,
    on_enter: Callable[[Incident], None] | None = None,
) -> RecoveryResult:
    """An approved reboot or replacement from start to end: `_begin`; the node re-checked;
    either `unasked` says why nothing is asked, and that is recorded, or the request is written
    ahead and sent (`request`, the HyperPod call of `kind`, unless the cluster takes the node
    health label instead)."""
    begun = _begin(step, incident, kind, ours=ours, on_enter=on_enter)
    if not isinstance(begun, Incident):
        return begun
    answered = _answered_before(step, begun, kind)
    if answered is not None:
        return answered
    status_now, check_id = node_status_of(step.deps, begun)
    found = Found(begun, status_now, ours, step.deps.settings.dry_run)
    instead = unasked(found) or _resumed(begun, kind, status_now)
    if instead is not None:
        return _record(
            step,
            begun,
            kind,
            instead.status,
            instead.action,
            instead.details,
            [check_id],
            ours=instead.ours,
        )
    pending = step.update(begun.incident_id, _write_ahead(kind, step.now()), begun)
    return _send(step, pending, kind, request, status_now, check_id, ours=ours)


UNDER_WAY_STATUSES: Final = frozenset(
    {NodeStatus.RUNNING.value, NodeStatus.FAILURE.value, NodeStatus.NOT_FOUND.value}
)
"""Node statuses in which a request may still have to be sent; in any other (Pending,
ShuttingDown, ...) a recovery is under way."""


def _answered_before(
    step: Step, incident: Incident, kind: RecoveryKind[Record]
) -> RecoveryResult | None:
    """An earlier attempt sent the request and saved HyperPod's answer, then died (or its
    answer was lost on the way back): the saved answer is the result, nothing is sent again.
    A `requested` answer whose audit entry the earlier attempt did not write gets it now, so
    the audit names every request that was sent."""
    record = kind.record_of(incident)
    if record is None or record.pending or record.status not in _SETTLED_ANSWERS:
        return None
    action = kind.actions[RecoveryStatus.REQUESTED]
    if record.status == RecoveryStatus.REQUESTED and not any(
        entry.action == action for entry in step.deps.audit.entries(incident.incident_id)
    ):
        step.audit(
            incident.incident_id,
            action,
            {
                "status": record.status,
                "instance_id": incident.instance_id,
                "attempt": record.attempts,
                "recorded_late": True,
                **(record.last or {}),
            },
        )
    return {"status": RecoveryStatus(record.status)}


_SETTLED_ANSWERS: Final = frozenset(
    {RecoveryStatus.REQUESTED.value, RecoveryStatus.IN_PROGRESS.value}
)


def _resumed(incident: Incident, kind: RecoveryKind[Record], status_now: str) -> Unasked | None:
    """The request was written ahead but its answer never recorded (the step died around the
    call), and the node shows a recovery under way: that is the request's effect. It is
    recorded as requested by us, and not sent a second time."""
    record = kind.record_of(incident)
    if record is None or not record.pending or status_now in UNDER_WAY_STATUSES:
        return None
    return Unasked(
        RecoveryStatus.REQUESTED,
        kind.actions[RecoveryStatus.REQUESTED],
        {
            "node_status": status_now,
            "resumed": True,
            "sent_at": record.sent_at,
            "reason": f"the {kind.name} request written ahead is under way (the node is "
            f"{status_now}): not sent again",
        },
        ours=True,
    )


def _begin(
    step: Step,
    incident: Incident,
    kind: RecoveryKind[Record],
    *,
    ours: bool,
    on_enter: Callable[[Incident], None] | None = None,
) -> Incident | RecoveryResult:
    """What every reboot or replacement checks first: the approver decided it (never act
    without), the incident waits for it or is already in it; a storm hold or the pause switch
    holds it while nothing was asked yet (`ours`: an earlier attempt may have asked); the first
    call moves the incident into `kind.state` (and `on_enter` starts its record). Returns the
    incident, or the step's `held` result."""
    decided = incident.decided
    if decided != kind.decision:
        raise kind.not_approved(
            f"incident {incident.incident_id} has no {kind.decision.value} decision "
            f"(decision: {decided})"
        )
    if incident.state not in (IncidentState.AWAITING_APPROVAL, kind.state):
        raise InvalidTransition(f"cannot {kind.verb}: incident is {incident.state}")
    if not ours:
        blocker = guard.blocker(
            step.deps, incident.cluster_name, trusted=incident.has_trusted_evidence
        )
        if blocker is not None:
            guard.hold_in_flight(step, incident, blocker)
            return {"status": RecoveryStatus.HELD}
    if incident.state is not IncidentState.AWAITING_APPROVAL:
        return incident
    at = step.now()

    def enter(current: Incident) -> bool:
        lifecycle.advance(current, kind.state, at)
        if on_enter is not None:
            on_enter(current)
        return True

    return step.update(incident.incident_id, enter, incident)


def _write_ahead(kind: RecoveryKind[Record], at: str) -> Callable[[Incident], bool]:
    """The batch call is about to be sent: noted first, so a retry after the handler died
    counts what it finds (the node rebooting, the node replaced) as ours."""

    def note(current: Incident) -> bool:
        earlier = kind.record_of(current) or kind.record()
        kind.keep(current, dataclasses.replace(earlier, pending=True, sent_at=at))
        return True

    return note


def _send(
    step: Step,
    incident: Incident,
    kind: RecoveryKind[Record],
    request: Request,
    status_now: str,
    check_id: str | None,
    *,
    ours: bool,
) -> RecoveryResult:
    """Carry out `kind` for the incident's node, after its request was written ahead: through
    the node health label where the cluster hands recoveries to HyperPod, else the batch call
    (`request`), reading its per-node `Failed[]` code (`FAILED_CODES`). `ours`: whether an earlier attempt
    of this incident may already have asked (a retry after a crash)."""
    chosen = recovery_path.route(step, incident)
    if chosen.path == RECOVERY_NODE_LABEL:
        chosen = recovery_path.hand_over(step, incident, chosen, kind.label)
    if chosen.path == RECOVERY_NODE_LABEL:
        return _record(
            step,
            incident,
            kind,
            RecoveryStatus.REQUESTED,
            kind.actions[RecoveryStatus.REQUESTED],
            {"node_status": status_now, **recovery_path.details(chosen, kind.label)},
            [check_id],
            ours=True,
        )
    result = request(incident.cluster_name, [incident.instance_id])
    request_ids = [check_id, result.request_id]
    if incident.instance_id in result.successful:
        return _record(
            step,
            incident,
            kind,
            RecoveryStatus.REQUESTED,
            kind.actions[RecoveryStatus.REQUESTED],
            {"node_status": status_now, **recovery_path.details(chosen)},
            request_ids,
            ours=True,
        )
    failure = result.failure_for(incident.instance_id)
    if failure is None:
        raise kind.rejected(
            f"{kind.operation} named the node neither successful nor failed",
            operation=kind.operation,
            request_id=result.request_id,
        )
    status = FAILED_CODES.get(failure.code)
    if status is None:
        raise kind.rejected(
            f"{kind.operation} refused {failure.node_id}: {failure.code} "
            f"{failure.message or ''}".strip(),
            operation=kind.operation,
            code=failure.code,
            request_id=result.request_id,
        )
    failed = {
        "code": failure.code,
        "message": failure.message,
        "node_status": status_now,
        **recovery_path.details(chosen),
    }
    return _record(
        step, incident, kind, status, kind.actions[status], failed, request_ids, ours=ours
    )


def _record(
    step: Step,
    incident: Incident,
    kind: RecoveryKind[Record],
    status: RecoveryStatus,
    action: AuditAction,
    details: dict[str, Any],
    request_ids: list[str | None],
    *,
    ours: bool = False,
) -> RecoveryResult:
    """Keep what a request of `kind` did on the incident (`kind.keep`) and in the
    audit log; the step's result."""
    attempts = (kind.record_of(incident) or kind.record()).attempts or 0
    attempts += 1
    at = step.now()

    def write(current: Incident) -> bool:
        previous = kind.record_of(current) or kind.record()
        requested = status is RecoveryStatus.REQUESTED
        kind.keep(
            current,
            dataclasses.replace(
                previous,
                path=details.get("path", previous.path),
                status=status,
                attempts=attempts,
                dry_run=status is RecoveryStatus.DRY_RUN,
                pending=False,
                requested_by_us=bool(previous.requested_by_us or ours),
                requested_at=at if requested else previous.requested_at,
                last=details,
            ),
        )
        return True

    step.update(incident.incident_id, write, incident)
    step.audit(
        incident.incident_id,
        action,
        {
            "status": status.value,
            "instance_id": incident.instance_id,
            "attempt": attempts,
            **details,
        },
        request_ids,
    )
    count(kind.metric(status))
    logger.info(
        "node recovery recorded",
        incident_id=incident.incident_id,
        kind=kind.name,
        action=action,
        status=status,
    )
    return {"status": status}
