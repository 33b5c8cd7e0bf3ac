"""A notice as it goes out: its kind, and its custom notification for chat (the shape Amazon Q
Developer in chat applications renders; built by `sdc_remediation.lambdas.wording.chat`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

CHAT_VERSION: Final = "1.0"
CHAT_SOURCE: Final = "custom"
TEXT_TYPE: Final = "client-markdown"
DESCRIPTION_LIMIT: Final = 3000
"""Characters of a notification's description (the card itself goes out by e-mail)."""
LINE_LIMIT: Final = 300
"""Characters of one next step, keyword or summary."""
KEYWORD_LIMIT: Final = 8


class NoticeKind(StrEnum):
    """What a notice is about: the SNS message attribute `kind` and the chat `eventType`."""

    APPROVAL_REQUEST = "approval_request"
    APPROVAL_COUNTED = "approval_counted"
    """One approval of several required was counted: the others are asked for (SNS only)."""
    HELD = "held"
    CLOSED = "closed"
    STORM_HOLD = "storm_hold"
    STORM_HOLD_RESET = "storm_hold_reset"

    @property
    def event_type(self) -> str:
        """The chat `eventType`: `sdc-approval-request`, ... (letters, digits and hyphens, as
        custom actions' notification types must be)."""
        return "sdc-" + self.value.replace("_", "-")


@dataclass(frozen=True, slots=True)
class ChatNotification:
    kind: NoticeKind
    thread_id: str
    title: str
    description: str
    next_steps: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    summary: str = ""
    related: tuple[str, ...] = ()
    context: Mapping[str, str] | None = None
    custom_actions: bool = False
    """Whether the channel's custom action buttons may attach (`enableCustomActions`): a custom
    action whose notification type is this `eventType` reads its variables from `context`."""

    def to_json(self) -> dict[str, Any]:
        content: dict[str, Any] = {
            "textType": TEXT_TYPE,
            "title": _clip(self.title, LINE_LIMIT),
            "description": _clip(_inert(self.description), DESCRIPTION_LIMIT),
        }
        if self.next_steps:
            content["nextSteps"] = [_clip(step, LINE_LIMIT) for step in self.next_steps]
        if self.keywords:
            content["keywords"] = [
                _clip(word, LINE_LIMIT) for word in dict.fromkeys(self.keywords) if word
            ][:KEYWORD_LIMIT]
        metadata: dict[str, Any] = {
            "threadId": self.thread_id,
            "summary": _clip(self.summary or self.title, LINE_LIMIT),
            "eventType": self.kind.event_type,
        }
        if self.related:
            metadata["relatedResources"] = list(dict.fromkeys(r for r in self.related if r))
        if self.context:
            metadata["additionalContext"] = {k: v for k, v in self.context.items() if v}
        if self.custom_actions:
            metadata["enableCustomActions"] = True
        return {
            "version": CHAT_VERSION,
            "source": CHAT_SOURCE,
            "content": content,
            "metadata": metadata,
        }


def sns_message(text: str, chat: ChatNotification) -> str:
    """The `Message` of a `MessageStructure=json` publish: the text for e-mail and every other
    protocol (`default`: SNS sends it to each protocol without a key of its own), the custom
    notification JSON for `https`. The text is not repeated under `email`: the whole message
    must stay within SNS's 256 KB."""
    return json.dumps(
        {"default": text, "https": json.dumps(chat.to_json(), ensure_ascii=False)},
        ensure_ascii=False,
    )


def _inert(text: str) -> str:
    """Text a chat client shows as written: `&`, `<` and `>` escaped, so that nothing from a
    report (`<!channel>`, `<https://...|link>`) becomes a mention or a link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
