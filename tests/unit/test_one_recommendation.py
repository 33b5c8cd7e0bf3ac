"""The evidence is judged once and worded from the record: the approval card, its chat
rendering and the lifecycle event say what the incident's stored recommendation says (for an
incident with history too), and later evidence judges it again, audited. (`sdc show` and
`sdc status` word the same record: tests/integration/test_cli.py; every drill scenario:
tests/e2e/test_drill.py.)"""

from __future__ import annotations

from sdc_remediation.lambdas.logic import intake
from sdc_remediation.lambdas.logic.evidence.recommendation import recommend
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.notices import NoticeKind
from sdc_remediation.lambdas.models.recommendation import Advice
from sdc_remediation.lambdas.models.report import parse_report_event
from sdc_remediation.lambdas.wording import cards
from tests.unit.reports import report_event
from tests.unit.test_history import card_for, cluster_of_rank_map, incident_from, rejected
from tests.unit.world import World


def surfaces(world: World, incident_id: str) -> dict[str, object]:
    """What each reader says the recommendation is."""
    incident = world.incident(incident_id)
    (request,) = [
        p
        for p in world.notifier.published
        if p.attributes.get("kind") == NoticeKind.APPROVAL_REQUEST
        and p.attributes.get("incident_id") == incident_id
    ][-1:]
    heading = next(
        line for line in request.message.splitlines() if line.startswith("RECOMMENDATION: ")
    )
    (event,) = [
        c
        for c in world.lifecycle.changes
        if c.incident_id == incident_id and c.new_state == "awaiting_approval"
    ][-1:]
    assert request.chat is not None
    return {
        "card": heading.removeprefix("RECOMMENDATION: ").lower(),
        "chat": request.chat["metadata"]["additionalContext"]["advice"],
        "event": event.recommendation["advice"] if event.recommendation else None,
        "rebuilt card": cards.approval_card(incident, world.settings).recommendation.heading,
    }


def test_every_surface_says_the_stored_recommendation_of_an_incident_with_history(world):
    cluster_of_rank_map(world)
    first = incident_from(world, "nonfinite_transient", 0)
    rejected(world, first)
    second = incident_from(world, "nonfinite_transient", 30)

    card_for(world, second)

    stored = world.incident(second).recommendation
    assert stored is not None and stored.advice is Advice.REPLACE
    assert stored.history == (first,)
    assert [p.incident_id for p in stored.past] == [first]
    assert surfaces(world, second) == {
        "card": stored.advice.value,
        "chat": stored.advice.value,
        "event": stored.advice.value,
        "rebuilt card": f"RECOMMENDATION: {stored.advice.value.upper()}",
    }


def test_the_stored_recommendation_is_not_what_the_evidence_alone_would_say(world):
    """Without the history a transient fault is a reboot: a reader that judged again, without
    it, would advise otherwise."""
    cluster_of_rank_map(world)
    rejected(world, incident_from(world, "nonfinite_transient", 0))
    second = incident_from(world, "nonfinite_transient", 30)
    card_for(world, second)
    incident = world.incident(second)

    alone = recommend(
        incident.reports, incident.health_check.result if incident.health_check else None
    )

    assert alone.advice is Advice.REBOOT
    assert incident.recommendation is not None
    assert incident.recommendation.advice is Advice.REPLACE


def test_the_judgement_is_audited_with_what_it_was_judged_on(world):
    cluster_of_rank_map(world)
    incident_id = incident_from(world, "nonfinite_transient", 0)

    card_for(world, incident_id)

    (entry,) = [e for e in world.audit.entries(incident_id) if e.action == AuditAction.RECOMMENDED]
    stored = world.incident(incident_id).recommendation
    assert stored is not None
    assert entry.details["advice"] == stored.advice.value
    assert entry.details["reasons"] == list(stored.reasons)
    assert entry.details["cause"] == AuditAction.APPROVAL_REQUESTED


def test_a_later_report_judges_the_incident_again_and_audits_the_change(world):
    cluster_of_rank_map(world)
    incident_id = incident_from(world, "nonfinite_transient", 0)
    card_for(world, incident_id)
    assert world.incident(incident_id).recommendation.advice is Advice.REBOOT

    again = report_event("nonfinite_transient", report_id="r-nonfinit-00000099")
    world.clock.current = world.clock.current.replace(minute=world.clock.current.minute + 1)
    intake.store_report(parse_report_event(again), world.deps)

    judged = world.incident(incident_id).recommendation
    assert judged is not None and judged.advice is Advice.REPLACE  # the transient recurred
    causes = [
        e.details["cause"]
        for e in world.audit.entries(incident_id)
        if e.action == AuditAction.RECOMMENDED
    ]
    assert causes == [AuditAction.APPROVAL_REQUESTED, AuditAction.EVIDENCE_ATTACHED]


def test_an_incident_never_judged_says_so_rather_than_judging(world):
    incident_id = world.health_checked()

    card = cards.approval_card(world.incident(incident_id), world.settings)

    assert card.recommendation.heading == "RECOMMENDATION: NOT JUDGED YET"
