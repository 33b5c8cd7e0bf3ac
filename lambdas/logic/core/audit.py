"""The audit chain: append-only, hash-chained entries per incident, anchored outside the table.

Each entry holds the hash of the previous one (`prev_hash`; the first one holds GENESIS) and
its own `hash`: sha256 over the canonical JSON of every field but `hash`. Changing, removing or
reordering an entry breaks the chain at that entry; `verify_chain` names the first broken link.

A chain inside the table proves order, not authenticity: whoever may PutItem can rewrite an
entry and recompute every hash after it, drop the tail, or delete a subject. So every entry,
once stored, is also appended to the anchor (`AuditAnchor`: a log the writers may append to
but never change or delete from), and `verify_anchored` checks a chain against it: each entry
must be the one anchored for its seq, the chain must reach the last anchored seq, and a subject
the anchor knows must still have entries. A subject without entries never verifies, whoever
checks it (`empty_chain`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any

from sdc_remediation.lambdas.logic.ports import AuditAnchor, AuditLog, Clock, Deps, NoAuditAnchor
from sdc_remediation.lambdas.models.audit import AnchorRecord, AuditAction, AuditEntry
from sdc_remediation.lambdas.models.errors import ConditionFailed

GENESIS = "0" * 64
APPEND_ATTEMPTS = 5
CLOSING_ACTIONS = frozenset(
    {AuditAction.INCIDENT_CLOSED, AuditAction.INCIDENT_SKIPPED, AuditAction.INCIDENT_HELD}
)
"""The entries that close an incident's chain: a closed incident's chain must hold one."""


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
        action=str(action),
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


def empty_chain(anchored: Sequence[AnchorRecord] = ()) -> ChainVerdict:
    """The one rule for a subject without a single audit entry: it never verifies, whoever
    asks (`verify_chain`, `verify_incident`, `verify_anchored`, `sdc audit verify`, `sdc show`):
    nothing proves it was ever audited, and an incident that exists was audited when it was
    opened. The first entry is the one missing (seq 1); when the anchor holds entries of the
    subject, the subject was removed from the table."""
    if anchored:
        top = max(a.seq for a in anchored)
        return ChainVerdict(
            False, 0, 1, f"no audit entries, but the anchor holds {top}: the subject was removed"
        )
    return ChainVerdict(False, 0, 1, "no audit entries at all")


def verify_chain(entries: Sequence[AuditEntry]) -> ChainVerdict:
    """Check seq numbering (1, 2, ...), every prev_hash link and every hash; no entries at all
    do not verify (`empty_chain`)."""
    if not entries:
        return empty_chain()
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
    does not verify (`empty_chain`)."""
    return verify_chain(deps.audit.entries(incident_id))


