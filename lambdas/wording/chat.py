"""Notices for chat: each notice as Amazon Q Developer in chat applications (formerly AWS
Chatbot) renders a custom notification in Slack, Microsoft Teams or Amazon Chime.

Every notice is published once with a message per protocol (`MessageStructure=json`): e-mail
(and any other subscriber, `default`) gets the plain-text card, unchanged; `https` subscribers,
which is how Amazon Q Developer in chat applications subscribes to a topic, get this JSON:

    {"version": "1.0", "source": "custom",
     "content": {"textType": "client-markdown", "title": ..., "description": ...,
                 "nextSteps": [...], "keywords": [...]},
     "metadata": {"threadId": <incident or hold id>, "summary": ..., "eventType": ...,
                  "relatedResources": [...], "additionalContext": {...}}}

`metadata.threadId` is the incident's id (a storm hold's id for its notices), so every notice of
one incident lands in one chat thread. `eventType` names the notice kind (`NoticeKind`). The
shape and `sns_message` live in `lambdas.models.notices`; this module says what each notice
tells a chat channel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lambdas.models.guard import ClusterHold
from lambdas.models.incident import Incident
from lambdas.models.notices import ChatNotification, NoticeKind
from lambdas.models.payloads import Decision
from lambdas.wording.card_lines import advice_summary

if TYPE_CHECKING:
    from lambdas.wording.cards import ApprovalCard

TELEMETRY_LINES: Final = 3
"""Lines of the card's hardware telemetry paragraph the chat version carries."""


def approval_request(incident: Incident, card: ApprovalCard) -> ChatNotification:
    """The approval card for chat: what is suspected, the advice and why, what the health check
    and the counters said, and the command of each decision the card offers."""
    paragraphs = [
        (s.heading, s.lines) for s in (card.opening, card.recommendation, card.health_check)
    ] + [(card.telemetry.heading, card.telemetry.lines[:TELEMETRY_LINES])]
    body = [
        f"*{heading}*\n" + "\n".join(lines) if heading else "\n".join(lines)
        for heading, lines in paragraphs
    ]
    judged = incident.recommendation
    advice = judged.advice.value if judged else advice_summary(judged)
    steps = [f"Read the whole card: `sdc show {incident.incident_id}`"]
    steps += [
        f"{_DECISION_WORDS[d]}: `sdc {d.value} {incident.incident_id} -m 'your reason'`"
        for d in card.inputs
    ]
    return ChatNotification(
        kind=NoticeKind.APPROVAL_REQUEST,
        thread_id=incident.incident_id,
        title=card.subject,
        description="\n\n".join(body),
        next_steps=tuple(steps),
        keywords=("SDC", incident.cluster_name, incident.instance_id),
        summary=f"Approval needed for {incident.instance_id} on {incident.cluster_name}: {advice}",
        related=(incident.instance_id, incident.execution_arn or ""),
        context={
            "cluster": incident.cluster_name,
            "incident": incident.incident_id,
            "advice": advice,
        },
    )


_DECISION_WORDS: Final = {
    Decision.REBOOT: "Reboot the node",
    Decision.APPROVE: "Approve replacing it",
    Decision.REJECT: "Reject (nothing is replaced)",
    Decision.RESET: "Reset the hold",
}


def incident_notice(
    kind: NoticeKind, incident: Incident, subject: str, text: str
) -> ChatNotification:
    """A notice about one incident (held, closed): its text, and where to read the rest."""
    return ChatNotification(
        kind=kind,
        thread_id=incident.incident_id,
        title=subject,
        description=text,
        next_steps=(f"Its record and audit trail: `sdc show {incident.incident_id}`",),
        keywords=("SDC", incident.state.value, incident.cluster_name),
        summary=subject,
        related=(incident.instance_id, *incident.instance_ids),
        context={"cluster": incident.cluster_name, "state": incident.state.value},
    )


def hold_notice(kind: NoticeKind, hold: ClusterHold, subject: str, text: str) -> ChatNotification:
    """A storm hold's notice (held, reset); while held, how to reset it."""
    steps = (
        (f"When the cause is fixed: `sdc reset {hold.hold_id} -m 'your reason'`",)
        if kind is NoticeKind.STORM_HOLD
        else ()
    )
    return ChatNotification(
        kind=kind,
        thread_id=hold.hold_id,
        title=subject,
        description=text,
        next_steps=steps,
        keywords=("SDC", "storm", hold.cluster_name),
        summary=subject,
        related=tuple(hold.instances),
        context={"cluster": hold.cluster_name},
    )
