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
shape and `sns_message` live in `sdc_remediation.lambdas.models.notices`; this module says what each notice
tells a chat channel.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from sdc_remediation.lambdas.models.guard import ClusterHold
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.notices import ChatNotification, NoticeKind
from sdc_remediation.lambdas.models.payloads import Decision
from sdc_remediation.lambdas.wording.card_lines import advice_summary, deadline_words

if TYPE_CHECKING:
    from sdc_remediation.lambdas.wording.cards import ApprovalCard

TELEMETRY_LINES: Final = 3
"""Lines of the card's hardware telemetry paragraph the chat version carries."""


def approval_request(incident: Incident, card: ApprovalCard) -> ChatNotification:
    """The approval card for chat: its five summary lines (what, where, the recommendation, the
    deadline, how), the advice's reasons, what the health check and the counters said; and the
    decision as it starts from chat.

    Where a decision needs no identity proof, each next step is the approval execution as a
    command the channel runs (`@Amazon Q stepfunctions start-execution ...`, with the channel's
    own permissions), and `additionalContext` carries what a custom action button needs
    (`approval_state_machine`, `approve_input`, `reject_input`, `reboot_input`), with custom
    actions enabled: docs/approve.md, "From chat". Where it needs one, chat cannot sign
    it: the next steps are the `sdc` commands, run from a shell."""
    paragraphs = [
        (None, card.summary.lines),
        ("WHY", card.recommendation.lines),
        (card.health_check.heading, card.health_check.lines),
        (card.telemetry.heading, card.telemetry.lines[:TELEMETRY_LINES]),
    ]
    body = [
        f"*{heading}*\n" + "\n".join(lines) if heading else "\n".join(lines)
        for heading, lines in paragraphs
    ]
    judged = incident.recommendation
    advice = judged.advice.value if judged else advice_summary(judged)
    arn = card.approval_state_machine_arn
    from_chat = bool(arn) and not card.needs_identity_proof
    steps = [f"Read the whole card: `sdc show {incident.incident_id}`"]
    inputs = {d: compact_input(i) for d, i in card.inputs.items()}
    if from_chat:
        steps += [
            f"{_DECISION_WORDS[d]}: `@Amazon Q stepfunctions start-execution "
            f"--state-machine-arn {arn} --input '{text}'`"
            for d, text in inputs.items()
        ]
    else:
        steps += [
            f"{_DECISION_WORDS[d]}: `sdc {d.value} {incident.incident_id} -m 'your reason'`"
            for d in card.inputs
        ]
    deadline = incident.approval_deadline
    return ChatNotification(
        kind=NoticeKind.APPROVAL_REQUEST,
        thread_id=incident.incident_id,
        title=card.subject,
        description="\n\n".join(body),
        next_steps=tuple(steps),
        keywords=("SDC", incident.cluster_name, incident.instance_id),
        summary=(
            f"Approval needed for {incident.instance_id} on {incident.cluster_name}: {advice}; "
            f"decide by {deadline_words(deadline)}"
        ),
        related=(incident.instance_id, incident.execution_arn or ""),
        context={
            "cluster": incident.cluster_name,
            "incident": incident.incident_id,
            "advice": advice,
            "expires_at": deadline.expires_at if deadline else "",
            "deadline": deadline_words(deadline),
            **(
                {
                    "approval_state_machine": str(arn),
                    **{f"{d.value}_input": text for d, text in inputs.items()},
                }
                if from_chat
                else {}
            ),
        },
        custom_actions=from_chat,
    )


def compact_input(approval_input: Mapping[str, str]) -> str:
    """An approval input as one word (no spaces), the comment saying it came from chat: a
    custom action passes it as one variable, and a button has no way to ask for a reason."""
    return json.dumps({**approval_input, "comment": CHAT_COMMENT}, separators=(",", ":"))


CHAT_COMMENT: Final = "decided-from-chat"
"""The comment of a decision a chat button starts (the decider is the channel's or the chat
user's role, as Step Functions records it)."""


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