def verify_anchored(
    entries: Sequence[AuditEntry],
    anchored: Sequence[AnchorRecord],
    *,
    closed: bool = False,
    now: datetime | None = None,
) -> ChainVerdict:
    """The chain (`verify_chain`), then against its anchor: every entry is the one anchored for
    its seq, no anchored seq lies beyond the chain's end, and a `closed` incident's chain holds
    a closing entry. Checked at `now` (the checker's own clock): an entry dated beyond it by
    more than `CLOCK_SKEW_SECONDS`, or whose date does not read, is broken; one written less
    than `ANCHOR_GRACE_SECONDS` before it may not be anchored yet and is not required to be (the
    anchor is written just after the entry). Without `now` every entry must be anchored."""
    if not entries:
        return empty_chain(anchored)
    chain = verify_chain(entries)
    if not chain.ok:
        return chain
    hashes: dict[int, set[str]] = {}
    for record in anchored:
        hashes.setdefault(record.seq, set()).add(record.hash)
    ordered = sorted(entries, key=lambda e: e.seq)
    for checked, entry in enumerate(ordered):
        dated = dated_at(entry.at) if now is not None else None
        if now is not None and (
            dated is None or dated > now + timedelta(seconds=CLOCK_SKEW_SECONDS)
        ):
            return ChainVerdict(
                False,
                checked,
                entry.seq,
                f"entry {entry.seq} is dated {entry.at!r}, ahead of the checker's clock "
                f"({now.isoformat()}) or unreadable: written around the pipeline",
            )
        found = hashes.get(entry.seq)
        if found is None:
            if (
                now is not None
                and dated is not None
                and dated >= now - timedelta(seconds=ANCHOR_GRACE_SECONDS)
            ):
                continue
            return ChainVerdict(
                False,
                checked,
                entry.seq,
                f"entry {entry.seq} is not in the anchor: written around the pipeline, or its "
                "anchoring failed",
            )
        if entry.hash not in found or len(found) > 1:
            return ChainVerdict(
                False,
                checked,
                entry.seq,
                f"entry {entry.seq} is not the one anchored: it was rewritten",
            )
    last = ordered[-1].seq
    beyond = sorted(seq for seq in hashes if seq > last)
    if beyond:
        return ChainVerdict(
            False,
            len(ordered),
            last + 1,
            f"the anchor holds entries up to {beyond[-1]}, the table ends at {last}: "
            "the tail was removed",
        )
    if closed and not any(e.action in CLOSING_ACTIONS for e in ordered):
        return ChainVerdict(
            False,
            len(ordered),
            last + 1,
            "the incident is closed but its chain holds no closing entry",
        )
    return ChainVerdict(True, len(ordered))


ANCHOR_GRACE_SECONDS = 300
"""Entries younger than this may not be anchored yet (the anchor is written just after the
entry, and read back eventually consistently): `verify` does not require them to be."""
CLOCK_SKEW_SECONDS = 60
"""How far ahead of the checker's clock an entry may be dated: the writers' clocks (Lambda's,
synchronised) differ by far less. An entry dated further ahead was not written by the pipeline,
and would otherwise pass for one too recent to be anchored yet."""


def dated_at(at: str) -> datetime | None:
    """An entry's `at` as an aware time; None when it does not read as one (never raised)."""
    try:
        dated = datetime.fromisoformat(at)
    except (TypeError, ValueError):
        return None
    return dated if dated.tzinfo is not None else dated.replace(tzinfo=UTC)


def verify_subjects(
    chains: Mapping[str, Sequence[AuditEntry]],
    anchored: Sequence[AnchorRecord] | None,
    *,
    closed: Iterable[str] = (),
    now: datetime | None = None,
) -> dict[str, ChainVerdict]:
    """Every subject of the table and of the anchor, checked: against the anchor when there is
    one (`anchored` None: the chains alone, which prove order only). A subject only the anchor
    knows was removed from the table; a `closed` one must hold its closing entry."""
    if anchored is None:
        return {subject: verify_chain(entries) for subject, entries in sorted(chains.items())}
    by_subject: dict[str, list[AnchorRecord]] = {}
    for record in anchored:
        by_subject.setdefault(record.subject, []).append(record)
    closed_ones = set(closed)
    return {
        subject: verify_anchored(
            chains.get(subject, []),
            by_subject.get(subject, []),
            closed=subject in closed_ones,
            now=now,
        )
        for subject in sorted(set(chains) | set(by_subject))
    }


class Auditor:
    """Appends entries to one log; a lost race for a seq re-reads the tail and tries again."""

    def __init__(self, log: AuditLog, clock: Clock, anchor: AuditAnchor | None = None) -> None:
        self._log = log
        self._clock = clock
        self._anchor = anchor or NoAuditAnchor()
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
            # After the entry is stored, never before: only a stored entry is anchored, so a
            # lost race for the seq cannot leave two anchored hashes for one seq. A failure
            # here is raised: the entry stands, unanchored, and `verify` says so.
            self._anchor.anchor(entry)
            return entry
