"""An approved reboot or replacement, carried out (`carry_out`): what is checked before anything
is asked, when nothing is asked (each kind's own rule), the request written ahead and sent along
the path `lambdas.logic.recovery_path` chooses, every `Failed[]` code read, and the record kept
on the incident and in the audit log. `lambdas.logic.reboot` and `lambdas.logic.replacement`
are its two kinds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from lambdas.logic import guard, lifecycle, recovery_path
from lambdas.logic._steps import Step, node_status_of
from lambdas.metric_names import PipelineMetric, reboot_metric, replace_metric
from lambdas.models.errors import (
    AwsError,
    InvalidTransition,
    RebootNotApproved,
    RebootRejected,
    ReplacementNotApproved,
    ReplacementRejected,
    SdcError,
)
from lambdas.models.hyperpod import BatchErrorCode, NodeStatus
from lambdas.models.incident import Incident, IncidentState
from lambdas.models.kubernetes import PENDING_REBOOT, PENDING_REPLACEMENT
from lambdas.models.payloads import Decision, RecoveryResult, RecoveryStatus
from lambdas.models.recovery import RebootRecord, ReplacementRecord
from lambdas.observability import count, logger


@dataclass(frozen=True, slots=True)
class Kind:
    """A recovery the approver can choose: how it is asked for and how it is audited."""

    name: str
    """The audit actions' prefix: `<name>_requested`, `<name>_in_progress`, `<name>_retry`."""
    operation: str
    method: str
    """The HyperPod port's method for `operation`."""
    label: str
    """The node health label value that hands it to HyperPod."""
    rejected: type[AwsError]
    field: str
    """The incident's record of it (`replacement` or `reboot`)."""
    record: type[ReplacementRecord] | type[RebootRecord]
    """That record's type: an empty one starts it."""
    decision: Decision
    """The approver's decision that asks for it."""
    state: IncidentState
    """The incident's state while it runs."""
    verb: str
    not_approved: type[SdcError]
    metric: Callable[[RecoveryStatus], PipelineMetric]
    """The pipeline counter of each result (`ReplaceRequested`, `RebootRetry`, ...)."""


REPLACEMENT: Final = Kind(
    "replacement",
    "BatchReplaceClusterNodes",
    "replace_nodes",
    PENDING_REPLACEMENT,
    ReplacementRejected,
    field="replacement",
    record=ReplacementRecord,
    metric=replace_metric,
    decision=Decision.APPROVE,
    state=IncidentState.REPLACING,
    verb="replace",
    not_approved=ReplacementNotApproved,
)
REBOOT: Final = Kind(
    "reboot",
    "BatchRebootClusterNodes",
    "reboot_nodes",
    PENDING_REBOOT,
    RebootRejected,
    field="reboot",
    record=RebootRecord,
    metric=reboot_metric,
    decision=Decision.REBOOT,
    state=IncidentState.REBOOTING,
    verb="reboot",
    not_approved=RebootNotApproved,
)

FAILED_CODES: Final[dict[str, tuple[RecoveryStatus, str | None]]] = {
    BatchErrorCode.INSTANCE_ID_IN_USE: (RecoveryStatus.IN_PROGRESS, "in_progress"),
    BatchErrorCode.INVALID_INSTANCE_STATUS: (RecoveryStatus.RETRY, "retry"),
    BatchErrorCode.INTERNAL_SERVER_ERROR: (RecoveryStatus.RETRY, "retry"),
    BatchErrorCode.INSTANCE_ID_NOT_FOUND: (RecoveryStatus.GONE, None),
}
"""A `Failed[]` code of either batch call → what it means: in use (our earlier request after a
crash, or HyperPod's own recovery) → in progress; a status or server error → retry later
(bounded by the state machine); not found → the node is gone; anything else fails the step."""


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
    action: str
    details: dict[str, Any]
    ours: bool = False
    """Recorded as asked by this pipeline (`requested_by_us`): an earlier attempt had asked."""


def carry_out(
    step: Step,
    incident: Incident,
    kind: Kind,
    unasked: Callable[[Found], Unasked | None],
    *,
    ours: bool,
    on_enter: Callable[[Incident], None] | None = None,
) -> RecoveryResult:
    """An approved reboot or replacement from start to end: `_begin`; the node re-checked;
    either `unasked` says why nothing is asked, and that is recorded, or the request is written
    ahead and sent."""
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
    return _send(step, pending, kind, status_now, check_id, ours=ours)


UNDER_WAY_STATUSES: Final = frozenset(
    {NodeStatus.RUNNING.value, NodeStatus.FAILURE.value, NodeStatus.NOT_FOUND.value}
)
"""Node statuses in which a request may still have to be sent; in any other (Pending,
ShuttingDown, ...) a recovery is under way."""


