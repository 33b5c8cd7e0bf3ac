"""One audit log entry. The hash chain itself lives in `lambdas.logic.core.audit`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class AuditEntry:
    incident_id: str
    seq: int
    at: str
    actor: str
    action: str
    details: dict[str, Any]
    request_ids: list[str] = field(default_factory=list)
    prev_hash: str = ""
    hash: str = ""

    def body(self) -> dict[str, Any]:
        """Every field but `hash`: what the hash is computed over."""
        return {
            "incident_id": self.incident_id,
            "seq": self.seq,
            "at": self.at,
            "actor": self.actor,
            "action": self.action,
            "details": self.details,
            "request_ids": list(self.request_ids),
            "prev_hash": self.prev_hash,
        }

    def to_record(self) -> dict[str, Any]:
        return {**self.body(), "hash": self.hash}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> AuditEntry:
        return cls(
            incident_id=str(record["incident_id"]),
            seq=int(record["seq"]),
            at=str(record["at"]),
            actor=str(record["actor"]),
            action=str(record["action"]),
            details=dict(record.get("details") or {}),
            request_ids=[str(r) for r in record.get("request_ids") or []],
            prev_hash=str(record.get("prev_hash", "")),
            hash=str(record.get("hash", "")),
        )


@dataclass(frozen=True, slots=True)
class AnchorRecord:
    """What the anchor holds of one entry: enough to tell that the entry is still the one that
    was written, and that no entry after it was dropped."""

    subject: str
    seq: int
    hash: str
    action: str

    def to_record(self) -> dict[str, Any]:
        return {"subject": self.subject, "seq": self.seq, "hash": self.hash, "action": self.action}

    @classmethod
    def of(cls, entry: AuditEntry) -> AnchorRecord:
        return cls(entry.incident_id, entry.seq, entry.hash, entry.action)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> AnchorRecord:
        return cls(
            subject=str(record["subject"]),
            seq=int(record["seq"]),
            hash=str(record["hash"]),
            action=str(record["action"]),
        )
