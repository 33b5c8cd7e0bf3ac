"""The audit chain: append-only, hash-chained entries per incident.

Each entry holds the hash of the previous one (`prev_hash`; the first one holds GENESIS) and
its own `hash`: sha256 over the canonical JSON of every field but `hash`. Changing, removing or
reordering an entry breaks the chain at that entry; `verify_chain` names the first broken link.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from lambdas.logic.ports import AuditLog, Clock, Deps
from lambdas.models.audit import AuditEntry
from lambdas.models.errors import ConditionFailed

GENESIS = "0" * 64
APPEND_ATTEMPTS = 5


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept: the same value always gives the same text."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_plain
    )


def plain(value: Any) -> Any:
    """`value` as plain JSON types (what a stored entry reads back as)."""
    return json.loads(canonical_json(value))


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"not JSON-serializable for the audit log: {type(value).__name__}")


def entry_hash(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


def seal(
    *,
    incident_id: str,
    seq: int,
    at: str,
    actor: str,
    action: str,
    details: Mapping[str, Any],
    request_ids: Iterable[str | None],
    prev_hash: str,
) -> AuditEntry:
    unsealed = AuditEntry(
        incident_id=incident_id,
        seq=seq,
        at=at,
        actor=actor,
        action=action,
        details=plain(dict(details)),
        request_ids=[r for r in request_ids if r],
        prev_hash=prev_hash,
    )
    return AuditEntry(**{**unsealed.body(), "hash": entry_hash(unsealed.body())})


@dataclass(frozen=True, slots=True)
class ChainVerdict:
    ok: bool
    checked: int
    broken_seq: int | None = None
    reason: str | None = None


def verify_chain(entries: Sequence[AuditEntry]) -> ChainVerdict:
    """Check seq numbering (1, 2, ...), every prev_hash link and every hash."""
    prev_hash = GENESIS
    for expected_seq, entry in enumerate(sorted(entries, key=lambda e: e.seq), start=1):
        if entry.seq != expected_seq:
            return ChainVerdict(
                False, expected_seq - 1, expected_seq, f"entry {expected_seq} is missing"
            )
        if entry.prev_hash != prev_hash:
            return ChainVerdict(
                False, expected_seq - 1, entry.seq, "prev_hash does not match the previous entry"
            )
        if entry_hash(entry.body()) != entry.hash:
            return ChainVerdict(
                False, expected_seq - 1, entry.seq, "hash does not match the entry's content"
            )
        prev_hash = entry.hash
    return ChainVerdict(True, len(entries))


def verify_incident(incident_id: str, deps: Deps) -> ChainVerdict:
    """Walk the audit chain of one incident (or storm hold, or `event#…` subject) and name the
    first broken link: the entry point for a `verify` command. A subject with no entries at all
    does not verify (nothing proves it was ever audited)."""
    entries = deps.audit.entries(incident_id)
    if not entries:
        return ChainVerdict(False, 0, None, f"no audit entries for {incident_id}")
    return verify_chain(entries)


class Auditor:
    """Appends entries to one log; a lost race for a seq re-reads the tail and tries again."""

    def __init__(self, log: AuditLog, clock: Clock) -> None:
        self._log = log
        self._clock = clock
        self._tails: dict[str, AuditEntry] = {}
        """The last entry this auditor appended per subject: the next one links to it without
        reading the log again (a lost race re-reads)."""

    def record(
        self,
        subject: str,
        action: str,
        *,
        actor: str,
        details: Mapping[str, Any] | None = None,
        request_ids: Iterable[str | None] = (),
    ) -> AuditEntry:
        request_ids = list(request_ids)
        attempt = 0
        while True:
            attempt += 1
            last = self._tails.get(subject) if attempt == 1 else None
            last = last or self._log.last(subject)
            entry = seal(
                incident_id=subject,
                seq=(last.seq + 1) if last else 1,
                at=self._clock.now().isoformat(),
                actor=actor,
                action=action,
                details=details or {},
                request_ids=request_ids,
                prev_hash=last.hash if last else GENESIS,
            )
            try:
                self._log.append(entry)
            except ConditionFailed:
                self._tails.pop(subject, None)
                if attempt >= APPEND_ATTEMPTS:
                    raise
                continue
            self._tails[subject] = entry
            return entry
