"""Closing: the end of every path of the remediation state machine, failed included; and
reconciliation, which settles the incidents that nothing else will move (closing them, giving
their node back, or sending their card again).

## Reconciliation

Settled from HyperPod's and Step Functions' own state. Run on a schedule (the `reconcile`
function) and by operators (`sdc reconcile`). Each run looks for what can be stuck and does
what it can:

| finding | what is stuck | settled by |
|---|---|---|
| `recovery_unknown` | a failure close kept the node (a reboot or replacement may have been running) | HyperPod reports the node gone; or, after a reboot, seen back from it (`recovery.poll_reboot`) and then passing the deep health check reconciliation starts (a later run reads it): isolation lifted, lock and guard slot given back. Mid-reboot, or the check failed, the node stays cordoned |
| `close_failed` | the incident was marked failed but its close never finished | closing it as failed (which keeps the node if a recovery may be running) |
| `execution_ended` | an open incident whose remediation execution is not running | closing it: `expired` when its approval timed out undecided, else `failed` |
| `card_undelivered` | the approval card never went out | sending it again |
| `orphan_slot` | a guard slot (and lock) held by an incident that is closed or unknown | releasing them (and any isolation still due) |
| `execution_never_started` | an open incident (holding its lock and guard slot) whose remediation execution never started, `EXECUTION_START_GRACE_SECONDS` after it opened | starting it (`opening.execution.ensure_execution`); if that fails, closing it as failed, which gives back its lock and slot |
| `approval_overdue` | an approval still waiting well past its timeout with its execution running | a person (alarm) |
| `rate_held` | a confirmed claim the rate bound held, its minute over | taking it again down the intake's one path (`intake.retake`): judged afresh, opened, or held again |

What it cannot settle within `RECOVERY_PATIENCE_SECONDS` (a node still not Running, a
replacement that never happened) is audited once as `reconcile_needs_person` and counted in
`ReconcileNeedsPerson`, which has an alarm. Everything it does is audited (`reconciled`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from sdc_remediation.lambdas.logic import approval, health_check, intake, isolation, recovery
from sdc_remediation.lambdas.logic.core import lifecycle
from sdc_remediation.lambdas.logic.core.measures import elapsed, report_waiting
from sdc_remediation.lambdas.logic.core.steps import Step, node_status_of, send_notice
from sdc_remediation.lambdas.logic.evidence.history import record_history
from sdc_remediation.lambdas.logic.opening.execution import ensure_execution
from sdc_remediation.lambdas.logic.ports import Deps
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.metric_names import closed_metric
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.errors import ErrorRecord, ExecutionNotFound
from sdc_remediation.lambdas.models.guard import HoldKind
from sdc_remediation.lambdas.models.hyperpod import NodeStatus
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.notices import NoticeKind
from sdc_remediation.lambdas.models.payloads import CloseRequest, CloseResult, Outcome
from sdc_remediation.lambdas.observability import count, logger, seconds
from sdc_remediation.lambdas.wording import cards, chat

S = IncidentState


def close_incident(request: CloseRequest, deps: Deps) -> CloseResult:
    """The end of every path: final state, the node's isolation lifted (unless it was replaced),
    lock and guard slot released, the task token forgotten, audited, history kept, notified
    (failures too).

    Closing twice is harmless: a closed incident keeps its state; what the first attempt may not
    have finished (it died after saving the state) is finished: the locks and the slot are
    released again (idempotent), the closing is audited and the history written if no
    `incident_closed` entry exists yet, and the notice is sent if it did not go out. An outcome
    that does not follow from the incident's state closes it as failed, with the reason.
    """
    step = Step(deps, "close_incident")
    incident = step.load(request.incident_id)
    audited = False
    if incident.closed_at is None:
        target, mismatch = lifecycle.closing_state(incident, request.outcome)
        error = _close_error(request, incident, mismatch)
        at = step.now()

        def close(current: Incident) -> bool:
            current.state = target
            current.error = error
            current.closed_at = at
            current.task_token_sha256 = None
            return True

        incident = step.update(request.incident_id, close, incident)
    else:
        born_closed = incident.state is S.SKIPPED or (
            incident.state is S.HELD and not incident.execution_arn
        )  # recorded closed when opened: audited then (incident_skipped / incident_held)
        audited = born_closed or any(
            e.action == AuditAction.INCIDENT_CLOSED
            for e in deps.audit.entries(incident.incident_id)
        )
    deps.incidents.forget_task_token(incident.incident_id)  # again on a second close: idempotent
    if incident.state is S.FAILED and lifecycle.recovery_in_flight(incident):
        # Never release a node mid-recovery: isolation, lock and slot stay until
        # reconciliation sees HyperPod's own answer (sdc_remediation.lambdas.logic.closing).
        incident = _hand_to_reconciliation(step, incident)
    elif not lifecycle.awaiting_reconciliation(incident):
        release_node(step, incident)
    if not audited:
        replacement = incident.replacement
        step.audit(
            incident.incident_id,
            AuditAction.INCIDENT_CLOSED,
            {
                "state": incident.state.value,
                "outcome": request.outcome.value,
                "error": incident.error.to_record() if incident.error else None,
                "dry_run": bool(replacement and replacement.dry_run),
                "new_instance_id": replacement.new_instance_id if replacement else None,
                "hold": incident.hold.to_record() if incident.hold else None,
            },
        )
        count(closed_metric(incident.state))
        if lifecycle.closed_undecided(incident):
            _alarm_undecided(step, incident, request)
        _measure_close(step, incident)
        logger.info("incident closed", incident_id=incident.incident_id, state=incident.state)
        record_history(step, incident)
    if (
        not incident.close_notified
        and incident.state is not S.SKIPPED
        and incident.hold_kind != HoldKind.STORM
    ):
        _notify_close(step, incident)
    return {"incident_id": incident.incident_id, "state": incident.state}


def _alarm_undecided(step: Step, incident: Incident, request: CloseRequest) -> None:
    """Audited and counted (the metric has an alarm): a close no decision explains."""
    step.audit(
        incident.incident_id,
        AuditAction.CLOSED_UNDECIDED,
        {
            "outcome": request.outcome.value,
            "state": incident.state.value,
            "approval_requested_at": incident.approval_requested_at,
            "decision": incident.decision.to_record() if incident.decision else None,
        },
    )
    count(M.CLOSED_UNDECIDED)
    logger.error("closed without a decision", incident_id=incident.incident_id)


def release_node(step: Step, incident: Incident) -> Incident:
    """Lift the incident's isolation, then give back its locks and its guard slot (each
    idempotent): before the lock goes, so the next incident on this node never finds our
    cordon."""
    deps = step.deps
    incident = isolation.release(step, incident)
    for instance_id in incident.locked_instances:
        deps.incidents.release_lock(incident.cluster_name, instance_id, incident.incident_id)
    deps.guard.release_slot(incident.cluster_name, incident.incident_id)
    return incident


def _hand_to_reconciliation(step: Step, incident: Incident) -> Incident:
    """A failure close while a reboot or replacement may be running: keep the node isolated
    (and its lock and guard slot), record `recovery_unknown`, audit it once; reconciliation
    releases the node when HyperPod reports it gone, or back from its reboot and passing the
    health check after it."""
    if incident.recovery_unknown:
        return incident
    at = step.now()

    def note(current: Incident) -> bool:
        current.recovery_unknown = at
        return True

    incident = step.update(incident.incident_id, note, incident)
    step.audit(
        incident.incident_id,
        AuditAction.RECOVERY_UNKNOWN,
        {
            "instance_id": incident.instance_id,
            "reboot": incident.reboot.to_record() if incident.reboot else None,
            "replacement": incident.replacement.to_record() if incident.replacement else None,
            "kept": "isolation, open lock and guard slot, until reconciliation",
        },
    )
    count(M.RECOVERIES_UNKNOWN)
    logger.warning("recovery may be running: node kept", incident_id=incident.incident_id)
    return incident


def _measure_close(step: Step, incident: Incident) -> None:
    """Time from opened to node recovered (replaced, by us or HyperPod, or rebooted and checked
    again; a dry run recovers nothing), and the approvals-waiting gauge when the incident had waited for a decision."""
    recovered = incident.state in (S.REPLACED, S.REPLACED_BY_HYPERPOD, S.REBOOTED)
    if recovered and not incident.dry_run:
        seconds(M.RECOVERY_LATENCY, elapsed(incident.created_at, step.deps.clock.now()))
    if incident.approval_requested_at:
        report_waiting(step, incident)


def _close_error(
    request: CloseRequest, incident: Incident, mismatch: str | None
) -> ErrorRecord | None:
    error = incident.error
    if request.error is not None:
        error = ErrorRecord({k: str(v)[:2000] for k, v in request.error.items()})
    if mismatch:
        error = (error or ErrorRecord()).with_mismatch(mismatch)
    return error


def _notify_close(step: Step, incident: Incident) -> None:
    notice = cards.close_notice(incident)
    # Not raised on failure: the execution must not end red for a notice.
    send_notice(
        step,
        incident,
        notice.subject,
        notice.text,
        chat.incident_notice(NoticeKind.CLOSED, incident, notice.subject, notice.text),
        AuditAction.CLOSED_NOTIFIED,
        incident,
    )


# -- reconciliation ----------------------------------------------------------------------------

RECOVERY_PATIENCE_SECONDS: Final = 6 * 3600
"""A recovery with no outcome this long after the close kept its node needs a person."""
APPROVAL_GRACE_SECONDS: Final = 3600
"""An approval still waiting this long past its timeout (its execution should have expired
it) needs a person."""
ITEM_SECONDS: Final = 90.0
"""A run starts another incident only with at least this much time left (what closing one
may take: the close_incident function's own timeout)."""
EXECUTION_START_GRACE_SECONDS: Final = 900
"""An open incident with no execution this long after it opened is started by reconciliation.
The opening starts it itself, and a failed start is retried with its event; the execution is
named after the incident, so a start from here can never run a second one. The wait only keeps
reconciliation from racing an opening still in flight (a function runs for minutes at most),
and bounds how long a lost start holds its lock and guard slot."""
OPEN_STATES: Final = tuple(s for s in IncidentState if not s.terminal)


class Finding(StrEnum):
    RECOVERY_UNKNOWN = "recovery_unknown"
    CLOSE_FAILED = "close_failed"
    EXECUTION_ENDED = "execution_ended"
    CARD_UNDELIVERED = "card_undelivered"
    ORPHAN_SLOT = "orphan_slot"
    APPROVAL_OVERDUE = "approval_overdue"
    EXECUTION_NEVER_STARTED = "execution_never_started"
    RATE_HELD = "rate_held"


class Verdict(StrEnum):
    SETTLED = "settled"
    WAITING = "waiting"
    """Not settled yet, within its patience (a node still rebooting, a topic still down)."""
    NEEDS_PERSON = "needs_person"


@dataclass
class Result:
    settled: list[dict[str, Any]] = field(default_factory=list)
    waiting: list[dict[str, Any]] = field(default_factory=list)
    needs_person: list[dict[str, Any]] = field(default_factory=list)
    unfinished: bool = False
    """The run stopped for time before it looked at everything; the next run goes on."""

    def add(self, incident_id: str, finding: Finding, verdict: Verdict, why: str) -> None:
        entry = {"incident_id": incident_id, "finding": finding.value, "why": why}
        {
            Verdict.SETTLED: self.settled,
            Verdict.WAITING: self.waiting,
            Verdict.NEEDS_PERSON: self.needs_person,
        }[verdict].append(entry)

    def to_record(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def reconcile(deps: Deps, time_left: Callable[[], float] | None = None) -> dict[str, Any]:
    """One reconciliation run over every stuck incident (the module docstring); `time_left`:
    seconds left to the run (the function's remaining time)."""
    step = Step(deps, "reconcile")
    result = Result()
    for check in (_stuck_failed, _stuck_open, _orphan_slots, _rate_held):
        for incident_id, act in check(step):
            if time_left is not None and time_left() < ITEM_SECONDS:
                result.unfinished = True
                break
            finding, verdict, why = act()
            _record(step, incident_id, finding, verdict, why)
            result.add(incident_id, finding, verdict, why)
    logger.info(
        "reconciled",
        settled=len(result.settled),
        waiting=len(result.waiting),
        needs_person=len(result.needs_person),
    )
    return result.to_record()


Act = Callable[[], tuple[Finding, Verdict, str]]


def _stuck_failed(step: Step) -> list[tuple[str, Act]]:
    """Failed incidents whose node was kept for a recovery, or whose close never ran."""
    found: list[tuple[str, Act]] = []
    for listed in step.deps.incidents.in_state(S.FAILED):
        if not (lifecycle.awaiting_reconciliation(listed) or listed.closed_at is None):
            continue
        incident = _fresh(step, listed)  # the index lags: judge by the record itself
        if incident is None or incident.state is not S.FAILED:
            continue
        if lifecycle.awaiting_reconciliation(incident):
            found.append((incident.incident_id, _bind(_settle_recovery, step, incident)))
        elif incident.closed_at is None and not _running(step, incident):
            found.append((incident.incident_id, _bind(_close_failed, step, incident)))
    return found


def _stuck_open(step: Step) -> list[tuple[str, Act]]:
    """Open incidents whose execution ended, whose card never went out, or whose approval is
    long overdue."""
    found: list[tuple[str, Act]] = []
    for state in OPEN_STATES:
        for listed in step.deps.incidents.in_state(state):
            if not listed.execution_arn:
                if elapsed(listed.created_at, step.deps.clock.now()) < (
                    EXECUTION_START_GRACE_SECONDS
                ):
                    continue  # the opening may still be starting it (or its retry)
                incident = _fresh(step, listed)
                if incident is not None and not incident.state.terminal:
                    found.append((incident.incident_id, _bind(_start_execution, step, incident)))
                continue
            running = _running(step, listed)
            waiting = listed.state is S.AWAITING_APPROVAL and not listed.decision
            if running and not (waiting and (listed.card_undelivered or _overdue(step, listed))):
                continue
            incident = _fresh(step, listed)  # the index lags: judge by the record itself
            if incident is None or incident.state.terminal:
                continue
            if not running:
                found.append((incident.incident_id, _bind(_close_ended, step, incident)))
            elif incident.state is S.AWAITING_APPROVAL and not incident.decision:
                if incident.card_undelivered:
                    found.append((incident.incident_id, _bind(_resend, step, incident)))
                elif _overdue(step, incident):
                    found.append((incident.incident_id, _bind(_overdue_approval, incident)))
    return found


def _rate_held(step: Step) -> list[tuple[str, Act]]:
    """Node-level incidents the rate bound held whose minute is over and whose claim was not
    taken again yet."""
    now = step.deps.clock.now()
    found: list[tuple[str, Act]] = []
    for held in step.deps.incidents.in_state(S.HELD):
        freed = intake.due_again(held, now)
        if (
            freed is None
            or step.deps.incidents.get(intake.again_id(step.deps, held, freed)) is not None
        ):
            continue
        found.append((held.incident_id, _bind(_take_again, step, held, freed)))
    return found


def _take_again(step: Step, held: Incident, freed: Any) -> tuple[Finding, Verdict, str]:
    results = intake.retake(step.deps, held, freed)
    taken = ", ".join(f"{r['action']} {r['incident_id']}" for r in results) or "nothing to take"
    return Finding.RATE_HELD, Verdict.SETTLED, f"taken again once its minute was over: {taken}"


def _fresh(step: Step, listed: Incident) -> Incident | None:
    return step.deps.incidents.get(listed.incident_id)


def _orphan_slots(step: Step) -> list[tuple[str, Act]]:
    """Guard slots held by incidents that are closed (and not kept for a recovery) or gone."""
    found: list[tuple[str, Act]] = []
    deps = step.deps
    for cluster in sorted(deps.settings.allowed_clusters):
        for incident_id in deps.guard.guard_state(cluster).open_ids:
            incident = deps.incidents.get(incident_id)
            if incident is None:
                found.append(
                    (incident_id, _bind(_release_unknown_slot, step, cluster, incident_id))
                )
            elif (
                incident.state.terminal
                and incident.closed_at is not None
                and not lifecycle.awaiting_reconciliation(incident)
            ):
                found.append((incident_id, _bind(_release_closed, step, incident)))
    return found


# -- the settlements ---------------------------------------------------------------------------


def _settle_recovery(step: Step, incident: Incident) -> tuple[Finding, Verdict, str]:
    """Release the kept node once HyperPod says the recovery is over, by the evidence the state
    machine would have waited for: the node gone (replaced); or, after a reboot, the node seen
    back from it (`recovery.poll_reboot`) and then the deep health check after the reboot
    passed (`health_check.start_after_reboot`, its result read by a later run). Until then the
    node stays cordoned; a check that failed needs a person."""
    reboot = incident.reboot
    if reboot and reboot.asked and not reboot.done and not reboot.dry_run:
        incident, status, done = recovery.poll_reboot(step, incident)
        if done:
            return _check_after_reboot(step, incident)
    elif reboot and reboot.done and not reboot.dry_run and not lifecycle.requested_by_us(incident):
        return _check_after_reboot(step, incident)
    else:
        status, _ = node_status_of(step.deps, incident)
    if status == NodeStatus.NOT_FOUND:
        return _release_kept(step, incident, status, f"HyperPod reports the node {status}")
    return _wait_or_person(step, incident, f"the node is {status}")


def _check_after_reboot(step: Step, incident: Incident) -> tuple[Finding, Verdict, str]:
    """The node is back from its reboot: start the deep health check (once it is Running), then
    read its result on later runs; release the node only when it passed."""
    finding = Finding.RECOVERY_UNKNOWN
    record = incident.health_check
    if not (record and record.after_reboot and record.started):
        record = health_check.start_after_reboot(step, incident)
        if not record.started:
            return _wait_or_person(
                step, incident, f"back from its reboot, no health check yet: {record.reason}"
            )
        return finding, Verdict.WAITING, "back from its reboot: the health check started"
    if record.result is None:
        record = health_check.poll_after_reboot(step, incident)
    if record.result is None:
        return _wait_or_person(step, incident, "the health check after the reboot is running")
    if health_check.passed_every_node(record):
        return _release_kept(
            step,
            incident,
            NodeStatus(str(incident.node_status)) if not incident.is_job else None,
            f"the health check after the reboot ended {record.status}",
        )
    return (
        finding,
        Verdict.NEEDS_PERSON,
        f"the health check after the reboot did not pass ({record.status}): the node stays "
        "cordoned",
    )


def _release_kept(
    step: Step, incident: Incident, status: NodeStatus | None, why: str
) -> tuple[Finding, Verdict, str]:
    at = step.now()
    incident = release_node(step, incident)

    def settled(current: Incident) -> bool:
        current.reconciled_at = at
        if status is not None:
            current.node_status = status
        return True

    step.update(incident.incident_id, settled, incident)
    return Finding.RECOVERY_UNKNOWN, Verdict.SETTLED, f"{why}: node released"


def _wait_or_person(step: Step, incident: Incident, what: str) -> tuple[Finding, Verdict, str]:
    waited = elapsed(incident.recovery_unknown or incident.updated_at, step.deps.clock.now())
    why = f"{what} {int(waited)} s after the close kept it"
    if waited >= RECOVERY_PATIENCE_SECONDS:
        return Finding.RECOVERY_UNKNOWN, Verdict.NEEDS_PERSON, why
    return Finding.RECOVERY_UNKNOWN, Verdict.WAITING, why


def _close_failed(step: Step, incident: Incident) -> tuple[Finding, Verdict, str]:
    closed = close_incident(CloseRequest(incident.incident_id, Outcome.FAILED, None), step.deps)
    return Finding.CLOSE_FAILED, Verdict.SETTLED, f"closed as {closed['state']}"


def _close_ended(step: Step, incident: Incident) -> tuple[Finding, Verdict, str]:
    status = _execution_status(step, incident)
    expired = (
        incident.state is S.AWAITING_APPROVAL
        and not incident.decision
        and _overdue(step, incident, grace=0)
    )
    outcome = Outcome.EXPIRED if expired else Outcome.FAILED
    error = {
        "Error": "ExecutionEnded",
        "Cause": f"the remediation execution is {status or 'unknown to Step Functions'} while "
        f"the incident was {incident.state}",
    }
    closed = close_incident(
        CloseRequest(incident.incident_id, outcome, None if expired else error), step.deps
    )
    return (
        Finding.EXECUTION_ENDED,
        Verdict.SETTLED,
        f"execution {status}: closed as {closed['state']}",
    )


def _start_execution(step: Step, incident: Incident) -> tuple[Finding, Verdict, str]:
    """Start the execution the opening never started; if it cannot start, close the incident as
    failed (its lock and guard slot given back), with the reason."""
    finding = Finding.EXECUTION_NEVER_STARTED
    if incident.execution_arn:
        return finding, Verdict.SETTLED, "its execution had started meanwhile"
    try:
        ensure_execution(step, incident.incident_id, incident)
    except Exception as err:  # audited by ensure_execution (execution_start_failed)
        error = {
            "Error": "ExecutionNeverStarted",
            "Cause": f"the remediation execution could not be started: {err}"[:2000],
        }
        closed = close_incident(
            CloseRequest(incident.incident_id, Outcome.FAILED, error), step.deps
        )
        return finding, Verdict.SETTLED, f"it could not start: closed as {closed['state']}"
    return finding, Verdict.SETTLED, "its execution started"


def _resend(step: Step, incident: Incident) -> tuple[Finding, Verdict, str]:
    if approval.resend_card(step, incident):
        return Finding.CARD_UNDELIVERED, Verdict.SETTLED, "the approval card went out"
    return Finding.CARD_UNDELIVERED, Verdict.NEEDS_PERSON, "the approval card still cannot go out"


def _overdue_approval(incident: Incident) -> tuple[Finding, Verdict, str]:
    return (
        Finding.APPROVAL_OVERDUE,
        Verdict.NEEDS_PERSON,
        f"waiting for a decision since {incident.approval_requested_at}, past its timeout, "
        "with its execution still running",
    )


def _release_unknown_slot(
    step: Step, cluster: str, incident_id: str
) -> tuple[Finding, Verdict, str]:
    step.deps.guard.release_slot(cluster, incident_id)
    return Finding.ORPHAN_SLOT, Verdict.SETTLED, "no such incident: its guard slot released"


def _release_closed(step: Step, incident: Incident) -> tuple[Finding, Verdict, str]:
    """A close that saved the final state and died before the rest: closing again (with the
    state it closed in) finishes it: isolation, lock and slot released, audit, notice."""
    close_incident(
        CloseRequest(incident.incident_id, Outcome(incident.state.value), None), step.deps
    )
    return (
        Finding.ORPHAN_SLOT,
        Verdict.SETTLED,
        f"closed as {incident.state}: its close finished (lock, guard slot, isolation released)",
    )


# -- helpers ------------------------------------------------------------------------------------


def _bind(fn: Callable[..., tuple[Finding, Verdict, str]], *args: Any) -> Act:
    return lambda: fn(*args)


def _running(step: Step, incident: Incident) -> bool:
    if not incident.execution_arn:
        return False
    return _execution_status(step, incident) == "RUNNING"


def _execution_status(step: Step, incident: Incident) -> str | None:
    """The remediation execution's status as Step Functions reports it; None when it does not
    know the execution."""
    try:
        return step.deps.workflow.describe_execution(str(incident.execution_arn)).status
    except ExecutionNotFound:
        return None


def _overdue(step: Step, incident: Incident, grace: int = APPROVAL_GRACE_SECONDS) -> bool:
    timeout = step.deps.settings.approval_timeout_seconds
    if timeout is None or not incident.approval_requested_at:
        return False
    waited = elapsed(incident.approval_requested_at, step.deps.clock.now())
    return waited >= timeout + grace


def _record(step: Step, incident_id: str, finding: Finding, verdict: Verdict, why: str) -> None:
    details = {"finding": finding.value, "verdict": verdict.value, "why": why}
    if verdict is Verdict.SETTLED:
        step.audit(incident_id, AuditAction.RECONCILED, details)
        count(M.INCIDENTS_RECONCILED)
        return
    if verdict is Verdict.NEEDS_PERSON:
        count(M.RECONCILE_NEEDS_PERSON)
        entries = step.deps.audit.entries(incident_id)
        if not entries or entries[-1].action != AuditAction.RECONCILE_NEEDS_PERSON:
            step.audit(incident_id, AuditAction.RECONCILE_NEEDS_PERSON, details)
        logger.warning("needs a person", incident_id=incident_id, finding=finding.value)
