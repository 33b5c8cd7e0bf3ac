"""The approval card cannot fail silently: retried with backoff, then marked undelivered on the
incident and counted (the metric has an alarm); sent again once the topic is back."""

from __future__ import annotations

from sdc_remediation.lambdas.logic import approval
from sdc_remediation.lambdas.logic.core.steps import Step
from sdc_remediation.lambdas.metric_names import PipelineMetric
from sdc_remediation.lambdas.models.errors import ServiceUnavailable
from sdc_remediation.lambdas.observability import metrics
from tests.unit.world import World


def undelivered_metric() -> list[float]:
    return list(
        metrics.provider.metric_set.get(PipelineMetric.CARDS_UNDELIVERED, {}).get("Value", [])
    )


def test_a_card_that_cannot_go_out_marks_the_incident_and_counts_it():
    world = World()
    world.notifier.outage = ServiceUnavailable("Publish failed: could not connect")

    incident_id = world.awaiting_approval()

    incident = world.incident(incident_id)
    assert incident.card_undelivered is not None
    assert world.store.task_token(incident_id)  # the approval still waits: the console input works
    assert undelivered_metric() == [1.0]
    requested = [e for e in world.audit.entries(incident_id) if e.action == "approval_requested"]
    assert requested[-1].details["notified"] is False
    failed = [e for e in world.audit.entries(incident_id) if e.action == "notification_failed"]
    assert failed[-1].details["kind"] == "approval_request"


def test_an_undelivered_card_is_sent_once_the_topic_is_back_and_the_mark_is_cleared():
    world = World()
    world.notifier.outage = ServiceUnavailable("Publish failed: could not connect")
    incident_id = world.awaiting_approval()
    world.notifier.outage = None

    sent = approval.resend_card(Step(world.deps, "reconcile"), world.incident(incident_id))

    assert sent is True
    assert world.incident(incident_id).card_undelivered is None
    (card,) = world.notifier.published
    assert card.attributes["kind"] == "approval_request"
    assert world.audit.actions(incident_id)[-1] == "card_delivered"


def test_a_card_delivered_first_time_leaves_no_mark():
    world = World()

    incident_id = world.awaiting_approval()

    assert world.incident(incident_id).card_undelivered is None
    assert undelivered_metric() == []
