"""The chat contract: every notice kind goes out with a custom notification for `https`
subscribers (Amazon Q Developer in chat applications) that matches the documented shape
(tests/events/chat_custom_notification.schema.json), threaded by its incident, while the text
e-mail gets stays the card."""

from __future__ import annotations

import json

import jsonschema
import pytest

from sdc_remediation.lambdas.logic import approval, closing, intake
from sdc_remediation.lambdas.models.audit import AuditAction
from sdc_remediation.lambdas.models.events import parse_contributor_event
from sdc_remediation.lambdas.models.notices import DESCRIPTION_LIMIT, ChatNotification, NoticeKind
from sdc_remediation.lambdas.models.payloads import CloseRequest, Outcome
from sdc_remediation.lambdas.wording import cards
from tests.conftest import load_fixture
from tests.unit.test_decision_trust import two_person
from tests.unit.test_guard import fault_on, instance, nodes
from tests.unit.world import ALICE, APPROVAL_ARN, CLUSTER, World, alarm_event, settings

SCHEMA = load_fixture("events", "chat_custom_notification.schema")


def valid(document) -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.Draft202012Validator(SCHEMA).validate(document)


def notice_of(world: World, kind: NoticeKind):
    found = [p for p in world.notifier.published if p.attributes.get("kind") == kind]
    assert found, f"no {kind} notice in {[p.attributes for p in world.notifier.published]}"
    return found[-1]


def storm(world: World) -> str:
    nodes(world, 8)
    for n in range(4):
        fault_on(world, instance(n))
    hold = world.store.active_hold(CLUSTER)
    assert hold is not None
    return hold.hold_id


def test_the_approval_request_for_chat_matches_the_documented_shape_and_threads_by_incident():
    world = World()
    incident_id = world.awaiting_approval()

    notice = notice_of(world, NoticeKind.APPROVAL_REQUEST)

    valid(notice.chat)
    assert notice.chat["metadata"]["threadId"] == incident_id
    assert notice.chat["metadata"]["eventType"] == "sdc-approval-request"
    assert notice.chat["content"]["title"] == notice.subject


def test_without_an_identity_proof_rule_the_decision_starts_from_chat():
    world = World()
    incident_id = world.awaiting_approval()

    chat = notice_of(world, NoticeKind.APPROVAL_REQUEST).chat

    steps = "\n".join(chat["content"]["nextSteps"])
    approve = (
        f'{{"incident_id":"{incident_id}","decision":"approve","comment":"decided-from-chat"}}'
    )
    assert (
        f"`@Amazon Q stepfunctions start-execution --state-machine-arn {APPROVAL_ARN} "
        f"--input '{approve}'`"
    ) in steps
    assert chat["metadata"]["enableCustomActions"] is True
    context = chat["metadata"]["additionalContext"]
    assert context["approval_state_machine"] == APPROVAL_ARN
    assert json.loads(context["approve_input"])["decision"] == "approve"
    assert json.loads(context["reject_input"])["decision"] == "reject"
    assert " " not in context["approve_input"]  # one word: a custom action's variable


def test_when_decisions_must_be_signed_chat_offers_the_sdc_commands_and_no_buttons():
    world = World(settings=settings(require_identity_proof=True))
    incident_id = world.awaiting_approval()

    chat = notice_of(world, NoticeKind.APPROVAL_REQUEST).chat

    steps = "\n".join(chat["content"]["nextSteps"])
    assert f"`sdc approve {incident_id} -m 'your reason'`" in steps
    assert f"`sdc reject {incident_id} -m 'your reason'`" in steps
    assert "start-execution" not in steps
    assert "enableCustomActions" not in chat["metadata"]
    assert "approve_input" not in chat["metadata"]["additionalContext"]


def test_the_chat_notice_leads_with_the_cards_five_lines_and_carries_the_deadline():
    world = World(settings=settings(approval_timeout_seconds=3600, approver_time_zone="Asia/Tokyo"))
    incident_id = world.awaiting_approval()
    incident = world.incident(incident_id)
    card = cards.approval_card(incident, world.settings)

    chat = notice_of(world, NoticeKind.APPROVAL_REQUEST).chat

    lead = chat["content"]["description"].split("\n")[: cards.SUMMARY_LINES]
    assert lead[:4] == list(card.summary.lines[:4])  # the HOW line's <why> is escaped
    assert lead[4].startswith("HOW: sdc ")
    assert incident.approval_deadline is not None
    assert chat["metadata"]["additionalContext"]["expires_at"] == (
        incident.approval_deadline.expires_at
    )
    assert "JST (Asia/Tokyo)" in chat["metadata"]["summary"]


def test_the_approval_requests_email_text_is_the_card_unchanged():
    world = World()
    incident_id = world.awaiting_approval()
    incident = world.incident(incident_id)
    notice = notice_of(world, NoticeKind.APPROVAL_REQUEST)

    assert notice.message == cards.approval_card(incident, world.settings).text


