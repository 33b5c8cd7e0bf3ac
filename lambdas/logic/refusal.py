"""An event without the documented shape: kept and explained.

The handler parses the event; when that fails it calls `refuse`, then raises the error again, so
the event lands in the function's dead-letter queue with the error, and the audit log names the
bad field under the event's id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lambdas.logic import ids
from lambdas.logic._steps import Step, error_details
from lambdas.logic.ports import Deps
from lambdas.metric_names import PipelineMetric as M
from lambdas.models.audit import AuditAction
from lambdas.models.errors import MalformedEvent
from lambdas.observability import count


def refuse(event: Any, err: MalformedEvent, actor: str, deps: Deps) -> None:
    """An `event_refused` audit entry under the event's id naming the bad field, and the
    EventsRefused count."""
    raw = event if isinstance(event, Mapping) else {}
    event_id = raw.get("id")
    Step(deps, actor).audit(
        ids.event_subject(str(event_id)[:200] if event_id else "without-id"),
        AuditAction.EVENT_REFUSED,
        error_details(
            err,
            source=_short(raw.get("source")),
            detail_type=_short(raw.get("detail-type")),
        ),
    )
    count(M.EVENTS_REFUSED)


def _short(value: Any) -> Any:
    return value[:200] if isinstance(value, str) else value
