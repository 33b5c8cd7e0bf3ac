"""When an approval expires: the instant, and the time zone its approvers read it in.

`request_approval` records it on the incident when it asks (`Incident.approval_deadline`): the
approval request plus the approval timeout, the same instant `decide` refuses a late decision
after. The card, the chat notice, `sdc status`, `sdc show` and the lifecycle event all read this
record, so they name one deadline.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DEFAULT_TIME_ZONE: Final = "UTC"
TIME_ZONE_RE: Final = re.compile(r"^(UTC|[A-Z][A-Za-z_]*(/[A-Za-z0-9][A-Za-z0-9_+\-]*){1,2})$")
"""An IANA time zone name as approvers know them: `UTC`, `Europe/Berlin`,
`America/Argentina/Buenos_Aires`. Whether the name exists is checked where the deployment is
synthesized (`zoneinfo`); a runtime without the zone shows the deadline in UTC only."""


def zone(name: str) -> ZoneInfo | None:
    """The time zone `name`, or None when this runtime does not know it."""
    if not TIME_ZONE_RE.match(name):
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class ApprovalDeadline:
    expires_at: str
    """The instant the approval expires, ISO 8601 in UTC (seconds)."""
    time_zone: str = DEFAULT_TIME_ZONE
    """The approvers' time zone (`sdc:approverTimeZone`) when the approval was requested."""

    @classmethod
    def after(cls, requested_at: str, timeout_seconds: int, time_zone: str) -> ApprovalDeadline:
        """The deadline of an approval requested at `requested_at` (ISO 8601)."""
        requested = datetime.fromisoformat(requested_at).astimezone(UTC)
        expires = requested + timedelta(seconds=timeout_seconds)
        return cls(expires.isoformat(timespec="seconds"), time_zone)

    @property
    def instant(self) -> datetime:
        return datetime.fromisoformat(self.expires_at).astimezone(UTC)

    def local(self) -> datetime | None:
        """The instant in the approvers' time zone; None when it is UTC or unknown here."""
        if self.time_zone == DEFAULT_TIME_ZONE:
            return None
        found = zone(self.time_zone)
        return self.instant.astimezone(found) if found else None

    def seconds_left(self, now: datetime) -> int:
        """Seconds until it expires (negative once past)."""
        return int((self.instant - now).total_seconds())

    def to_event(self) -> dict[str, Any]:
        """The lifecycle event's `approval_deadline`."""
        local = self.local()
        return {
            "expires_at": self.expires_at,
            "time_zone": self.time_zone,
            "expires_at_local": (local or self.instant).isoformat(timespec="seconds"),
        }