def test_the_held_notice_for_chat_matches_the_documented_shape():
    world = World()
    world.switch.value = "true"
    intake.open_incident(parse_contributor_event(alarm_event()), world.deps)

    notice = notice_of(world, NoticeKind.HELD)

    valid(notice.chat)
    assert notice.chat["metadata"]["eventType"] == "sdc-held"
    assert notice.chat["content"]["description"] == notice.message  # short enough to carry whole


def test_the_close_notice_for_chat_matches_the_documented_shape_in_the_incidents_thread():
    world = World()
    incident_id = world.awaiting_approval()
    closing.close_incident(CloseRequest(incident_id, Outcome.EXPIRED, None), world.deps)

    notice = notice_of(world, NoticeKind.CLOSED)

    valid(notice.chat)
    assert notice.chat["metadata"]["threadId"] == incident_id
    assert (
        notice.chat["metadata"]["threadId"]
        == (notice_of(world, NoticeKind.APPROVAL_REQUEST).chat["metadata"]["threadId"])
    )


def test_the_storm_notice_for_chat_matches_the_documented_shape_and_says_how_to_reset():
    world = World()
    hold_id = storm(world)

    notice = notice_of(world, NoticeKind.STORM_HOLD)

    valid(notice.chat)
    assert notice.chat["metadata"]["threadId"] == hold_id
    assert notice.chat["content"]["nextSteps"] == [
        f"When the cause is fixed: `sdc reset {hold_id} -m 'your reason'`"
    ]


def test_the_storm_reset_notice_for_chat_matches_the_documented_shape_in_the_holds_thread():
    world = World()
    hold_id = storm(world)
    approval.decide(world.decision(hold_id, "reset", "recipe fixed"), world.deps)

    notice = notice_of(world, NoticeKind.STORM_HOLD_RESET)

    valid(notice.chat)
    assert notice.chat["metadata"]["threadId"] == hold_id
    assert notice.chat["metadata"]["eventType"] == "sdc-storm-hold-reset"


def test_an_approval_counted_of_two_goes_to_chat_in_the_incident_thread(world):
    incident_id = world.awaiting_approval()
    two_person(world)

    approval.decide(world.decision(incident_id, principal=ALICE), world.deps)

    notice = notice_of(world, NoticeKind.APPROVAL_COUNTED)
    valid(notice.chat)
    assert notice.chat["metadata"]["threadId"] == incident_id
    assert notice.chat["metadata"]["eventType"] == "sdc-approval-counted"
    assert "1 of 2" in notice.chat["content"]["title"]


def test_an_approval_counted_that_cannot_be_published_is_audited_and_the_approval_stands(world):
    incident_id = world.awaiting_approval()
    two_person(world)
    world.notifier.outage = RuntimeError("SNS is down")

    result = approval.decide(world.decision(incident_id, principal=ALICE), world.deps)

    assert result["approvals"] == "1 of 2"
    failed = [
        e for e in world.audit.entries(incident_id) if e.action == AuditAction.NOTIFICATION_FAILED
    ]
    assert [e.details["kind"] for e in failed] == [NoticeKind.APPROVAL_COUNTED]
    assert len(world.incident(incident_id).approvals) == 1


def test_every_notice_kind_is_one_a_test_above_drives():
    driven = {
        NoticeKind.APPROVAL_REQUEST,
        NoticeKind.APPROVAL_COUNTED,
        NoticeKind.HELD,
        NoticeKind.CLOSED,
        NoticeKind.STORM_HOLD,
        NoticeKind.STORM_HOLD_RESET,
    }
    assert driven == set(NoticeKind)


def test_text_from_a_report_cannot_become_a_mention_or_a_link_in_chat():
    chat = ChatNotification(NoticeKind.CLOSED, "sdc-1", "t", "job <!channel> & <https://x|y>")

    document = chat.to_json()

    assert document["content"]["description"] == "job &lt;!channel&gt; &amp; &lt;https://x|y&gt;"


def test_a_long_description_is_clipped_to_the_limit_and_still_valid():
    chat = ChatNotification(NoticeKind.CLOSED, "sdc-1", "title", "x" * (DESCRIPTION_LIMIT * 2))

    document = chat.to_json()

    valid(document)
    assert len(document["content"]["description"]) == DESCRIPTION_LIMIT


@pytest.mark.parametrize(
    "broken",
    [
        {"version": "2.0"},
        {"source": "aws.cloudwatch"},
        {"content": {"title": "no description"}},
        {"metadata": {"threadId": ""}},
    ],
)
def test_the_schema_refuses_what_the_documented_shape_does_not_allow(broken):
    document = ChatNotification(NoticeKind.CLOSED, "sdc-1", "t", "d").to_json()
    document.update(broken)

    with pytest.raises(jsonschema.ValidationError):
        valid(document)
