"""What a CloudWatch dashboard sends a custom widget's function: the `widgetContext` every call
carries (the dashboard's time zone among it), or `{"describe": true}` when the console asks what
the widget is.

Only the time zone is read: the page shows each approval's deadline in the viewer's zone and in
UTC. The context names the calling account, never the calling principal, so nothing here (nor
anything the page renders) can say who is looking.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

OFFSET_RE: Final = re.compile(r"^([+-])(\d{2}):(\d{2})$")
"""`offsetISO` as the dashboard sends it: `+05:30`, `-08:00`, `+00:00`."""
MAX_OFFSET: Final = timedelta(hours=14)
"""The widest UTC offset any time zone has."""
LABEL_LIMIT: Final = 64


@dataclass(frozen=True, slots=True)
class WidgetZone:
    """The dashboard's time zone: its label and its offset from UTC."""

    label: str
    offset: timedelta

    @classmethod
    def utc(cls) -> WidgetZone:
        return cls("UTC", timedelta(0))


@dataclass(frozen=True, slots=True)
class WidgetRequest:
    describe: bool
    """The console asks for the widget's documentation, not for its content (the event has a
    `describe` key, whatever its value, as AWS's own samples read it)."""
    zone: WidgetZone


class WidgetRequestError(ValueError):
    """The widget's request names a time zone offset the page cannot read."""


def parse_widget_request(event: Any) -> WidgetRequest:
    """The request of a dashboard's call. No `widgetContext` (a test invoke) or no time zone in
    it: UTC. A malformed offset is refused, naming what was sent."""
    if not isinstance(event, dict):
        raise WidgetRequestError(f"a widget request is a JSON object, got {type(event).__name__}")
    context = event.get("widgetContext")
    zone = context.get("timezone") if isinstance(context, dict) else None
    return WidgetRequest(
        describe="describe" in event,
        zone=_zone(zone) if isinstance(zone, dict) else WidgetZone.utc(),
    )


def _zone(zone: dict[str, Any]) -> WidgetZone:
    raw = zone.get("offsetISO", "+00:00")
    match = OFFSET_RE.match(raw) if isinstance(raw, str) else None
    if match is None:
        raise WidgetRequestError(
            f"widgetContext.timezone.offsetISO must look like +05:30, got {raw!r}"
        )
    sign, hours, minutes = match.groups()
    offset = timedelta(hours=int(hours), minutes=int(minutes))
    if int(minutes) >= 60 or offset > MAX_OFFSET:
        raise WidgetRequestError(f"widgetContext.timezone.offsetISO is out of range: {raw!r}")
    label = zone.get("label")
    return WidgetZone(
        label=label[:LABEL_LIMIT] if isinstance(label, str) and label.strip() else raw,
        offset=-offset if sign == "-" else offset,
    )
