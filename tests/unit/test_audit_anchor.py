"""The audit chain checked against its anchor: an insider who may PutItem on the audit table
rewrites an entry and recomputes the chain, drops the tail, or removes a subject; each is
detected, naming the first bad entry."""

from __future__ import annotations

from datetime import timedelta

import pytest

from sdc_remediation.lambdas.logic import approval
from sdc_remediation.lambdas.logic.core import ids
from sdc_remediation.lambdas.logic.core.audit import (
    ANCHOR_GRACE_SECONDS,
    CLOCK_SKEW_SECONDS,
    GENESIS,
    seal,
    verify_anchored,
    verify_chain,
)
from sdc_remediation.lambdas.logic.core.audit_check import check_audit
from sdc_remediation.lambdas.models.audit import AuditEntry
from sdc_remediation.lambdas.models.errors import DecisionRefused, ServiceUnavailable
from sdc_remediation.lambdas.models.payloads import DecisionRequest
from tests.unit.world import World


def chain_of(world: World, subject: str) -> list[AuditEntry]:
    return world.audit.entries(subject)


def store(world: World, subject: str, entries: list[AuditEntry]) -> None:
    """What an insider with PutItem and DeleteItem-free rewrites can leave: the subject's items
    replaced (PutItem overwrites an item when no condition is given)."""
    world.audit.items[subject] = {e.seq: e for e in entries}


def resealed(entries: list[AuditEntry], seq: int, **changes) -> list[AuditEntry]:
    """The chain with entry `seq` changed and every hash from it on recomputed."""
    out: list[AuditEntry] = []
    prev = GENESIS
    for entry in entries:
        body = entry.body()
        if entry.seq == seq:
            body.update(changes)
        if entry.seq >= seq:
            body["prev_hash"] = prev
            entry = seal(**{k: v for k, v in body.items()})
        out.append(entry)
        prev = entry.hash
    return out


def test_every_entry_a_step_writes_is_anchored(world):
    incident_id = world.awaiting_approval()

    entries = chain_of(world, incident_id)
    assert [(r.seq, r.hash) for r in world.anchor.records(incident_id)] == [
        (e.seq, e.hash) for e in entries
    ]


def test_an_untouched_chain_verifies_against_its_anchor(world):
    incident_id = world.decided()

    verdict = verify_anchored(chain_of(world, incident_id), world.anchor.records(incident_id))

    assert verdict.ok, verdict


def test_a_rewritten_entry_with_a_recomputed_chain_is_detected_at_that_entry(world):
    incident_id = world.decided()
    entries = chain_of(world, incident_id)
    accepted = next(e for e in entries if e.action == "decision_accepted")
    forged = resealed(entries, accepted.seq, actor="approver:arn:aws:iam::1:user/mallory")
    store(world, incident_id, forged)
    assert verify_chain(forged).ok  # the chain alone cannot tell

    verdict = verify_anchored(forged, world.anchor.records(incident_id))

    assert (verdict.ok, verdict.broken_seq) == (False, accepted.seq)
    assert "rewritten" in verdict.reason


def test_a_rewrite_whose_new_hash_was_also_anchored_is_still_detected(world):
    incident_id = world.decided()
    entries = chain_of(world, incident_id)
    forged = resealed(entries, 6, actor="approver:someone-else")
    for entry in forged[5:]:
        world.anchor.anchor(entry)  # the insider may append to the anchor, never remove

    verdict = verify_anchored(forged, world.anchor.records(incident_id))

    assert (verdict.ok, verdict.broken_seq) == (False, 6)


def test_a_truncated_tail_is_detected_after_the_last_remaining_entry(world):
    incident_id = world.decided()
    entries = chain_of(world, incident_id)
    kept = entries[:-2]
    store(world, incident_id, kept)
    assert verify_chain(kept).ok

    verdict = verify_anchored(kept, world.anchor.records(incident_id))

    assert (verdict.ok, verdict.broken_seq) == (False, len(kept) + 1)
    assert "tail was removed" in verdict.reason


def test_a_vanished_subject_is_detected(world):
    with pytest.raises(DecisionRefused):
        approval.decide(DecisionRequest("sdc-nope", "approve", "x", "x"), world.deps)
    subject = ids.decision_subject("x")
    world.audit.items.pop(subject)

    verdict = verify_anchored(chain_of(world, subject), world.anchor.records(subject))

    assert (verdict.ok, verdict.broken_seq) == (False, 1)
    assert "subject was removed" in verdict.reason


