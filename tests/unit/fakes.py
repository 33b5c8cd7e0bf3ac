"""In-memory implementations of the logic's ports (type-checked against them at the bottom).

They copy on every read and write, like a real store would, and enforce the same conditions
(open lock, incident version, audit seq), so the logic cannot rely on shared objects.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from lambdas.logic.ports import ExecutionStarted
from lambdas.models.audit import AuditEntry
from lambdas.models.errors import (
    ConditionFailed,
    IncidentExists,
    LockHeld,
    TaskNotWaiting,
)
from lambdas.models.events import SdcReport
from lambdas.models.incident import Incident


class InMemoryIncidentStore:
    """IncidentStore and ReportStore."""

    def __init__(self) -> None:
        self.incidents: dict[str, Incident] = {}
        self.locks: dict[tuple[str, str], str] = {}
        self.reports: dict[tuple[str, str], dict[str, SdcReport]] = {}
        self.fail_next_save: Exception | None = None

    def create(self, incident: Incident) -> None:
        key = (incident.cluster_name, incident.instance_id)
        if incident.incident_id in self.incidents:
            raise IncidentExists(f"incident {incident.incident_id} exists")
        if incident.holds_lock:
            if key in self.locks:
                raise LockHeld(self.locks[key])
            self.locks[key] = incident.incident_id
        self.incidents[incident.incident_id] = copy.deepcopy(incident)

    def get(self, incident_id: str) -> Incident | None:
        found = self.incidents.get(incident_id)
        return copy.deepcopy(found) if found else None

    def save(self, incident: Incident) -> None:
        if self.fail_next_save is not None:
            error, self.fail_next_save = self.fail_next_save, None
            raise error
        stored = self.incidents.get(incident.incident_id)
        if stored is None or stored.version != incident.version:
            raise ConditionFailed("stale incident")
        incident.version += 1
        self.incidents[incident.incident_id] = copy.deepcopy(incident)

    def open_incident_id(self, cluster_name: str, instance_id: str) -> str | None:
        return self.locks.get((cluster_name, instance_id))

    def release_lock(self, cluster_name: str, instance_id: str, incident_id: str) -> None:
        if self.locks.get((cluster_name, instance_id)) == incident_id:
            del self.locks[(cluster_name, instance_id)]

    def put_report(self, report: SdcReport, instance_id: str, expires_at: int) -> bool:
        stored = self.reports.setdefault((report.cluster_name, instance_id), {})
        sort_key = f"{report.emitted_at}#{report.report_id}"
        if sort_key in stored:
            return False
        stored[sort_key] = report
        return True

    def latest_report(self, cluster_name: str, instance_id: str) -> SdcReport | None:
        stored = self.reports.get((cluster_name, instance_id), {})
        return stored[max(stored)] if stored else None


class InMemoryAuditLog:
    def __init__(self) -> None:
        self.items: dict[str, dict[int, AuditEntry]] = {}

    def last(self, incident_id: str) -> AuditEntry | None:
        entries = self.items.get(incident_id, {})
        return entries[max(entries)] if entries else None

    def append(self, entry: AuditEntry) -> None:
        entries = self.items.setdefault(entry.incident_id, {})
        if entry.seq in entries:
            raise ConditionFailed(f"seq {entry.seq} taken")
        entries[entry.seq] = entry

    def entries(self, incident_id: str) -> list[AuditEntry]:
        return [e for _, e in sorted(self.items.get(incident_id, {}).items())]

    def actions(self, incident_id: str) -> list[str]:
        return [e.action for e in self.entries(incident_id)]


@dataclass
class Published:
    subject: str
    message: str
    attributes: dict[str, str]


class RecordingNotifier:
    def __init__(self) -> None:
        self.published: list[Published] = []
        self.fail_next: Exception | None = None

    def publish(self, subject: str, message: str, attributes: Mapping[str, str]) -> str | None:
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        self.published.append(Published(subject, message, dict(attributes)))
        return f"sns-{len(self.published)}"


class FakeWorkflow:
    """Executions by name (a name starts one execution, ever); tokens answered at most once."""

    def __init__(self) -> None:
        self.executions: dict[str, dict[str, Any]] = {}
        self.waiting_tokens: set[str] = set()
        self.answers: list[tuple[str, dict[str, Any]]] = []
        self.fail_next_start: Exception | None = None
        self.fail_next_send: Exception | None = None
        self._ids = itertools.count(1)

    def start_execution(self, name: str, payload: Mapping[str, Any]) -> ExecutionStarted:
        if self.fail_next_start is not None:
            error, self.fail_next_start = self.fail_next_start, None
            raise error
        arn = f"arn:aws:states:us-west-2:111122223333:execution:remediation:{name}"
        if name in self.executions:
            return ExecutionStarted(arn, f"sfn-{next(self._ids)}", already_existed=True)
        self.executions[name] = dict(payload)
        return ExecutionStarted(arn, f"sfn-{next(self._ids)}")

    def send_task_success(self, task_token: str, output: Mapping[str, Any]) -> str | None:
        if self.fail_next_send is not None:
            error, self.fail_next_send = self.fail_next_send, None
            raise error
        if task_token not in self.waiting_tokens:
            raise TaskNotWaiting("no task waits for this token", code="TaskDoesNotExist")
        self.waiting_tokens.discard(task_token)
        self.answers.append((task_token, dict(output)))
        return f"sfn-{next(self._ids)}"


@dataclass
class SteppingClock:
    """Each `now()` is one second after the previous one: entries get distinct, ordered times."""

    current: datetime = field(default_factory=lambda: datetime(2026, 11, 30, 8, 15, 5, tzinfo=UTC))

    def now(self) -> datetime:
        self.current += timedelta(seconds=1)
        return self.current


if TYPE_CHECKING:
    from lambdas.logic.ports import (
        AuditLog,
        Clock,
        IncidentStore,
        Notifier,
        ReportStore,
        Workflow,
    )

    _incidents: IncidentStore = InMemoryIncidentStore()
    _reports: ReportStore = InMemoryIncidentStore()
    _audit: AuditLog = InMemoryAuditLog()
    _notifier: Notifier = RecordingNotifier()
    _workflow: Workflow = FakeWorkflow()
    _clock: Clock = SteppingClock()
