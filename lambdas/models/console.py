"""The Step Functions console's page of an ARN: where the card, the chat notice and the
lifecycle event send a person to look at an execution or to start an approval."""

from __future__ import annotations

from typing import Final

CONSOLE_PAGES: Final = {"stateMachine": "statemachines/view", "execution": "v2/executions/details"}
"""The Step Functions console's page of each kind of ARN."""


def console_link(arn: str | None) -> str | None:
    """The Step Functions console page of a state machine or an execution, from its ARN."""
    parts = (arn or "").split(":")
    if len(parts) < 7 or parts[2] != "states" or parts[5] not in CONSOLE_PAGES:
        return None
    region = parts[3]
    return (
        f"https://{region}.console.aws.amazon.com/states/home?region={region}"
        f"#/{CONSOLE_PAGES[parts[5]]}/{arn}"
    )


def console_page(region: str, service: str, fragment: str = "") -> str:
    """The AWS console's page of `service` in `region` (`fragment`: the page's own route)."""
    page = f"https://{region}.console.aws.amazon.com/{service}/home?region={region}"
    return f"{page}#{fragment}" if fragment else page


def region_of(arn: str | None) -> str | None:
    """The region an ARN names, or None for no ARN (or one without a region)."""
    parts = (arn or "").split(":")
    return parts[3] or None if len(parts) > 3 and parts[0] == "arn" else None