def test_an_entry_written_around_the_pipeline_is_not_anchored_and_detected(world):
    incident_id = world.awaiting_approval()
    entries = chain_of(world, incident_id)
    extra = seal(
        incident_id=incident_id,
        seq=len(entries) + 1,
        at="2026-11-30T09:00:00+00:00",
        actor="approver:mallory",
        action="decision_accepted",
        details={},
        request_ids=[],
        prev_hash=entries[-1].hash,
    )
    world.audit.append(extra)

    verdict = verify_anchored(chain_of(world, incident_id), world.anchor.records(incident_id))

    assert (verdict.ok, verdict.broken_seq) == (False, extra.seq)
    assert "not in the anchor" in verdict.reason


def test_an_entry_too_recent_to_be_anchored_yet_is_not_held_against_the_chain(world):
    incident_id = world.awaiting_approval()
    world.anchor.fail_next = ServiceUnavailable("PutLogEvents failed")
    with pytest.raises(ServiceUnavailable):
        approval.decide(world.decision(incident_id), world.deps)
    entries = chain_of(world, incident_id)

    verdict = verify_anchored(entries, world.anchor.records(incident_id), now=world.clock.now())

    assert verdict.ok, verdict


def forged_after(world: World, incident_id: str, at: str) -> AuditEntry:
    """A correctly chained `decision_accepted` entry written straight to the table."""
    entries = chain_of(world, incident_id)
    extra = seal(
        incident_id=incident_id,
        seq=len(entries) + 1,
        at=at,
        actor="approver:mallory",
        action="decision_accepted",
        details={},
        request_ids=[],
        prev_hash=entries[-1].hash,
    )
    world.audit.append(extra)
    return extra


@pytest.mark.parametrize("at", ["9999-12-31T23:59:59+00:00", "9999-12-31", "not a date"])
def test_the_scheduled_check_flags_an_entry_dated_ahead_of_its_clock(world, at):
    incident_id = world.awaiting_approval()
    extra = forged_after(world, incident_id, at)

    result = check_audit(world.deps)

    assert [(b["subject"], b["broken_seq"]) for b in result["broken"]] == [(incident_id, extra.seq)]
    assert "ahead of the checker's clock" in result["broken"][0]["reason"]


def test_an_entry_dated_a_few_seconds_ahead_is_within_the_skew(world):
    incident_id = world.awaiting_approval()
    world.anchor.fail_next = ServiceUnavailable("PutLogEvents failed")
    with pytest.raises(ServiceUnavailable):
        approval.decide(world.decision(incident_id), world.deps)
    now = world.clock.now() - timedelta(seconds=CLOCK_SKEW_SECONDS - 5)

    verdict = verify_anchored(
        chain_of(world, incident_id), world.anchor.records(incident_id), now=now
    )

    assert verdict.ok, verdict


def test_an_unanchored_entry_older_than_the_anchoring_delay_is_flagged(world):
    incident_id = world.awaiting_approval()
    extra = forged_after(world, incident_id, world.clock.now().isoformat())
    world.clock.current += timedelta(seconds=ANCHOR_GRACE_SECONDS + 1)

    result = check_audit(world.deps)

    assert [b["broken_seq"] for b in result["broken"]] == [extra.seq]
    assert "not in the anchor" in result["broken"][0]["reason"]


def test_a_closed_incident_whose_closing_entries_were_cut_is_detected(world):
    incident_id = world.awaiting_approval()
    entries = chain_of(world, incident_id)

    verdict = verify_anchored(entries, world.anchor.records(incident_id), closed=True)

    assert not verdict.ok
    assert "no closing entry" in verdict.reason


def test_the_scheduled_check_counts_no_broken_chain_when_all_verify(world):
    world.decided()

    result = check_audit(world.deps)

    assert (result["anchored"], result["broken"]) == (True, [])
    assert result["checked"] >= 1


def test_the_scheduled_check_names_every_broken_chain(world):
    incident_id = world.decided()
    store(world, incident_id, chain_of(world, incident_id)[:-2])

    result = check_audit(world.deps)

    assert [(b["subject"], b["broken_seq"]) for b in result["broken"]] == [
        (incident_id, len(chain_of(world, incident_id)) + 1)
    ]
