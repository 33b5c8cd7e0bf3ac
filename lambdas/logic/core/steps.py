"""What every step shares: loading and saving incidents with retries, auditing, turning a
failure into a visible state (audited, incident marked failed) before it is re-raised, and
reading the node's status from HyperPod."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

from sdc_remediation.lambdas.logic.core.audit import Auditor
from sdc_remediation.lambdas.logic.ports import Deps
from sdc_remediation.lambdas.metric_names import PipelineMetric as M
from sdc_remediation.lambdas.models.audit import AuditAction, AuditEntry
from sdc_remediation.lambdas.models.errors import (
    ConditionFailed,
    ErrorRecord,
    IncidentNotFound,
    NodeNotFound,
    SdcError,
)
from sdc_remediation.lambdas.models.hyperpod import NodeStatus
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.lifecycle_event import IncidentStateChange
from sdc_remediation.lambdas.models.notices import ChatNotification, NoticeKind
from sdc_remediation.lambdas.observability import count, logger

SAVE_ATTEMPTS = 5
ERROR_TEXT_LIMIT = 2000


class Step:
    """One logic step (`actor` in the audit log is the step's name)."""

    def __init__(self, deps: Deps, actor: str) -> None:
        self.deps = deps
        self.actor = actor
        self.auditor = Auditor(deps.audit, deps.clock, deps.anchor)

    def now(self) -> str:
        return self.deps.clock.now().isoformat()

    def load(self, incident_id: str) -> Incident:
        incident = self.deps.incidents.get(incident_id)
        if incident is None:
            raise IncidentNotFound(f"no incident {incident_id}")
        return incident

    def update(
        self,
        incident_id: str,
        mutate: Callable[[Incident], bool],
        current: Incident | None = None,
    ) -> Incident:
        """Apply `mutate` (returns whether it changed anything) and save. The first attempt may
        start from `current` (just loaded by the caller); a lost race for the version re-reads
        and re-applies. A saved change of state is published as a lifecycle event."""
        attempt = 0
        while True:
            attempt += 1
            incident = current if attempt == 1 and current is not None else self.load(incident_id)
            before = incident.state
            if not mutate(incident):
                return incident
            incident.updated_at = self.now()
            try:
                self.deps.incidents.save(incident)
            except ConditionFailed:
                if attempt >= SAVE_ATTEMPTS:
                    raise
                continue
            if incident.state != before:
                self._publish(incident, before)
            return incident

    def created(self, incident: Incident) -> None:
        """Publish the lifecycle event of an incident just created (opened, held, skipped)."""
        self._publish(incident, None)

    def _publish(self, incident: Incident, old_state: IncidentState | None) -> None:
        """The lifecycle event of the change; a failure is audited and logged, never raised."""
        change = IncidentStateChange.of(
            incident,
            old_state.value if old_state else None,
            self.deps.settings.approval_state_machine_arn,
        )
        try:
            self.deps.lifecycle.publish(change)
        except Exception as err:
            logger.exception("lifecycle event failed", incident_id=incident.incident_id)
            try:
                self.audit(
                    incident.incident_id,
                    AuditAction.LIFECYCLE_EVENT_FAILED,
                    error_details(err, old_state=change.old_state, new_state=change.new_state),
                )
            except Exception:
                logger.exception(
                    "could not audit the failed event", incident_id=incident.incident_id
                )

    def audit(
        self,
        subject: str,
        action: AuditAction,
        details: Mapping[str, Any] | None = None,
        request_ids: Iterable[str | None] = (),
        *,
        actor: str | None = None,
    ) -> AuditEntry:
        entry = self.auditor.record(
            subject,
            action,
            actor=actor or self.actor,
            details=details,
            request_ids=request_ids,
        )
        logger.info("audited", subject=subject, action=action, seq=entry.seq)
        return entry

    @contextmanager
    def failing_visibly(self, incident_id: str) -> Iterator[None]:
        """Any exception in the block: incident marked failed, failure audited, re-raised.

        A retryable error (throttling, a service-side failure) is audited and re-raised but
        leaves the incident as it is: the state machine retries the step (its Retry matches the
        error name); once its attempts are spent, its Catch closes the incident as failed with
        the error as the cause."""
        try:
            yield
        except SdcError as err:
            if err.retryable:
                self.note_retryable(incident_id, err)
            else:
                self.fail(incident_id, err)
            raise
        except Exception as err:
            self.fail(incident_id, err)
            raise

    def note_retryable(self, incident_id: str, err: SdcError) -> None:
        details = error_details(err, step=self.actor)
        count(M.STEP_RETRYABLE_ERRORS)
        logger.warning("step will be retried", incident_id=incident_id, step=self.actor)
        try:
            self.audit(
                incident_id, AuditAction.STEP_ERROR_RETRYABLE, details, [details.get("request_id")]
            )
        except Exception:
            logger.exception("could not audit the retryable error", incident_id=incident_id)

    def fail(self, incident_id: str, err: BaseException) -> None:
        """Best effort: a failure while recording the failure is logged, never hides `err`."""
        details = error_details(err, step=self.actor)
        count(M.STEP_FAILURES)
        logger.exception("step failed", incident_id=incident_id, step=self.actor)
        try:
            if self.deps.incidents.get(incident_id) is None:
                return

            def mark(incident: Incident) -> bool:
                incident.error = ErrorRecord(details)
                if not incident.state.terminal:
                    incident.state = IncidentState.FAILED
                return True

            self.update(incident_id, mark)
            self.audit(incident_id, AuditAction.STEP_FAILED, details, [details.get("request_id")])
        except Exception:
            logger.exception("could not record the failure", incident_id=incident_id)


def node_status_of(deps: Deps, incident: Incident) -> tuple[NodeStatus, str | None]:
    """The node's status as HyperPod reports it (`NotFound` when it is gone), and the request id."""
    try:
        node = deps.hyperpod.describe_node(incident.cluster_name, incident.instance_id)
    except NodeNotFound as err:
        return NodeStatus.NOT_FOUND, err.request_id
    return node.status, node.request_id


def error_details(err: BaseException, **extra: Any) -> dict[str, Any]:
    details = (
        err.details()
        if isinstance(err, SdcError)
        else {
            "type": type(err).__name__,
            "message": str(err),
        }
    )
    details["message"] = str(details.get("message", ""))
    return {
        key: value[:ERROR_TEXT_LIMIT] if isinstance(value, str) else value
        for key, value in {**extra, **details}.items()
    }


AUDITED_NOTE: Final = "audited as "
"""How a raised error says its failure is in the audit log already (`mark_audited`)."""


def mark_audited(err: BaseException, action: AuditAction, subject: str) -> None:
    """Note on `err` that its failure was audited (`action` under `subject`), so a caller
    further up that audits whatever it cannot handle does not write it twice; the note shows
    in the error's traceback, in the function's log and its failure queue."""
    err.add_note(f"{AUDITED_NOTE}{action} under {subject}")


def was_audited(err: BaseException) -> bool:
    """Whether a step below already audited this failure (`mark_audited`)."""
    return any(note.startswith(AUDITED_NOTE) for note in getattr(err, "__notes__", ()))


NOTICE_RETRY_DELAYS: Final = (0.5, 1.0, 2.0, 4.0)
"""Seconds between the attempts of one notice (after the SDK's own retries of each)."""
NOTICE_RETRY_WINDOW_SECONDS: Final = 8.0
"""No retry of a notice starts later than this after its first attempt: the function keeps
the rest of its time to record the outcome."""


def publish_with_retries(
    step: Step, subject_id: str, kind: NoticeKind, publish: Callable[[], str | None]
) -> tuple[bool, str | None]:
    """Call `publish` (one notice), retrying a retryable failure (throttled, the service
    unavailable) with backoff within `NOTICE_RETRY_WINDOW_SECONDS`. Returns the request id, or
    (delivered, the request id); not delivered: audited as `notification_failed` (with the
    attempts) and counted, never raised."""
    started = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        try:
            return True, publish()
        except Exception as err:
            failure: BaseException = err
            retryable = isinstance(err, SdcError) and err.retryable
        delay = NOTICE_RETRY_DELAYS[min(attempt - 1, len(NOTICE_RETRY_DELAYS) - 1)]
        late = time.monotonic() - started + delay > NOTICE_RETRY_WINDOW_SECONDS
        if not retryable or attempt > len(NOTICE_RETRY_DELAYS) or late:
            break
        count(M.NOTICES_RETRIED)
        logger.warning("notice retried", incident_id=subject_id, kind=kind, attempt=attempt)
        step.deps.sleep(delay)
    count(M.NOTICES_UNDELIVERED)
    logger.error("notice not delivered", incident_id=subject_id, kind=kind, attempts=attempt)
    step.audit(
        subject_id,
        AuditAction.NOTIFICATION_FAILED,
        error_details(failure, kind=kind, attempts=attempt),
    )
    return False, None


def send_notice(
    step: Step,
    incident: Incident,
    subject: str,
    text: str,
    chat: ChatNotification,
    sent_action: AuditAction,
    current: Incident | None = None,
) -> None:
    """Publish a notice about `incident` (`publish_with_retries`: retried with backoff), with `chat` its
    chat rendering (`sdc_remediation.lambdas.wording.chat`; its kind is the notice's), then mark it
    `close_notified` and audit `sent_action`. A notice that could not be delivered is audited
    as `notification_failed` and not raised: the incident is recorded either way, and the flag
    stays false so a retry sends the notice again."""
    delivered, request_id = publish_with_retries(
        step,
        incident.incident_id,
        chat.kind,
        lambda: step.deps.notifier.publish(
            subject,
            text,
            {
                "incident_id": incident.incident_id,
                "kind": chat.kind,
                "state": incident.state.value,
            },
            chat,
        ),
    )
    if not delivered:
        return

    def mark(found: Incident) -> bool:
        found.close_notified = True
        return True

    step.update(incident.incident_id, mark, current)
    step.audit(incident.incident_id, sent_action, {"subject": subject}, [request_id])