def _answered_before(step: Step, incident: Incident, kind: Kind) -> RecoveryResult | None:
    """An earlier attempt sent the request and saved HyperPod's answer, then died (or its
    answer was lost on the way back): the saved answer is the result, nothing is sent again.
    A `requested` answer whose audit entry the earlier attempt did not write gets it now, so
    the audit names every request that was sent."""
    record = getattr(incident, kind.field)
    if record is None or record.pending or record.status not in _SETTLED_ANSWERS:
        return None
    action = f"{kind.name}_requested"
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
    return {"status": str(record.status)}


_SETTLED_ANSWERS: Final = frozenset(
    {RecoveryStatus.REQUESTED.value, RecoveryStatus.IN_PROGRESS.value}
)


def _resumed(incident: Incident, kind: Kind, status_now: str) -> Unasked | None:
    """The request was written ahead but its answer never recorded (the step died around the
    call), and the node shows a recovery under way: that is the request's effect. It is
    recorded as requested by us, and not sent a second time."""
    record = getattr(incident, kind.field)
    if record is None or not record.pending or status_now in UNDER_WAY_STATUSES:
        return None
    return Unasked(
        RecoveryStatus.REQUESTED,
        f"{kind.name}_requested",
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
    kind: Kind,
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
        blocker = guard.blocker(step.deps, incident.cluster_name)
        if blocker is not None:
            guard.hold_in_flight(step, incident, blocker)
            return {"status": RecoveryStatus.HELD.value}
    if incident.state is not IncidentState.AWAITING_APPROVAL:
        return incident
    at = step.now()

    def enter(current: Incident) -> bool:
        lifecycle.advance(current, kind.state, at)
        if on_enter is not None:
            on_enter(current)
        return True

    return step.update(incident.incident_id, enter, incident)


def _write_ahead(kind: Kind, at: str) -> Callable[[Incident], bool]:
    """The batch call is about to be sent: noted first, so a retry after the handler died
    counts what it finds (the node rebooting, the node replaced) as ours."""

    def note(current: Incident) -> bool:
        earlier = getattr(current, kind.field) or kind.record()
        setattr(current, kind.field, dataclasses.replace(earlier, pending=True, sent_at=at))
        return True

    return note


def _send(
    step: Step,
    incident: Incident,
    kind: Kind,
    status_now: str,
    check_id: str | None,
    *,
    ours: bool,
) -> RecoveryResult:
    """Carry out `kind` for the incident's node, after its request was written ahead: through
    the node health label where the cluster hands recoveries to HyperPod, else the batch call,
    reading its per-node `Failed[]` code (`FAILED_CODES`). `ours`: whether an earlier attempt
    of this incident may already have asked (a retry after a crash)."""
    chosen = recovery_path.route(step, incident)
    if chosen.path == recovery_path.NODE_LABEL:
        chosen = recovery_path.hand_over(step, incident, chosen, kind.label)
    if chosen.path == recovery_path.NODE_LABEL:
        return _record(
            step,
            incident,
            kind,
            RecoveryStatus.REQUESTED,
            f"{kind.name}_requested",
            {"node_status": status_now, **recovery_path.details(chosen, kind.label)},
            [check_id],
            ours=True,
        )
    call = getattr(step.deps.hyperpod, kind.method)
    result = call(incident.cluster_name, [incident.instance_id])
    request_ids = [check_id, result.request_id]
    if incident.instance_id in result.successful:
        return _record(
            step,
            incident,
            kind,
            RecoveryStatus.REQUESTED,
            f"{kind.name}_requested",
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
    answer = FAILED_CODES.get(failure.code)
    if answer is None:
        raise kind.rejected(
            f"{kind.operation} refused {failure.node_id}: {failure.code} "
            f"{failure.message or ''}".strip(),
            operation=kind.operation,
            code=failure.code,
            request_id=result.request_id,
        )
    status, suffix = answer
    failed = {
        "code": failure.code,
        "message": failure.message,
        "node_status": status_now,
        **recovery_path.details(chosen),
    }
    action = f"{kind.name}_{suffix}" if suffix else "node_gone"
    return _record(step, incident, kind, status, action, failed, request_ids, ours=ours)


def _record(
    step: Step,
    incident: Incident,
    kind: Kind,
    status: RecoveryStatus,
    action: str,
    details: dict[str, Any],
    request_ids: list[str | None],
    *,
    ours: bool = False,
) -> RecoveryResult:
    """Keep what a request of `kind` did on the incident (`incident.<kind.field>`) and in the
    audit log; the step's result."""
    attempts = (getattr(incident, kind.field) or kind.record()).attempts or 0
    attempts += 1
    at = step.now()

    def write(current: Incident) -> bool:
        previous = getattr(current, kind.field) or kind.record()
        requested = status is RecoveryStatus.REQUESTED
        setattr(
            current,
            kind.field,
            dataclasses.replace(
                previous,
                path=details.get("path", previous.path),
                status=status.value,
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
    logger.info(f"{kind.name} of the node", incident_id=incident.incident_id, status=status.value)
    return {"status": status.value}
